/**
 * What a worker logs while the runtime is away: one line, then fewer and
 * fewer, then one line when it answers again.
 *
 * Every poll loop, the heartbeat loop, registration and each result being
 * delivered retry on their own while the runtime (or its database) cannot
 * answer. Logged one line per retry, a worker with several poll loops wrote
 * dozens of lines a minute through an outage, burying the rest of its log.
 * The poll loops, the heartbeat and registration share one Contact instead,
 * and each result being delivered has one of its own (a runtime that answers
 * polls may still fail to store one execution's result, and that must not
 * read as the runtime coming and going):
 *
 * - the first failure after the runtime last answered is logged as it is,
 *   with `logger.warn`;
 * - the failures after it are not logged, except one reminder when the next
 *   one is due: `reminders.firstMs` after the loss, then at intervals
 *   doubling up to `reminders.maxMs`, each saying how long the runtime has
 *   been away and how many lines were left out;
 * - the first answer after that is logged once, with `logger.info`
 *   ("runtime reachable again after 12.3 s", or the owner's `back` line).
 *
 * The Logger interface has no debug level (and `console.debug` prints), so
 * the lines left out are only counted. Only failures that mean "the runtime
 * is away" come here (`isAway`); a refusal is about the request and is
 * logged where it happens.
 */
import type { Logger } from "./logger.ts";

/** When reminders are due. Mutable for tests. */
export const reminders = { firstMs: 10_000, maxMs: 600_000 };

export class Contact {
  readonly #logger: Logger;
  readonly #clock: () => number;
  readonly #back: (away: string) => string;
  #lostAt: number | undefined;
  #gapMs = 0;
  #nextReminder = 0;
  #leftOut = 0;

  constructor(
    logger: Logger,
    clock: () => number = Date.now,
    back: (away: string) => string = (away) => `[orbit] runtime reachable again after ${away} s`,
  ) {
    this.#logger = logger;
    this.#clock = clock;
    this.#back = back;
  }

  get lost(): boolean {
    return this.#lostAt !== undefined;
  }

  /** Logs `line`, about a call the runtime did not answer, if it is due. */
  failed(line: string): void {
    const now = this.#clock();
    if (this.#lostAt === undefined) {
      this.#lostAt = now;
      this.#gapMs = reminders.firstMs;
      this.#nextReminder = now + this.#gapMs;
      this.#leftOut = 0;
      this.#logger.warn(line);
      return;
    }
    if (now < this.#nextReminder) {
      this.#leftOut += 1;
      return;
    }
    const away = seconds(now - this.#lostAt, 0);
    this.#logger.warn(
      `${line} (runtime unreachable for ${away} s; ${this.#leftOut} similar lines not logged)`,
    );
    this.#gapMs = Math.min(this.#gapMs * 2, reminders.maxMs);
    this.#nextReminder = now + this.#gapMs;
    this.#leftOut = 0;
  }

  /** Notes an answer from the runtime; logs the end of an outage once. */
  answered(): void {
    if (this.#lostAt === undefined) return;
    const away = seconds(this.#clock() - this.#lostAt, 1);
    this.#lostAt = undefined;
    this.#logger.info(this.#back(away));
  }
}

function seconds(ms: number, digits: number): string {
  return (ms / 1000).toFixed(digits);
}
