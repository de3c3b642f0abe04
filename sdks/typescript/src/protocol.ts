/**
 * The HTTP/JSON binding of the worker protocol (orbit.worker.v1): one function
 * per endpoint, with the wire's snake_case field names. Each call carries its
 * own deadline so a silent runtime cannot hold a loop forever.
 */
import { LONG_POLL_MARGIN_MS, withDeadline, type Client } from "./client.ts";
import type { Json } from "./json.ts";

/** The task message the runtime sends (protocol ExecuteTaskRequest). */
export interface TaskAssignment {
  token: string;
  execution_id: string;
  workflow: string;
  workflow_version: string;
  step_id: string;
  task_name: string;
  contract_version: string;
  input?: Json;
  idempotency_key: string;
  attempt: number;
  redelivery: boolean;
  deadline_ms?: number;
  timeout_ms?: number;
  /** The attempt's span (W3C trace context) when the runtime exports traces. */
  traceparent?: string;
}

export interface Contract {
  task_name: string;
  contract_version: string;
  /** Typed workers: the hash of the contract their code was generated from. */
  contract_hash?: string;
  /** With contract_hash: that contract's document, so a refusal can name the field. */
  contract?: Json;
}

export interface RegisterRequest {
  worker_id: string;
  runtime: string;
  contracts: Contract[];
  sdk: string;
  /** ORBIT protocol extensions the worker can use; a runtime that knows none ignores it. */
  extensions?: string[];
}

export interface Registration {
  worker_session_id: string;
  heartbeat_interval_ms: number;
  session_timeout_ms: number;
  warnings?: string[];
  /** The extensions asked for that the runtime offers; absent from a runtime that knows none. */
  extensions?: string[];
}

/** The extension that lets a result carry the next poll (docs/worker-protocol.md). */
export const RESULT_THEN_POLL = "result-then-poll";

/** The poll a result carries (result-then-poll). */
export interface NextPoll {
  worker_session_id: string;
  wait_ms: number;
}

export interface FailRequest {
  token: string;
  error_code: string;
  error_message: string;
  retryable: boolean;
  details?: Json;
}

export interface ResultAck {
  accepted: boolean;
  reason?: string;
  /**
   * With result-then-poll: the next task, or null when none came within the
   * wait; absent when no poll was made (then `poll_error` may say why).
   */
  task?: TaskAssignment | null;
  poll_error?: { code: string; message: string };
}

/** Deadline of calls that answer at once (not the long poll). */
export const CALL_TIMEOUT_MS = 30_000;

async function post<T>(
  client: Client,
  path: string,
  body: unknown,
  signal: AbortSignal | undefined,
  timeoutMs: number,
): Promise<{ status: number; body: T }> {
  const scope = withDeadline(signal, timeoutMs, `POST ${path}`);
  try {
    return await client.request<T>("POST", path, body, scope.signal);
  } finally {
    scope.dispose();
  }
}

export async function register(
  client: Client,
  request: RegisterRequest,
  signal?: AbortSignal,
): Promise<Registration> {
  return (
    await post<Registration>(client, "/v1/workers/register", request, signal, CALL_TIMEOUT_MS)
  ).body;
}

/** Resolves to undefined when no task arrived within `waitMs` (204). */
export async function poll(
  client: Client,
  sessionId: string,
  waitMs: number,
  signal?: AbortSignal,
): Promise<TaskAssignment | undefined> {
  const body = { worker_session_id: sessionId, wait_ms: waitMs };
  const answer = await post<TaskAssignment | null>(
    client,
    "/v1/workers/poll",
    body,
    signal,
    waitMs + LONG_POLL_MARGIN_MS,
  );
  return answer.status === 204 || answer.body === null ? undefined : answer.body;
}

/** Resolves to the tokens the runtime wants stopped. */
export async function heartbeat(
  client: Client,
  sessionId: string,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<string[]> {
  const body = { worker_session_id: sessionId };
  const answer = await post<{ cancel?: string[] }>(
    client,
    "/v1/workers/heartbeat",
    body,
    signal,
    timeoutMs,
  );
  return answer.body.cancel ?? [];
}

/**
 * Reports a success; with `poll` (result-then-poll), the answer also carries
 * the next task, so it may take up to the poll's wait, and `signal` ends it.
 */
export async function complete(
  client: Client,
  token: string,
  output: Json,
  poll?: NextPoll,
  signal?: AbortSignal,
): Promise<ResultAck> {
  const body = poll === undefined ? { token, output } : { token, output, poll };
  return report(client, "/v1/tasks/complete", body, poll, signal);
}

/** Reports a failure; `poll` and `signal` as for complete(). */
export async function fail(
  client: Client,
  request: FailRequest,
  poll?: NextPoll,
  signal?: AbortSignal,
): Promise<ResultAck> {
  const body = poll === undefined ? request : { ...request, poll };
  return report(client, "/v1/tasks/fail", body, poll, signal);
}

async function report(
  client: Client,
  path: string,
  body: unknown,
  poll: NextPoll | undefined,
  signal: AbortSignal | undefined,
): Promise<ResultAck> {
  if (poll === undefined)
    return (await post<ResultAck>(client, path, body, undefined, CALL_TIMEOUT_MS)).body;
  const timeoutMs = poll.wait_ms + LONG_POLL_MARGIN_MS;
  return (await post<ResultAck>(client, path, body, signal, timeoutMs)).body;
}

export async function unregister(client: Client, sessionId: string): Promise<void> {
  const body = { worker_session_id: sessionId };
  await post(client, "/v1/workers/unregister", body, undefined, CALL_TIMEOUT_MS);
}
