import { Client } from "./client.ts";
import type { Context } from "./context.ts";
import type { Logger } from "./logger.ts";
import { WorkerRun, type RegisteredTask } from "./run.ts";
import type { ClientOptions } from "./settings.ts";

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- unchecked input by design
export type Handler<I = any, O = any> = (input: I, ctx: Context) => O | Promise<O>;

export interface WorkerOptions extends ClientOptions {
  /** Identity sent at registration. Default `typescript-<pid>`. */
  workerId?: string | undefined;
  /** Number of poll loops, so the most tasks run at once. Default 4; below 1 means 1. */
  concurrency?: number | undefined;
  /** Announced runtime, matched against `using <language>`. Default "typescript". */
  runtime?: string | undefined;
  /** How long each long poll waits for a task. Default 20000; the runtime caps it at 60000. */
  pollWaitMs?: number | undefined;
  /** Destination of the SDK's own messages. Default console. */
  logger?: Logger | undefined;
  /**
   * Source of the random part of retry delays: a function returning numbers
   * in [0, 1]. Default Math.random; a constant makes the delays predictable.
   */
  random?: (() => number) | undefined;
}

const SIGNALS = ["SIGINT", "SIGTERM"] as const;

/** Serves task handlers to an ORBIT runtime. */
export class Worker {
  readonly workerId: string;
  /** The client every protocol call goes through. */
  readonly client: Client;
  readonly #runtime: string;
  readonly #concurrency: number;
  readonly #pollWaitMs: number;
  readonly #logger: Logger;
  readonly #random: () => number;
  readonly #tasks = new Map<string, RegisteredTask>();
  #current: WorkerRun | undefined;

  constructor(options: WorkerOptions = {}) {
    this.client = new Client(options);
    this.workerId = options.workerId ?? `typescript-${process.pid}`;
    this.#runtime = options.runtime ?? "typescript";
    const concurrency = Math.floor(options.concurrency ?? 4);
    this.#concurrency = concurrency >= 1 ? concurrency : 1;
    this.#pollWaitMs = options.pollWaitMs ?? 20_000;
    this.#logger = options.logger ?? console;
    this.#random = options.random ?? Math.random;
  }

  /**
   * Registers `handler` for `name` at `options.version` (default "1.0.0"),
   * which must match the task declaration in the .orbit files. The type
   * parameters only inform the compiler; the runtime has validated the input.
   */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- unchecked input by design
  task<I = any, O = any>(
    name: string,
    options: { version?: string | undefined },
    handler: Handler<I, O>,
  ): this {
    if (this.#current !== undefined) throw new Error("register every task before calling run()");
    if (this.#tasks.has(name)) throw new Error(`task \`${name}\` is already registered`);
    this.#tasks.set(name, { version: options.version ?? "1.0.0", handler });
    return this;
  }

  /**
   * Registers with the runtime, serves tasks, and resolves once a shutdown
   * (stop(), SIGINT or SIGTERM) has let running tasks finish and unregistered.
   * Rejects if task() was never called, and with ApiError if the runtime
   * turns the worker away; while it is unreachable or failing (5xx), retries.
   */
  async run(options: { handleSignals?: boolean | undefined } = {}): Promise<void> {
    if (this.#tasks.size === 0) {
      throw new Error("no task registered: call worker.task() before worker.run()");
    }
    if (this.#current !== undefined) throw new Error("the worker is already running");
    const run = new WorkerRun({
      client: this.client,
      workerId: this.workerId,
      runtime: this.#runtime,
      concurrency: this.#concurrency,
      pollWaitMs: this.#pollWaitMs,
      logger: this.#logger,
      tasks: this.#tasks,
      random: this.#random,
    });
    this.#current = run;
    let signalled = false;
    const onSignal = (signal: NodeJS.Signals): void => {
      if (signalled) {
        // A second Ctrl-C means "now": running handlers are abandoned, and
        // the runtime redelivers their tasks after the session timeout.
        this.#logger.warn(
          `[orbit] received ${signal} again: exiting now; running tasks are abandoned ` +
            "(the runtime redelivers them after the session timeout)",
        );
        process.exit(128 + (signal === "SIGINT" ? 2 : 15));
      }
      signalled = true;
      this.#logger.info(`[orbit] received ${signal}`);
      run.stop();
    };
    const handleSignals = options.handleSignals ?? true;
    if (handleSignals) for (const signal of SIGNALS) process.on(signal, onSignal);
    try {
      await run.run();
    } finally {
      if (handleSignals) for (const signal of SIGNALS) process.off(signal, onSignal);
      this.#current = undefined;
    }
  }

  /** Begins a graceful shutdown of the current run; run() resolves when it is done. */
  stop(): void {
    this.#current?.stop();
  }
}
