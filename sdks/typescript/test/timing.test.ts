import assert from "node:assert/strict";
import { test } from "node:test";
import { Backoff, scopedSignal, sleep } from "../src/timing.ts";

test("the backoff ceiling starts at 200 ms, doubles, stops at 5 s and resets", () => {
  const backoff = new Backoff(() => 1);
  const delays = Array.from({ length: 8 }, () => backoff.next());
  assert.deepEqual(delays, [200, 400, 800, 1600, 3200, 5000, 5000, 5000]);
  backoff.reset();
  assert.equal(backoff.next(), 200);
});

test("each delay is drawn below the ceiling from the injected random source", () => {
  const draws = [0.5, 0.25, 1, 0, 0.5, 0.5, 0.5, 0.9];
  const backoff = new Backoff(() => draws.shift() ?? 0.5);
  const delays = Array.from({ length: 8 }, () => backoff.next());
  assert.deepEqual(delays, [100, 100, 800, 0, 1600, 2500, 2500, 4500]);
});

test("workers that fail together do not retry in lockstep", () => {
  const schedules = new Set<string>();
  for (let seed = 1; seed <= 20; seed++) {
    const backoff = new Backoff(seeded(seed));
    const delays = Array.from({ length: 6 }, () => backoff.next());
    for (const [i, ceiling] of [200, 400, 800, 1600, 3200, 5000].entries()) {
      const delay = delays[i] ?? -1;
      assert.ok(delay >= 0 && delay <= ceiling, `delay ${delay} above ${ceiling}`);
    }
    schedules.add(delays.join(","));
  }
  assert.equal(schedules.size, 20);
});

/** A small deterministic generator (mulberry32), so the test is repeatable. */
function seeded(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

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
