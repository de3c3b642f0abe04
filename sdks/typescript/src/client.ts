import { ApiError } from "./errors.ts";
import { resolveSettings, type ClientOptions } from "./settings.ts";
import { scopedSignal } from "./timing.ts";
import { createSend, type HttpResponse, type Send } from "./transport.ts";

/** How long start, signal and query wait for an answer. */
const CALL_TIMEOUT_MS = 60_000;
/** Added to a long poll's own wait, so the runtime always answers first. */
export const LONG_POLL_MARGIN_MS = 15_000;

/** Calls the runtime's HTTP API. Workers use one for every protocol call. */
export class Client {
  /** The resolved runtime URL, without a trailing slash. */
  readonly server: string;
  readonly #token: string | undefined;
  readonly #send: Send;

  constructor(options: ClientOptions = {}) {
    const settings = resolveSettings(options);
    this.server = settings.server;
    this.#token = settings.token;
    this.#send = createSend(settings);
  }

  /**
   * Sends one JSON request. `body` is null when the answer is empty. Throws
   * ApiError for a status of 400 or more and when no answer arrives; when
   * `signal` aborts, rejects with its reason. There is no timeout beyond it.
   */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the book's signature
  async request<T = any>(
    method: string,
    path: string,
    body?: unknown,
    signal?: AbortSignal,
  ): Promise<{ status: number; body: T }> {
    const url = this.server + path;
    const headers: Record<string, string> = { accept: "application/json" };
    if (this.#token !== undefined) headers.authorization = `Bearer ${this.#token}`;
    let payload: string | undefined;
    if (body !== undefined) {
      headers["content-type"] = "application/json";
      payload = JSON.stringify(body);
    }
    let response: HttpResponse;
    try {
      response = await this.#send({ method, url, headers, body: payload, signal });
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      throw new ApiError(0, "CONNECTION", `${method} ${url}: ${describeFailure(err)}`, {
        cause: err,
      });
    }
    return decode<T>(response);
  }

  /** Starts an execution and resolves to its id. */
  async start(
    workflow: string,
    input: unknown = {},
    options: { version?: string | undefined; executionId?: string | undefined } = {},
  ): Promise<string> {
    const body: Record<string, unknown> = { workflow, input };
    if (options.version !== undefined) body.version = options.version;
    if (options.executionId !== undefined) body.execution_id = options.executionId;
    const answer = await this.#call<{ execution_id: string }>("POST", "/v1/executions", body);
    return answer.execution_id;
  }

  /**
   * Long-polls until the execution is terminal or `timeoutMs` passes, and
   * resolves to its state either way: check `status`.
   */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the book's signature
  async wait(executionId: string, timeoutMs = 30_000): Promise<any> {
    const path = `${executionPath(executionId)}/wait?timeout_ms=${timeoutMs}`;
    return this.#call("GET", path, undefined, timeoutMs + LONG_POLL_MARGIN_MS);
  }

  /** Sends a signal and resolves to the sequence number of its SignalReceived event. */
  async signal(executionId: string, name: string, payload: unknown = {}): Promise<number> {
    const path = `${executionPath(executionId)}/signals/${encodeURIComponent(name)}`;
    const answer = await this.#call<{ seq: number }>("POST", path, payload);
    return answer.seq;
  }

  /** Evaluates a declared query. `T` is not checked at run time. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the book's signature
  async query<T = any>(executionId: string, name: string): Promise<T> {
    const path = `${executionPath(executionId)}/queries/${encodeURIComponent(name)}`;
    const answer = await this.#call<{ value: T }>("GET", path);
    return answer.value;
  }

  async #call<T>(
    method: string,
    path: string,
    body?: unknown,
    timeoutMs = CALL_TIMEOUT_MS,
  ): Promise<T> {
    const scope = withDeadline(undefined, timeoutMs, `${method} ${path}`);
    try {
      return (await this.request<T>(method, path, body, scope.signal)).body;
    } finally {
      scope.dispose();
    }
  }
}

/**
 * A signal that follows `parent` and gives up after `timeoutMs`; a timeout
 * surfaces from Client.request as a connection ApiError, like a lost answer.
 */
export function withDeadline(parent: AbortSignal | undefined, timeoutMs: number, what: string) {
  return scopedSignal(
    parent,
    timeoutMs,
    () => new ApiError(0, "CONNECTION", `${what}: no answer within ${timeoutMs} ms`),
  );
}

function executionPath(executionId: string): string {
  return `/v1/executions/${encodeURIComponent(executionId)}`;
}

function decode<T>(response: HttpResponse): { status: number; body: T } {
  const { status, text } = response;
  let body: unknown = null;
  let parsed = true;
  if (text.trim() !== "") {
    try {
      body = JSON.parse(text);
    } catch {
      parsed = false;
    }
  }
  if (status >= 400) {
    const error = parsed ? errorEnvelope(body) : undefined;
    if (error !== undefined) throw new ApiError(status, error.code, error.message);
    throw new ApiError(status, "HTTP_ERROR", text.trim() || `HTTP ${status}`);
  }
  if (!parsed)
    throw new ApiError(status, "HTTP_ERROR", `the answer is not JSON: ${text.slice(0, 200)}`);
  return { status, body: body as T };
}

/** The runtime's `{"error": {"code", "message"}}` body, when that is what came. */
function errorEnvelope(body: unknown): { code: string; message: string } | undefined {
  if (typeof body !== "object" || body === null || !("error" in body)) return undefined;
  const error: unknown = body.error;
  if (typeof error !== "object" || error === null || !("code" in error)) return undefined;
  if (typeof error.code !== "string") return undefined;
  const message = "message" in error && typeof error.message === "string" ? error.message : "";
  return { code: error.code, message };
}

/** fetch reports "fetch failed" and keeps the useful part in `cause`. */
function describeFailure(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause: unknown = err.cause;
  return cause instanceof Error ? cause.message : err.message;
}
