import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { error, eventually } from "./fake-runtime.ts";
import { harness } from "./support.ts";

const POLL = "/v1/workers/poll";
const COMPLETE = "/v1/tasks/complete";
const FAIL = "/v1/tasks/fail";
const OFFERED = { extensions: ["result-then-poll"] };

describe("result-then-poll", () => {
  test("results carry the next poll when the runtime offers it", async (t) => {
    const h = await harness(t, { concurrency: 1 }, OFFERED);
    h.worker.task("a", {}, () => ({ ok: true }));
    const tokens = [1, 2, 3].map(() => h.fake.enqueue({ task_name: "a" }));
    void h.start();
    await eventually(() => h.fake.results.length === 3, "three results");
    const session = [...h.fake.sessions][0];
    assert.deepEqual(
      h.fake.results.map((r) => r.body.token),
      tokens,
    );
    for (const result of h.fake.results) {
      assert.deepEqual(result.body.poll, { worker_session_id: session, wait_ms: 1000 });
    }
    // One poll found the first task; each result's answer brought the next.
    assert.equal(h.fake.calls(POLL).length, 1);
    const [register] = h.fake.calls("/v1/workers/register");
    assert.deepEqual((register?.body as { extensions?: string[] }).extensions, [
      "result-then-poll",
    ]);
  });

  test("results are the book's when the runtime does not offer it", async (t) => {
    const h = await harness(t, { concurrency: 1 });
    h.worker.task("a", {}, () => ({ ok: true }));
    h.fake.enqueue({ task_name: "a" });
    h.fake.enqueue({ task_name: "a" });
    void h.start();
    await eventually(() => h.fake.results.length === 2, "two results");
    for (const result of h.fake.results) assert.equal(result.body.poll, undefined);
    assert.ok(h.fake.calls(POLL).length >= 2);
  });

  test("a refused result loses no task", async (t) => {
    const h = await harness(t, { concurrency: 1 }, OFFERED);
    h.worker.task("a", {}, () => ({ ok: true }));
    let refusals = 1;
    h.fake.intercept((r) =>
      r.path === COMPLETE && refusals-- > 0 ? error(400, "INVALID_INPUT", "too deep") : undefined,
    );
    const first = h.fake.enqueue({ task_name: "a" });
    const second = h.fake.enqueue({ task_name: "a" });
    void h.start();
    await eventually(() => h.fake.results.length === 3, "three reports");
    // The refused report took no task; the failure sent in its place carries
    // the poll, which brings the second task.
    assert.deepEqual(
      h.fake.results.map((r) => [r.path, r.body.token]),
      [
        [COMPLETE, first],
        [FAIL, first],
        [COMPLETE, second],
      ],
    );
    assert.ok(h.fake.results[1]?.body.poll !== undefined);
  });

  test("a poll that could not run sends the loop back to its own poll", async (t) => {
    const h = await harness(t, { concurrency: 1 }, OFFERED);
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let calls = 0;
    h.worker.task("a", {}, async () => {
      if (calls++ === 0) await held;
      return {};
    });
    h.fake.enqueue({ task_name: "a" });
    void h.start();
    await eventually(() => calls === 1, "the first task running");
    h.fake.forgetSessions();
    h.fake.enqueue({ task_name: "a" });
    release();
    await eventually(() => h.fake.results.length === 2, "both results");
    assert.equal(h.fake.calls("/v1/workers/register").length, 2);
  });

  test("shutdown does not wait for a result's poll", async (t) => {
    const h = await harness(t, { concurrency: 1, pollWaitMs: 20_000 }, OFFERED);
    h.worker.task("a", {}, () => ({}));
    h.fake.enqueue({ task_name: "a" });
    const running = h.start();
    await eventually(() => h.fake.activePolls === 1 && h.fake.results.length === 1, "the poll");
    const started = Date.now();
    h.worker.stop();
    await running;
    assert.ok(Date.now() - started < 3000, "stopped at once");
    assert.equal(h.fake.calls("/v1/workers/unregister").length, 1);
    // Sent again without the poll once shutdown had begun.
    assert.equal(h.fake.results.at(-1)?.body.poll, undefined);
  });
});
