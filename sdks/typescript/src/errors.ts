import type { Json } from "./json.ts";

/**
 * A structured failure thrown by a task handler. The runtime's retry policy
 * reads `code` and `retryable`; `details` is kept in the execution history.
 */
export class TaskError extends Error {
  override readonly name = "TaskError";
  readonly code: string;
  readonly retryable: boolean;
  readonly details: Json | undefined;

  constructor(
    code: string,
    message = "",
    options: { retryable?: boolean | undefined; details?: Json | undefined } = {},
  ) {
    super(message);
    this.code = code;
    this.retryable = options.retryable ?? true;
    this.details = options.details;
  }
}

/**
 * A request to the runtime that failed: an error status (`status` >= 400 with
 * the runtime's error `code`, or `HTTP_ERROR` when the body carries none) or no
 * answer at all (`status` 0, `code` `CONNECTION`).
 */
export class ApiError extends Error {
  override readonly name = "ApiError";
  readonly status: number;
  readonly code: string;

  constructor(status: number, code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.status = status;
    this.code = code;
  }

  get isConnectionError(): boolean {
    return this.status === 0;
  }
}

/** Whether the same request may succeed later: there was no answer, or a 5xx. */
export function isTransient(err: unknown): boolean {
  return err instanceof ApiError && (err.status === 0 || err.status >= 500);
}

/**
 * The runtime, its database or a proxy before it could not answer the call
 * itself: no answer, a 5xx, a proxy's 408, or a 429 shedding load.
 */
export function isAway(err: unknown): boolean {
  return (
    isTransient(err) || (err instanceof ApiError && (err.status === 408 || err.status === 429))
  );
}

export function hasCode(err: unknown, code: string): boolean {
  return err instanceof ApiError && err.code === code;
}

/** A one-line account of a failure for the SDK's log messages. */
export function explain(err: unknown): string {
  if (err instanceof ApiError) return `${err.code}: ${err.message}`;
  return err instanceof Error ? err.message : String(err);
}
