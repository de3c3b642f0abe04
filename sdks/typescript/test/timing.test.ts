import assert from "node:assert/strict";
import { test } from "node:test";
import { Backoff, scopedSignal, sleep } from "../src/timing.ts";

test("backoff starts at 200 ms, doubles, stops at 5 s and resets", () => {
  const backoff = new Backoff();
  const delays = Array.from({ length: 8 }, () => backoff.next());
  assert.deepEqual(delays, [200, 400, 800, 1600, 3200, 5000, 5000, 5000]);
  backoff.reset();
  assert.equal(backoff.next(), 200);
});

test("a scoped signal follows its parent and its own deadline, and lets go of the parent", async () => {
  const parent = new AbortController();
  const scope = scopedSignal(parent.signal, 20, () => "late");
  await sleep(60);
  assert.equal(scope.signal.reason, "late");
  scope.dispose();

  const followed = scopedSignal(parent.signal, undefined, () => "never");
  parent.abort("stopping");
  assert.equal(followed.signal.reason, "stopping");

  const detached = new AbortController();
  const other = scopedSignal(detached.signal, undefined, () => "never");
  other.dispose();
  detached.abort("after dispose");
  assert.equal(other.signal.aborted, false);
});

test("sleep ends early when its signal aborts", async () => {
  const controller = new AbortController();
  const started = Date.now();
  const sleeping = sleep(10_000, controller.signal);
  controller.abort();
  await sleeping;
  assert.ok(Date.now() - started < 1000);
});
