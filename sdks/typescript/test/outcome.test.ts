import assert from "node:assert/strict";
import { test } from "node:test";
import { inspect } from "node:util";
import { TaskError } from "../src/index.ts";
import { failRequest, failure, fromResult } from "../src/outcome.ts";

const live = new AbortController().signal;

test("objects complete the attempt; nothing completes it with {}", () => {
  assert.deepEqual(fromResult({ a: 1, skipped: undefined }), {
    kind: "complete",
    output: { a: 1 },
  });
  assert.deepEqual(fromResult(undefined), { kind: "complete", output: {} });
  assert.deepEqual(fromResult(null), { kind: "complete", output: {} });
});

test("anything but an object fails with a non-retryable INVALID_RESULT", () => {
  for (const value of [[1], 42, "text", true, new Date(0), { big: 1n }]) {
    const outcome = fromResult(value);
    assert.equal(outcome.kind, "fail", `for ${inspect(value)}`);
    assert.equal(outcome.error.code, "INVALID_RESULT");
    assert.equal(outcome.error.retryable, false);
  }
});

test("a TaskError is reported as thrown", () => {
  const error = new TaskError("CARD_DECLINED", "limit exceeded", { retryable: false });
  assert.deepEqual(failure(error, live), { kind: "fail", error });
});

test("an AbortError after cancellation reports the cancellation", () => {
  const controller = new AbortController();
  const reason = new TaskError("CANCELLED", "stop", { retryable: false });
  controller.abort(reason);
  const abort = new DOMException("This operation was aborted", "AbortError");
  assert.deepEqual(failure(abort, controller.signal), { kind: "fail", error: reason });
  const unrelated = failure(abort, live);
  assert.ok(unrelated.kind === "fail");
  assert.equal(unrelated.error.code, "UNHANDLED_EXCEPTION");
});

test("other throws become UNHANDLED_EXCEPTION with the first lines of the stack", () => {
  const thrown = new RangeError("too far");
  const outcome = failure(thrown, live);
  assert.ok(outcome.kind === "fail");
  assert.equal(outcome.error.code, "UNHANDLED_EXCEPTION");
  assert.equal(outcome.error.message, "RangeError: too far");
  assert.equal(outcome.error.retryable, true);
  assert.equal(outcome.thrown, thrown);
  const { stack } = outcome.error.details as { stack: string };
  assert.equal(stack, (thrown.stack ?? "").split("\n").slice(0, 10).join("\n"));

  const text = failure("plain text", live);
  assert.ok(text.kind === "fail");
  assert.equal(text.error.message, "plain text");
  const object = failure({ reason: "odd" }, live);
  assert.ok(object.kind === "fail");
  assert.equal(object.error.message, "{ reason: 'odd' }");
});

test("TaskError defaults: empty message, retryable, no details", () => {
  const error = new TaskError("BUSY");
  assert.equal(error.name, "TaskError");
  assert.equal(error.message, "");
  assert.equal(error.retryable, true);
  assert.equal(error.details, undefined);
  assert.ok(error instanceof Error);
});

test("fail requests carry details JSON can encode, and text for the rest", () => {
  assert.deepEqual(failRequest("t", new TaskError("X", "m", { details: [1, "two"] })), {
    token: "t",
    error_code: "X",
    error_message: "m",
    retryable: true,
    details: [1, "two"],
  });
  assert.deepEqual(failRequest("t", new TaskError("X", "m", { details: null })).details, null);
  const cyclic: Record<string, unknown> = {};
  cyclic.self = cyclic;
  const request = failRequest("t", new TaskError("X", "m", { details: cyclic as never }));
  assert.equal(typeof request.details, "string");
});
