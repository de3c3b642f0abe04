import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { resultRetry } from "../src/delivery.ts";
import { error, eventually, type Reply } from "./fake-runtime.ts";
import { delay, harness } from "./support.ts";

const COMPLETE = "/v1/tasks/complete";
const FAIL = "/v1/tasks/fail";
const TOO_DEEP = error(400, "INVALID_INPUT", "task output is nested deeper than 64 levels");
const INTERNAL = error(500, "INTERNAL", "internal error: RecursionError");
const STORAGE = error(500, "STORAGE_ERROR", "the store is unavailable");

/** Retries 10 ms, 20 ms, 40 ms ... apart. */
const QUICK = { concurrency: 1, random: () => 0.05 };

function answer(path: string, reply: Reply): (r: { path: string }) => Reply | undefined {
  return (r) => (r.path === path ? reply : undefined);
}

describe("results the runtime does not take", () => {
  test("a result refused with a 4xx fails the attempt with the runtime's message", async (t) => {
    const h = await harness(t, QUICK);
    h.worker.task("a", {}, () => ({ deep: true }));
    let refusals = 1;
    h.fake.intercept((r) => (r.path === COMPLETE && refusals-- > 0 ? TOO_DEEP : undefined));
    void h.start();
    const token = h.fake.enqueue({ task_name: "a" });
    await eventually(() => h.fake.results.length === 2, "the fallback failure");
    assert.deepEqual(
      h.fake.results.map((r) => r.path),
      [COMPLETE, FAIL],
    );
    assert.deepEqual(h.fake.results[1]?.body, {
      token,
      error_code: "INVALID_RESULT",
      error_message:
        "the runtime refused the task's result: INVALID_INPUT (400): " +
        "task output is nested deeper than 64 levels",
      retryable: false,
      details: {
        refused: "complete",
        status: 400,
        code: "INVALID_INPUT",
        message: "task output is nested deeper than 64 levels",
      },
    });
    assert.ok(
      h.logger.lines.some(
        (l) => l.level === "warn" && l.text.endsWith("; reporting the attempt as failed"),
      ),
    );
  });

  test("a result answered 500 several times is delivered once the runtime takes it", async (t) => {
    // A storage outage of a few seconds answers every report 500 until the
    // database is back; giving up would leave the attempt to a worker that
    // keeps heartbeating, so the runtime would never redeliver it.
    const h = await harness(t, QUICK);
    h.worker.task("a", {}, () => ({ n: 2 }));
    const script = [STORAGE, STORAGE, STORAGE, STORAGE, STORAGE, INTERNAL];
    script.push(error(501, "HTTP_ERROR", "not implemented"));
    h.fake.intercept((r) => (r.path === COMPLETE ? script.shift() : undefined));
    void h.start();
    const token = h.fake.enqueue({ task_name: "a" });
    await eventually(() => h.fake.calls(COMPLETE).length === 8, "the eighth attempt");
    assert.deepEqual(h.fake.calls(COMPLETE)[7]?.body, { token, output: { n: 2 } });
    await delay(100);
    assert.equal(h.fake.calls(COMPLETE).length, 8);
    assert.equal(h.fake.calls(FAIL).length, 0);
  });

  test("a failure answered 500 several times is delivered as it was", async (t) => {
    const h = await harness(t, QUICK);
    h.worker.task("a", {}, () => {
      throw new Error("no luck");
    });
    const script = [STORAGE, STORAGE, STORAGE, STORAGE];
    h.fake.intercept((r) => (r.path === FAIL ? script.shift() : undefined));
    void h.start();
    h.fake.enqueue({ task_name: "a" });
    await eventually(() => h.fake.calls(FAIL).length === 5, "the fifth attempt");
    await delay(100);
    assert.deepEqual(
      h.fake.calls(FAIL).map((c) => (c.body as Record<string, unknown>).error_code),
      Array(5).fill("UNHANDLED_EXCEPTION"),
    );
  });

  test("a refused failure falls back once; a refused fallback is logged", async (t) => {
    const h = await harness(t, QUICK);
    h.worker.task("a", {}, () => {
      throw new Error("no luck");
    });
    h.fake.intercept(answer(FAIL, TOO_DEEP));
    void h.start();
    h.fake.enqueue({ task_name: "a" });
    await eventually(() => h.fake.calls(FAIL).length === 2, "the fallback failure");
    const bodies = h.fake.calls(FAIL).map((c) => c.body as Record<string, unknown>);
    assert.deepEqual(
      bodies.map((b) => b.error_code),
      ["UNHANDLED_EXCEPTION", "INVALID_RESULT"],
    );
    assert.deepEqual(bodies[1]?.details, {
      refused: "fail",
      error_code: "UNHANDLED_EXCEPTION",
      status: 400,
      code: "INVALID_INPUT",
      message: "task output is nested deeper than 64 levels",
    });
    await eventually(
      () =>
        h.logger.lines.some(
          (l) => l.level === "error" && l.text.includes("refused: INVALID_INPUT"),
        ),
      "the refusal to be logged",
    );
    await delay(200);
    assert.equal(h.fake.calls(FAIL).length, 2);
  });

  test("a result refused for its credentials is not reported again", async (t) => {
    const h = await harness(t, QUICK);
    h.worker.task("a", {}, () => ({}));
    let refusals = 1;
    h.fake.intercept((r) =>
      r.path === COMPLETE && refusals-- > 0
        ? error(403, "FORBIDDEN", "task token was issued to worker `other`")
        : undefined,
    );
    void h.start();
    h.fake.enqueue({ task_name: "a" });
    await eventually(() => h.fake.calls(COMPLETE).length === 1, "the result");
    h.fake.enqueue({ task_name: "a" });
    await eventually(() => h.fake.calls(COMPLETE).length === 2, "the next result");
    assert.equal(h.fake.calls(FAIL).length, 0);
    assert.ok(h.logger.lines.some((l) => l.level === "error" && l.text.includes("FORBIDDEN")));
  });

  test("unavailable answers and a few 500s are retried until the runtime answers", async (t) => {
    const h = await harness(t, QUICK);
    h.worker.task("a", {}, () => ({ n: 3 }));
    const script = [502, 503, 504, 429, 408].map((s) => error(s, "HTTP_ERROR", "gateway says no"));
    script.push(INTERNAL, INTERNAL);
    h.fake.intercept((r) => (r.path === COMPLETE ? script.shift() : undefined));
    void h.start();
    const token = h.fake.enqueue({ task_name: "a" });
    await eventually(() => h.fake.calls(COMPLETE).length === 8, "the eighth attempt");
    await delay(100);
    assert.equal(h.fake.calls(FAIL).length, 0);
    assert.deepEqual(h.fake.calls(COMPLETE)[7]?.body, { token, output: { n: 3 } });
  });

  test("retries of a result stop after the retry window", async (t) => {
    const saved = resultRetry.windowMs;
    resultRetry.windowMs = 300;
    t.after(() => {
      resultRetry.windowMs = saved;
    });
    const h = await harness(t, QUICK);
    h.worker.task("a", {}, () => ({}));
    h.fake.intercept(answer(COMPLETE, { status: 503, body: "restarting" }));
    void h.start();
    h.fake.enqueue({ task_name: "a" });
    await eventually(
      () => h.logger.lines.some((l) => l.text.includes("not delivered after 0.3 s")),
      "the worker to give up",
    );
    const calls = h.fake.calls(COMPLETE).length;
    assert.ok(calls >= 3, `only ${calls} attempts`);
    await delay(300);
    assert.equal(h.fake.calls(COMPLETE).length, calls);
    assert.equal(h.fake.calls(FAIL).length, 0);
    const gaveUp = h.logger.lines.find((l) => l.text.includes("not delivered after"));
    assert.equal(gaveUp?.level, "error");
  });
});

describe("jitter", () => {
  test("poll retries wait a delay drawn from the injected random source", async (t) => {
    const h = await harness(t, { concurrency: 1, random: () => 0.5 });
    h.worker.task("a", {}, () => ({}));
    let failures = 2;
    h.fake.intercept((r) =>
      r.path === "/v1/workers/poll" && failures-- > 0
        ? error(503, "NOT_LEADER", "this server is a standby")
        : undefined,
    );
    void h.start();
    h.fake.enqueue({ task_name: "a" });
    await eventually(() => h.fake.results.length === 1, "the result");
    const waits = h.logger.lines
      .filter((l) => l.text.startsWith("[orbit] poll failed"))
      .map((l) => l.text.split("retrying in ")[1]);
    assert.deepEqual(waits, ["100 ms", "200 ms"]);
  });
});
