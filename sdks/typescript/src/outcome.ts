/**
 * Turns what a handler did (returned or threw) into the result the runtime
 * receives. Pure apart from calling the handler, so every rule of the book's
 * "Handlers and results" section is tested without a server.
 */
import { inspect } from "node:util";
import type { Context } from "./context.ts";
import { TaskError } from "./errors.ts";
import type { Json } from "./json.ts";
import type { FailRequest } from "./protocol.ts";

export type Outcome =
  { kind: "complete"; output: Json } | { kind: "fail"; error: TaskError; thrown?: unknown };

/** How much of a stack trace goes into `details.stack`. */
const STACK_LINES = 10;

export async function runHandler(
  handler: (input: never, ctx: Context) => unknown,
  input: Json | undefined,
  ctx: Context,
): Promise<Outcome> {
  let value: unknown;
  try {
    value = await handler((input ?? {}) as never, ctx);
  } catch (thrown) {
    return failure(thrown, ctx.signal);
  }
  return fromResult(value);
}

export function fromResult(value: unknown): Outcome {
  if (value === undefined || value === null) return { kind: "complete", output: {} };
  if (typeof value !== "object" || Array.isArray(value)) {
    const what = Array.isArray(value) ? "an array" : `a ${typeof value}`;
    return invalidResult(`the handler returned ${what}; a task result must be a JSON object`);
  }
  // Encoded now, so that a result that cannot be sent fails the attempt
  // instead of leaving it in flight (a toJSON may even turn it into a string).
  let output: Json | undefined;
  try {
    output = roundTrip(value);
  } catch (err) {
    return invalidResult(`the result cannot be encoded as JSON: ${String(err)}`);
  }
  if (typeof output !== "object" || output === null || Array.isArray(output)) {
    return invalidResult("the handler's result does not encode as a JSON object");
  }
  return { kind: "complete", output };
}

/** The wire form of a failure; details that JSON cannot carry are sent as text. */
export function failRequest(token: string, error: TaskError): FailRequest {
  const request: FailRequest = {
    token,
    error_code: error.code,
    error_message: error.message,
    retryable: error.retryable,
  };
  if (error.details !== undefined) {
    try {
      const details = roundTrip(error.details);
      if (details !== undefined) request.details = details;
    } catch {
      request.details = inspect(error.details, { breakLength: Infinity });
    }
  }
  return request;
}

function roundTrip(value: unknown): Json | undefined {
  const text = JSON.stringify(value) as string | undefined;
  return text === undefined ? undefined : (JSON.parse(text) as Json);
}

export function failure(thrown: unknown, signal: AbortSignal): Outcome {
  if (thrown instanceof TaskError) return { kind: "fail", error: thrown };
  // An API that honoured ctx.signal may throw its own AbortError instead of
  // the signal's reason; either way the runtime asked for the stop.
  if (signal.aborted && signal.reason instanceof TaskError && isAbortError(thrown)) {
    return { kind: "fail", error: signal.reason };
  }
  if (thrown instanceof Error) {
    const stack = (thrown.stack ?? "").split("\n").slice(0, STACK_LINES).join("\n");
    const error = new TaskError("UNHANDLED_EXCEPTION", `${thrown.name}: ${thrown.message}`, {
      details: { stack },
    });
    return { kind: "fail", error, thrown };
  }
  const text = typeof thrown === "string" ? thrown : inspect(thrown, { breakLength: Infinity });
  return { kind: "fail", error: new TaskError("UNHANDLED_EXCEPTION", text), thrown };
}

function invalidResult(message: string): Outcome {
  return { kind: "fail", error: new TaskError("INVALID_RESULT", message, { retryable: false }) };
}

function isAbortError(thrown: unknown): boolean {
  return thrown instanceof Error && thrown.name === "AbortError";
}
