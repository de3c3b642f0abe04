/**
 * Reporting an attempt's result: which answers to retry, for how long, and
 * what to do when the runtime will not take it.
 *
 * The runtime reconciles results by token, so sending one again is harmless
 * and a result held through an outage or a restart is still accepted later.
 * So:
 *
 * - no answer, any 5xx, 408 and 429 (`isAway`) mean the runtime, its database or a proxy
 *   in front of it is restarting, failing or overloaded: retried with backoff
 *   until the runtime answers, for up to `resultRetry.windowMs`, and no
 *   longer once shutdown has begun. Tries are not counted: a worker that gave
 *   up while it kept heartbeating would keep the attempt to itself, the
 *   runtime would never redeliver it, and a step without a timeout would wait
 *   forever after a storage outage of a few seconds;
 * - any other 4xx is the runtime refusing the report, which sending it
 *   again cannot change.
 *
 * A refused report would leave the attempt in flight until its timeout
 * (forever without one), so the attempt is reported as failed instead, once,
 * with `INVALID_RESULT`, not retryable, and a small body that carries the
 * runtime's error. A refusal of the credentials (401, 403) gets no fallback,
 * which would be refused the same way.
 *
 * When the runtime offers result-then-poll, a report carries the poll loop's
 * next poll and its answer may bring the next task: one request per task
 * instead of two. The result's rules stay: a refused report took no task, an
 * answer without a task sends the loop back to its own poll (which meets a
 * lost session as usual), and once shutdown begins a report carries no poll;
 * one whose poll is waiting then is ended and sent again without it.
 */
import type { Client } from "./client.ts";
import { Contact } from "./contact.ts";
import { ApiError, explain, isAway } from "./errors.ts";
import type { Json } from "./json.ts";
import type { Logger } from "./logger.ts";
import { failRequest, type Outcome } from "./outcome.ts";
import * as protocol from "./protocol.ts";
import { Backoff, sleep, type RandomSource } from "./timing.ts";

/**
 * The limits of result retries. The runtime redelivers an attempt whose worker
 * went silent for a session timeout (30 s by default), so a result held much
 * longer than ten minutes is rarely the one that counts. Mutable for tests.
 */
export const resultRetry = { windowMs: 600_000 };

const CREDENTIALS = new Set([401, 403]);
/** Keeps the fallback report small even if the runtime's message is not. */
const MAX_MESSAGE_CHARS = 2000;

/** A report as sent: a fallback is the failure sent in place of a refused one. */
type Report =
  | { kind: "complete"; output: Json }
  | { kind: "fail"; request: protocol.FailRequest; fallback: boolean };

export class Reporter {
  readonly #client: Client;
  readonly #logger: Logger;
  readonly #stopping: AbortSignal;
  readonly #random: RandomSource;

  constructor(client: Client, logger: Logger, stopping: AbortSignal, random: RandomSource) {
    this.#client = client;
    this.#logger = logger;
    this.#stopping = stopping;
    this.#random = random;
  }

  /**
   * Reports `outcome`; if the runtime refuses it, reports a failure in its
   * place. `nextPoll` gives the poll a report may carry (undefined: none);
   * resolves to the task an answer brought, if any.
   */
  async deliver(
    task: protocol.TaskAssignment,
    outcome: Outcome,
    nextPoll: () => protocol.NextPoll | undefined = () => undefined,
  ): Promise<protocol.TaskAssignment | undefined> {
    const first: Report =
      outcome.kind === "complete"
        ? { kind: "complete", output: outcome.output }
        : { kind: "fail", request: failRequest(task.token, outcome.error), fallback: false };
    let sent = await this.#send(task, first, nextPoll);
    if (sent.refusal === undefined) return sent.next;
    const fallback = fallbackFor(task, first, sent.refusal);
    if (fallback !== undefined) {
      this.#logger.warn(
        `[orbit] result for ${describeTask(task)} refused: ${explain(sent.refusal)}; reporting the attempt as failed`,
      );
      sent = await this.#send(task, fallback, nextPoll);
    }
    if (sent.refusal !== undefined) {
      this.#logger.error(
        `[orbit] result for ${describeTask(task)} refused: ${explain(sent.refusal)}`,
      );
    }
    return sent.next;
  }

  /**
   * Sends until answered: the error if refused (undefined once answered or
   * given up), and the next task the answer brought.
   */
  async #send(
    task: protocol.TaskAssignment,
    report: Report,
    nextPoll: () => protocol.NextPoll | undefined,
  ): Promise<{ refusal?: ApiError; next?: protocol.TaskAssignment }> {
    const backoff = new Backoff(this.#random);
    // This result's own: the runtime may answer polls and still fail it.
    const contact = new Contact(
      this.#logger,
      Date.now,
      (away) => `[orbit] result for ${describeTask(task)} delivered after ${away} s of retries`,
    );
    const giveUpAt = Date.now() + resultRetry.windowMs;
    for (;;) {
      const poll = this.#stopping.aborted ? undefined : nextPoll();
      try {
        const ack =
          report.kind === "complete"
            ? await protocol.complete(this.#client, task.token, report.output, poll, this.#stopping)
            : await protocol.fail(this.#client, report.request, poll, this.#stopping);
        contact.answered();
        if (!ack.accepted) {
          const reason = ack.reason ?? "no reason given";
          this.#logger.info(`[orbit] result for ${describeTask(task)} not accepted: ${reason}`);
        }
        return ack.task ? { next: ack.task } : {};
      } catch (err) {
        if (poll !== undefined && this.#stopping.aborted) {
          // Shutdown ended the wait for a next task: the result goes again,
          // without the poll (sending it twice is harmless).
          continue;
        }
        if (!(err instanceof ApiError)) {
          this.#logger.error(`[orbit] result for ${describeTask(task)} not sent: ${explain(err)}`);
          return {};
        }
        if (!isAway(err)) {
          contact.answered();
          return { refusal: err };
        }
        if (this.#stopping.aborted) {
          this.#logger.warn(
            `[orbit] result for ${describeTask(task)} not delivered before shutdown: ${explain(err)}`,
          );
          return {};
        }
        const delay = backoff.next();
        if (Date.now() + delay > giveUpAt) {
          this.#logger.error(
            `[orbit] result for ${describeTask(task)} not delivered after ${resultRetry.windowMs / 1000} s of retries: ${explain(err)}`,
          );
          return {};
        }
        contact.failed(
          `[orbit] cannot deliver the result for ${describeTask(task)}: ${explain(err)}; retrying in ${delay} ms`,
        );
        await sleep(delay, this.#stopping);
      }
    }
  }
}

function fallbackFor(
  task: protocol.TaskAssignment,
  refused: Report,
  error: ApiError,
): Report | undefined {
  if (CREDENTIALS.has(error.status) || (refused.kind === "fail" && refused.fallback)) {
    return undefined;
  }
  const details: Record<string, Json> = { refused: refused.kind };
  if (refused.kind === "fail") details.error_code = refused.request.error_code;
  details.status = error.status;
  details.code = error.code;
  details.message = clip(error.message);
  const described = clip(`${error.code} (${error.status}): ${error.message}`);
  const request: protocol.FailRequest = {
    token: task.token,
    error_code: "INVALID_RESULT",
    error_message: `the runtime refused the task's result: ${described}`,
    retryable: false,
    details,
  };
  return { kind: "fail", request, fallback: true };
}

function clip(text: string): string {
  return text.length <= MAX_MESSAGE_CHARS ? text : `${text.slice(0, MAX_MESSAGE_CHARS - 1)}…`;
}

export function describeTask(task: protocol.TaskAssignment): string {
  return `${task.task_name} (execution ${task.execution_id}, step ${task.step_id}, attempt ${task.attempt})`;
}
