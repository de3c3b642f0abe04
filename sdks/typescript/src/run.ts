/**
 * One run of a worker, from registration to unregistration: the poll loops,
 * the heartbeat loop, task execution and the shutdown order (stop polling,
 * let running tasks finish and report, then unregister). Results go through
 * the Reporter of delivery.ts, which decides what to retry and for how long.
 */
import type { Client } from "./client.ts";
import { TaskContext, type Context } from "./context.ts";
import { Contact } from "./contact.ts";
import { explain, hasCode, isAway, isTransient, TaskError } from "./errors.ts";
import type { Json } from "./json.ts";
import type { Logger } from "./logger.ts";
import { describeTask, Reporter } from "./delivery.ts";
import { runHandler, type Outcome } from "./outcome.ts";
import { inTaskSpan } from "./tracing.ts";
import * as protocol from "./protocol.ts";
import { Session } from "./session.ts";
import { Backoff, sleep, type RandomSource } from "./timing.ts";
import { SDK_VERSION } from "./version.ts";

export interface RegisteredTask {
  version: string;
  handler: (input: never, ctx: Context) => unknown;
  /** Typed contracts (orbit codegen): announced with their hash. */
  typed?: { contract_hash: string; contract?: Json } | undefined;
}

export interface RunConfig {
  client: Client;
  workerId: string;
  runtime: string;
  concurrency: number;
  pollWaitMs: number;
  logger: Logger;
  tasks: ReadonlyMap<string, RegisteredTask>;
  /** Jitter of every retry delay. */
  random: RandomSource;
}

interface Running {
  task: protocol.TaskAssignment;
  controller: AbortController;
}

export class WorkerRun {
  readonly #config: RunConfig;
  readonly #logger: Logger;
  /** Aborted when shutdown begins: ends polls, heartbeats and retry waits. */
  readonly #stopping = new AbortController();
  readonly #session: Session;
  readonly #reporter: Reporter;
  /** Whether the runtime answers, for the lines logged while it does not. */
  readonly #contact: Contact;
  readonly #running = new Map<string, Running>();
  #fatal: { error: unknown } | undefined;

  constructor(config: RunConfig) {
    this.#config = config;
    this.#logger = config.logger;
    this.#contact = new Contact(config.logger);
    const contracts = [...config.tasks].map(([name, task]) => ({
      task_name: name,
      contract_version: task.version,
      ...task.typed,
    }));
    this.#session = new Session(
      config.client,
      {
        worker_id: config.workerId,
        runtime: config.runtime,
        contracts,
        sdk: `orbit-typescript/${SDK_VERSION}`,
      },
      config.logger,
      this.#stopping.signal,
      config.random,
      this.#contact,
    );
    this.#reporter = new Reporter(
      config.client,
      config.logger,
      this.#stopping.signal,
      config.random,
    );
  }

  /** A method, not a getter: the compiler would keep a getter's value narrowed across awaits. */
  #isStopping(): boolean {
    return this.#stopping.signal.aborted;
  }

  stop(): void {
    if (this.#isStopping()) return;
    this.#logger.info(
      "[orbit] shutting down: stopped polling; running tasks finish first (Ctrl-C again abandons them)",
    );
    this.#stopping.abort();
  }

  async run(): Promise<void> {
    if (!(await this.#session.open())) return;
    // A loop that fails in an unforeseen way ends the run in order, like a refusal.
    const guard = (loop: Promise<void>): Promise<void> =>
      loop.catch((err: unknown) => {
        this.#abandon(err);
      });
    const heartbeats = guard(this.#heartbeatLoop());
    const loops = Array.from({ length: this.#config.concurrency }, () => guard(this.#pollLoop()));
    await Promise.all(loops);
    await heartbeats;
    await this.#unregister();
    if (this.#fatal !== undefined) throw this.#fatal.error;
  }

  async #pollLoop(): Promise<void> {
    const { client, pollWaitMs } = this.#config;
    const backoff = new Backoff(this.#config.random);
    // A task the last result's answer brought (result-then-poll).
    let task: protocol.TaskAssignment | undefined;
    for (;;) {
      if (task === undefined) {
        if (this.#isStopping()) return;
        const sessionId = this.#session.id;
        try {
          task = await protocol.poll(client, sessionId, pollWaitMs, this.#stopping.signal);
          this.#contact.answered();
          backoff.reset();
        } catch (err) {
          if (this.#isStopping()) return;
          if (!isAway(err)) this.#contact.answered();
          if (hasCode(err, "UNKNOWN_SESSION")) {
            await this.#renew(sessionId);
          } else if (isTransient(err)) {
            const delay = backoff.next();
            this.#contact.failed(`[orbit] poll failed: ${explain(err)}; retrying in ${delay} ms`);
            await sleep(delay, this.#stopping.signal);
          } else {
            this.#abandon(err);
          }
          continue;
        }
        if (task === undefined) continue;
      }
      // A task that arrives as shutdown begins is still run: it is ours now.
      task = await this.#execute(task);
    }
  }

  /** The poll a result carries, when the runtime offers result-then-poll. */
  #nextPoll = (): protocol.NextPoll | undefined =>
    this.#session.resultThenPoll && !this.#isStopping()
      ? { worker_session_id: this.#session.id, wait_ms: this.#config.pollWaitMs }
      : undefined;

  async #heartbeatLoop(): Promise<void> {
    const { client } = this.#config;
    for (;;) {
      await sleep(this.#session.heartbeatIntervalMs, this.#stopping.signal);
      if (this.#isStopping()) return;
      const sessionId = this.#session.id;
      try {
        const timeoutMs = this.#session.sessionTimeoutMs;
        const cancel = await protocol.heartbeat(
          client,
          sessionId,
          timeoutMs,
          this.#stopping.signal,
        );
        this.#contact.answered();
        for (const token of cancel) this.#cancel(token);
      } catch (err) {
        if (this.#isStopping()) return;
        if (!isAway(err)) this.#contact.answered();
        if (hasCode(err, "UNKNOWN_SESSION")) await this.#renew(sessionId);
        else if (isTransient(err))
          this.#contact.failed(`[orbit] heartbeat failed: ${explain(err)}`);
        else this.#abandon(err);
      }
    }
  }

  async #renew(staleId: string): Promise<void> {
    try {
      await this.#session.renew(staleId);
    } catch (err) {
      this.#abandon(err);
    }
  }

  /** A failure that waiting will not cure: shut down and make run() reject with it. */
  #abandon(err: unknown): void {
    this.#fatal ??= { error: err };
    this.#logger.error(`[orbit] cannot continue: ${explain(err)}`);
    this.stop();
  }

  #cancel(token: string): void {
    const running = this.#running.get(token);
    if (running === undefined || running.controller.signal.aborted) return;
    this.#logger.info(`[orbit] the runtime cancelled ${describeTask(running.task)}`);
    const reason = new TaskError("CANCELLED", "the runtime cancelled this attempt", {
      retryable: false,
    });
    running.controller.abort(reason);
  }

  /** Runs and reports `task`; resolves to the next task when the report brought one. */
  async #execute(task: protocol.TaskAssignment): Promise<protocol.TaskAssignment | undefined> {
    const controller = new AbortController();
    this.#running.set(task.token, { task, controller });
    const ctx = new TaskContext(task, controller.signal);
    let outcome: Outcome;
    try {
      ctx.log("executing", { task: task.task_name, redelivery: task.redelivery });
      const registered = this.#config.tasks.get(task.task_name);
      if (registered?.version === task.contract_version) {
        outcome = await inTaskSpan(task, () => runHandler(registered.handler, task.input, ctx));
      } else {
        const message = `this worker does not serve ${task.task_name}@${task.contract_version}`;
        outcome = { kind: "fail", error: new TaskError("UNKNOWN_TASK", message) };
      }
    } finally {
      this.#running.delete(task.token);
    }
    if (outcome.kind === "fail") {
      ctx.log("task failed", { code: outcome.error.code, retryable: outcome.error.retryable });
      if (outcome.thrown !== undefined) {
        this.#logger.error(`[orbit] ${describeTask(task)} threw:`, outcome.thrown);
      }
    }
    return this.#reporter.deliver(task, outcome, this.#nextPoll);
  }

  async #unregister(): Promise<void> {
    const { client } = this.#config;
    try {
      try {
        await protocol.unregister(client, this.#session.id);
      } catch (err) {
        if (!hasCode(err, "UNKNOWN_SESSION")) throw err;
        // The protocol's rule for a forgotten session: register, then retry.
        await this.#session.reopenForClose();
        await protocol.unregister(client, this.#session.id);
      }
    } catch (err) {
      this.#logger.warn(`[orbit] could not unregister: ${explain(err)}`);
    }
  }
}
