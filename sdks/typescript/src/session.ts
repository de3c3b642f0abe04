import type { Client } from "./client.ts";
import type { Contact } from "./contact.ts";
import { explain, isTransient } from "./errors.ts";
import type { Logger } from "./logger.ts";
import * as protocol from "./protocol.ts";
import { Backoff, sleep, type RandomSource } from "./timing.ts";

/**
 * The worker's session with the runtime. After a runtime restart every loop
 * learns of the loss at about the same time (404 UNKNOWN_SESSION); they share
 * one new registration instead of opening a session each.
 */
export class Session {
  readonly #client: Client;
  readonly #request: protocol.RegisterRequest;
  readonly #logger: Logger;
  readonly #stopping: AbortSignal;
  readonly #random: RandomSource;
  readonly #contact: Contact;
  #id: string | undefined;
  #renewal: Promise<boolean> | undefined;
  heartbeatIntervalMs = 5000;
  sessionTimeoutMs = 30_000;
  /** Whether the runtime offered result-then-poll at the last registration. */
  resultThenPoll = false;

  constructor(
    client: Client,
    request: protocol.RegisterRequest,
    logger: Logger,
    stopping: AbortSignal,
    random: RandomSource,
    contact: Contact,
  ) {
    this.#client = client;
    // Asks for the extensions this SDK uses; a runtime that does not know the
    // field ignores it and speaks the book's protocol.
    this.#request = { ...request, extensions: [protocol.RESULT_THEN_POLL] };
    this.#logger = logger;
    this.#stopping = stopping;
    this.#random = random;
    this.#contact = contact;
  }

  #isStopping(): boolean {
    return this.#stopping.aborted;
  }

  /** The current session id; set once open() has succeeded. */
  get id(): string {
    if (this.#id === undefined) throw new Error("the worker has no session yet");
    return this.#id;
  }

  get isOpen(): boolean {
    return this.#id !== undefined;
  }

  /**
   * Registers, retrying while the runtime is unreachable or failing (5xx).
   * Resolves to false when shutdown began first; rejects with ApiError when
   * the runtime refuses the registration.
   */
  async open(): Promise<boolean> {
    const backoff = new Backoff(this.#random);
    for (;;) {
      if (this.#isStopping()) return false;
      try {
        await this.#register(this.#stopping, true);
        return true;
      } catch (err) {
        if (this.#isStopping()) return false;
        if (!isTransient(err)) throw err;
        const delay = backoff.next();
        this.#contact.failed(
          `[orbit] cannot register with ${this.#client.server}: ${explain(err)}; retrying in ${delay} ms`,
        );
        await sleep(delay, this.#stopping);
      }
    }
  }

  /** Replaces the session `staleId` after the runtime forgot it. */
  async renew(staleId: string): Promise<void> {
    if (this.#id !== staleId) return; // another loop already renewed it
    this.#renewal ??= (async () => {
      this.#logger.info(
        "[orbit] the runtime does not know this session any more; registering again",
      );
      try {
        return await this.open();
      } finally {
        this.#renewal = undefined;
      }
    })();
    await this.#renewal;
  }

  /**
   * One registration attempt that ignores shutdown, used to close a session
   * the runtime had already forgotten when the worker unregisters.
   */
  async reopenForClose(): Promise<void> {
    await this.#register(undefined, false);
  }

  async #register(signal: AbortSignal | undefined, announce: boolean): Promise<void> {
    const answer = await protocol.register(this.#client, this.#request, signal);
    this.#contact.answered();
    this.#id = answer.worker_session_id;
    // Kept from before when absent, so a sparse answer cannot make the heartbeat spin.
    if (answer.heartbeat_interval_ms > 0) this.heartbeatIntervalMs = answer.heartbeat_interval_ms;
    if (answer.session_timeout_ms > 0) this.sessionTimeoutMs = answer.session_timeout_ms;
    // Read anew each time: a runtime restarted with other settings may offer less.
    this.resultThenPoll = (answer.extensions ?? []).includes(protocol.RESULT_THEN_POLL);
    if (!announce) return;
    const count = this.#request.contracts.length;
    this.#logger.info(`[orbit] worker ${this.#request.worker_id} registered (${count} tasks)`);
    for (const warning of answer.warnings ?? []) this.#logger.warn(`[orbit] runtime: ${warning}`);
  }
}
