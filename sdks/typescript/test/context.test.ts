import assert from "node:assert/strict";
import { test } from "node:test";
import { TaskContext } from "../src/context.ts";
import type { TaskAssignment } from "../src/index.ts";

const task: TaskAssignment = {
  token: "tok",
  execution_id: "e-1",
  workflow: "Hello",
  workflow_version: "1.1.0",
  step_id: "compensate:publish",
  task_name: "greeting.unpublish",
  contract_version: "1.0.0",
  input: { post_id: "p-1" },
  idempotency_key: "e-1/compensate:publish",
  attempt: 1,
  redelivery: false,
};

test("remainingMs() counts down to the deadline and never goes negative", () => {
  const signal = new AbortController().signal;
  assert.equal(new TaskContext(task, signal).remainingMs(), undefined);
  const soon = new TaskContext({ ...task, deadline_ms: Date.now() + 10_000 }, signal);
  const left = soon.remainingMs() ?? -1;
  assert.ok(left > 9000 && left <= 10_000, `remaining ${left}`);
  assert.equal(new TaskContext({ ...task, deadline_ms: Date.now() - 5 }, signal).remainingMs(), 0);
});

test("cancelled follows the signal", () => {
  const controller = new AbortController();
  const ctx = new TaskContext(task, controller.signal);
  assert.equal(ctx.cancelled, false);
  controller.abort();
  assert.equal(ctx.cancelled, true);
});

test("log() prints one JSON line tagged with the execution, step and attempt", (t) => {
  const lines: string[] = [];
  t.mock.method(console, "log", (line: string) => lines.push(line));
  const ctx = new TaskContext(task, new AbortController().signal);
  ctx.log("removed p-1");
  ctx.log("removed", { post_id: "p-1", step: "not-this-one" });
  ctx.log("odd", { big: 1n });
  assert.deepEqual(
    lines.map((l) => JSON.parse(l) as unknown),
    [
      { message: "removed p-1", execution_id: "e-1", step: "compensate:publish", attempt: 1 },
      {
        message: "removed",
        post_id: "p-1",
        execution_id: "e-1",
        step: "compensate:publish",
        attempt: 1,
      },
      {
        message: "odd",
        execution_id: "e-1",
        step: "compensate:publish",
        attempt: 1,
        log_error: "TypeError: Do not know how to serialize a BigInt",
      },
    ],
  );
});
