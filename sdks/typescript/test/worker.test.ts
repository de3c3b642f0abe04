import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ApiError, SDK_VERSION, TaskError, Worker, type Context } from "../src/index.ts";
import { error, eventually } from "./fake-runtime.ts";
import { delay, gate, harness, logEveryRetry } from "./support.ts";
import { GREETING_COMPOSE, type GreetingComposeInput } from "./fixtures/greeting_contracts.ts";

describe("registration", () => {
  test("announces the worker, logs the registration and the runtime's warnings", async (t) => {
    const warning =
      "`greeting.compose` is announced at version 2.0.0 but registered workflows use 1.0.0; this worker will not receive those tasks";
    const h = await harness(
      t,
      { workerId: "hello-typescript", token: "w-secret" },
      { token: "w-secret", warnings: [warning] },
    );
    h.worker.task("greeting.decorate", { version: "1.0.0" }, () => ({}));
    h.worker.task("greeting.notify", {}, () => ({}));
    void h.start();
    await eventually(() => h.fake.calls("/v1/workers/poll").length > 0, "the first poll");

    const [register] = h.fake.calls("/v1/workers/register");
    assert.deepEqual(register?.body, {
      worker_id: "hello-typescript",
      runtime: "typescript",
      contracts: [
        { task_name: "greeting.decorate", contract_version: "1.0.0" },
        { task_name: "greeting.notify", contract_version: "1.0.0" },
      ],
      sdk: `orbit-typescript/${SDK_VERSION}`,
      // ORBIT's extensions it can use; a runtime that offers none ignores it.
      extensions: ["result-then-poll"],
    });
    assert.equal(register.method, "POST");
    assert.equal(register.headers["content-type"], "application/json");
    assert.equal(register.headers.authorization, "Bearer w-secret");
    assert.deepEqual(h.logger.lines.slice(0, 2), [
      { level: "info", text: "[orbit] worker hello-typescript registered (2 tasks)" },
      { level: "warn", text: `[orbit] runtime: ${warning}` },
    ]);
  });

  test("announces the runtime it is given", async (t) => {
    const h = await harness(t, { runtime: "javascript" });
    h.worker.task("a", {}, () => ({}));
    void h.start();
    await eventually(() => h.fake.calls("/v1/workers/register").length > 0, "registration");
    assert.equal(
      (h.fake.calls("/v1/workers/register")[0]?.body as { runtime: string }).runtime,
      "javascript",
    );
  });

  test("run() rejects with ApiError when the runtime refuses the worker", async (t) => {
    const h = await harness(t);
    h.worker.task("orbit.http.request", {}, () => ({}));
    h.fake.intercept((r) =>
      r.path === "/v1/workers/register"
        ? error(400, "RESERVED_TASK", "`orbit.http.request` is a built-in task")
        : undefined,
    );
    await assert.rejects(h.start(), (err: unknown) => {
      assert.ok(err instanceof ApiError);
      assert.equal(err.status, 400);
      assert.equal(err.code, "RESERVED_TASK");
      assert.equal(err.message, "`orbit.http.request` is a built-in task");
      return true;
    });
    assert.equal(h.fake.calls("/v1/workers/register").length, 1);
  });

  test("run() rejects when no task is registered", async () => {
    await assert.rejects(new Worker().run({ handleSignals: false }), /no task registered/);
  });

  test("retries registration through 5xx answers and refused connections", async (t) => {
    logEveryRetry(t);
    const h = await harness(t);
    h.worker.task("a", {}, () => ({}));
    let refusals = 2;
    h.fake.intercept((r) =>
      r.path === "/v1/workers/register" && refusals-- > 0
        ? error(503, "NOT_LEADER", "this server is a standby")
        : undefined,
    );
    await h.fake.goDown();
    void h.start();
    await delay(500);
    await h.fake.comeBack();
    await eventually(
      () => h.logger.lines.some((l) => l.text.includes("registered (1 tasks)")),
      "registration",
      10_000,
    );
    assert.equal(h.fake.calls("/v1/workers/register").length, 3);
    const retries = h.logger.lines.filter((l) => l.text.startsWith("[orbit] cannot register"));
    assert.ok(
      retries.length >= 3,
      `expected retries to be logged, got ${JSON.stringify(h.logger.lines)}`,
    );
  });

  test("stop() during failing registration resolves run() without unregistering", async (t) => {
    const h = await harness(t);
    h.worker.task("a", {}, () => ({}));
    await h.fake.goDown();
    const running = h.start();
    await delay(300);
    h.worker.stop();
    await running;
    await h.fake.comeBack();
    assert.equal(h.fake.calls("/v1/workers/unregister").length, 0);
  });
});

describe("task registration", () => {
  test("task() chains, defaults the version and refuses a duplicate name", () => {
    const worker = new Worker();
    assert.equal(
      worker.task("a", {}, () => ({})),
      worker,
    );
    assert.throws(() => worker.task("a", { version: "2.0.0" }, () => ({})), /already registered/);
  });

  test("the default worker id names the process", () => {
    assert.equal(new Worker().workerId, `typescript-${process.pid}`);
    assert.equal(new Worker({ workerId: "payments-1" }).workerId, "payments-1");
  });

  test("tasks cannot be added while running", async (t) => {
    const h = await harness(t);
    h.worker.task("a", {}, () => ({}));
    void h.start();
    assert.throws(() => h.worker.task("b", {}, () => ({})), /before calling run/);
    await assert.rejects(h.worker.run({ handleSignals: false }), /already running/);
  });
});

describe("executing tasks", () => {
  test("completes a task with the handler's output and logs the execution", async (t) => {
    const h = await harness(t);
    const seen: Context[] = [];
    h.worker.task<{ message: string; excitement: number }, { message: string }>(
      "greeting.decorate",
      { version: "1.0.0" },
      async (input, ctx) => {
        seen.push(ctx);
        await delay(1);
        return { message: input.message + "!".repeat(input.excitement) };
      },
    );
    void h.start();
    const token = h.fake.enqueue({
      task_name: "greeting.decorate",
      execution_id: "e-1",
      step_id: "decorate",
      input: { message: "Hello, Ada", excitement: 3 },
      idempotency_key: "e-1/decorate",
      attempt: 2,
      redelivery: true,
      deadline_ms: 1_794_736_057_501,
      timeout_ms: 30_000,
    });
    await eventually(() => h.fake.results.length === 1, "the result");

    assert.deepEqual(h.fake.results[0], {
      path: "/v1/tasks/complete",
      body: { token, output: { message: "Hello, Ada!!!" } },
    });
    const ctx = seen[0];
    assert.ok(ctx);
    assert.equal(ctx.token, token);
    assert.equal(ctx.executionId, "e-1");
    assert.equal(ctx.workflow, "Test");
    assert.equal(ctx.workflowVersion, "1.0.0");
    assert.equal(ctx.stepId, "decorate");
    assert.equal(ctx.taskName, "greeting.decorate");
    assert.equal(ctx.attempt, 2);
    assert.equal(ctx.idempotencyKey, "e-1/decorate");
    assert.equal(ctx.redelivery, true);
    assert.equal(ctx.deadlineMs, 1_794_736_057_501);
    assert.equal(ctx.cancelled, false);
    assert.deepEqual(h.printed[0], {
      message: "executing",
      task: "greeting.decorate",
      redelivery: true,
      execution_id: "e-1",
      step: "decorate",
      attempt: 2,
    });
  });

  test("keeps polling while the runtime answers 204", async (t) => {
    const h = await harness(t, { pollWaitMs: 50, concurrency: 1 });
    h.worker.task("a", {}, () => ({ ok: true }));
    void h.start();
    await eventually(() => h.fake.calls("/v1/workers/poll").length >= 3, "three polls");
    const [poll] = h.fake.calls("/v1/workers/poll");
    const session = [...h.fake.sessions][0];
    assert.deepEqual(poll?.body, { worker_session_id: session, wait_ms: 50 });
    h.fake.enqueue({ task_name: "a" });
    await eventually(() => h.fake.results.length === 1, "the result");
    assert.deepEqual(h.fake.results[0]?.body.output, { ok: true });
  });

  test("runs plain and async handlers, and reports nothing as {}", async (t) => {
    const h = await harness(t);
    const inputs: unknown[] = [];
    h.worker
      .task("plain", {}, (input: unknown) => {
        inputs.push(input);
        return undefined;
      })
      .task("async-null", {}, async () => {
        await delay(1);
        return null;
      });
    void h.start();
    const withoutInput = h.fake.enqueue({ task_name: "plain", input: undefined });
    h.fake.enqueue({ task_name: "async-null" });
    await eventually(() => h.fake.results.length === 2, "both results");
    assert.deepEqual(inputs, [{}]);
    for (const result of h.fake.results) {
      assert.equal(result.path, "/v1/tasks/complete");
      assert.deepEqual(result.body.output, {});
    }
    assert.ok(h.fake.results.some((r) => r.body.token === withoutInput));
  });

  test("reports a TaskError with its code, message, retryable flag and details", async (t) => {
    const h = await harness(t);
    h.worker
      .task("payments.charge", {}, () => {
        throw new TaskError("CARD_DECLINED", "limit exceeded", {
          retryable: false,
          details: { limit: 5000 },
        });
      })
      .task("greeting.compose", {}, async () => {
        await delay(1);
        throw new TaskError("NAME_SERVICE_BUSY");
      });
    void h.start();
    const declined = h.fake.enqueue({ task_name: "payments.charge" });
    const busy = h.fake.enqueue({ task_name: "greeting.compose" });
    await eventually(() => h.fake.results.length === 2, "both results");
    const byToken = new Map(h.fake.results.map((r) => [r.body.token, r]));
    assert.deepEqual(byToken.get(declined), {
      path: "/v1/tasks/fail",
      body: {
        token: declined,
        error_code: "CARD_DECLINED",
        error_message: "limit exceeded",
        retryable: false,
        details: { limit: 5000 },
      },
    });
    assert.deepEqual(byToken.get(busy)?.body, {
      token: busy,
      error_code: "NAME_SERVICE_BUSY",
      error_message: "",
      retryable: true,
    });
    assert.ok(
      h.printed.some(
        (l) => l.message === "task failed" && l.code === "CARD_DECLINED" && l.retryable === false,
      ),
    );
  });

  test("reports anything else thrown as a retryable UNHANDLED_EXCEPTION and logs it", async (t) => {
    const h = await harness(t);
    h.worker.task("a", {}, () => {
      throw new TypeError("cannot read the order");
    });
    void h.start();
    h.fake.enqueue({ task_name: "a", execution_id: "e-7", step_id: "validate" });
    await eventually(() => h.fake.results.length === 1, "the result");
    const body = h.fake.results[0]?.body;
    assert.equal(body?.error_code, "UNHANDLED_EXCEPTION");
    assert.equal(body.error_message, "TypeError: cannot read the order");
    assert.equal(body.retryable, true);
    const stack = (body.details as { stack: string }).stack;
    assert.match(stack, /^TypeError: cannot read the order\n {4}at /);
    assert.ok(stack.split("\n").length <= 10);
    const logged = h.logger.lines.find((l) => l.level === "error");
    assert.equal(
      logged?.text,
      "[orbit] a (execution e-7, step validate, attempt 1) threw: cannot read the order",
    );
  });

  test("fails a result that is not a JSON object with INVALID_RESULT", async (t) => {
    const h = await harness(t);
    h.worker.task("array", {}, () => [1, 2]).task("number", {}, () => 42);
    void h.start();
    h.fake.enqueue({ task_name: "array" });
    h.fake.enqueue({ task_name: "number" });
    await eventually(() => h.fake.results.length === 2, "both results");
    for (const { path, body } of h.fake.results) {
      assert.equal(path, "/v1/tasks/fail");
      assert.equal(body.error_code, "INVALID_RESULT");
      assert.equal(body.retryable, false);
    }
  });

  test("fails a task it does not serve with UNKNOWN_TASK", async (t) => {
    const h = await harness(t);
    h.worker.task("a", { version: "1.0.0" }, () => ({}));
    void h.start();
    h.fake.enqueue({ task_name: "b" });
    h.fake.enqueue({ task_name: "a", contract_version: "2.0.0" });
    await eventually(() => h.fake.results.length === 2, "both results");
    assert.deepEqual(
      h.fake.results.map((r) => [r.body.error_code, r.body.retryable, r.body.error_message]),
      [
        ["UNKNOWN_TASK", true, "this worker does not serve b@1.0.0"],
        ["UNKNOWN_TASK", true, "this worker does not serve a@2.0.0"],
      ],
    );
  });

  test("runs at most `concurrency` tasks at once", async (t) => {
    const h = await harness(t, { concurrency: 2 });
    const release = gate();
    let active = 0;
    let peak = 0;
    h.worker.task("slow", {}, async () => {
      active++;
      peak = Math.max(peak, active);
      await release.promise;
      active--;
      return {};
    });
    void h.start();
    for (let i = 0; i < 5; i++) h.fake.enqueue({ task_name: "slow" });
    await eventually(() => active === 2, "two running tasks");
    await delay(200);
    assert.equal(active, 2, "a third task started while two were running");
    release.open();
    await eventually(() => h.fake.results.length === 5, "all results");
    assert.equal(peak, 2);
  });

  test("a concurrency below 1 runs one poll loop", async (t) => {
    const h = await harness(t, { concurrency: 0, pollWaitMs: 100 });
    h.worker.task("a", {}, () => ({}));
    void h.start();
    await eventually(() => h.fake.calls("/v1/workers/poll").length >= 3, "three polls");
    assert.equal(h.fake.maxActivePolls, 1);
  });
});

describe("cancellation", () => {
  test("a token in the heartbeat's cancel list aborts ctx.signal with a CANCELLED TaskError", async (t) => {
    const h = await harness(t);
    const started = gate();
    let observed: { cancelled: boolean; reason: unknown } | undefined;
    h.worker.task("reports.render", {}, async (_input, ctx) => {
      started.open();
      await new Promise((resolve) => {
        ctx.signal.addEventListener("abort", resolve);
      });
      observed = { cancelled: ctx.cancelled, reason: ctx.signal.reason };
      ctx.signal.throwIfAborted();
      return {};
    });
    void h.start();
    const token = h.fake.enqueue({ task_name: "reports.render" });
    await started.promise;
    h.fake.cancels.add(token);
    await eventually(() => h.fake.results.length === 1, "the result");
    assert.deepEqual(h.fake.results[0], {
      path: "/v1/tasks/fail",
      body: {
        token,
        error_code: "CANCELLED",
        error_message: "the runtime cancelled this attempt",
        retryable: false,
      },
    });
    assert.equal(observed?.cancelled, true);
    assert.ok(observed.reason instanceof TaskError);
    assert.equal(observed.reason.code, "CANCELLED");
    assert.equal(observed.reason.retryable, false);
    assert.ok(
      h.logger.lines.some((l) => l.text.startsWith("[orbit] the runtime cancelled reports.render")),
    );
  });

  test("a fetch given ctx.signal rejects with the cancellation", async (t) => {
    const h = await harness(t);
    const requested = gate();
    h.fake.intercept((r) => {
      if (r.path !== "/slow") return undefined;
      requested.open();
      return new Promise(() => undefined); // never answers
    });
    h.worker.task("reports.fetch", {}, async (_input, ctx) => {
      const res = await fetch(`${h.fake.url}/slow`, { signal: ctx.signal });
      return { status: res.status };
    });
    void h.start();
    const token = h.fake.enqueue({ task_name: "reports.fetch" });
    await requested.promise;
    h.fake.cancels.add(token);
    await eventually(() => h.fake.results.length === 1, "the result");
    const body = h.fake.results[0]?.body;
    assert.equal(body?.error_code, "CANCELLED");
    assert.equal(body.retryable, false);
  });
});

describe("result delivery", () => {
  test("retries 5xx answers with a doubling backoff", async (t) => {
    logEveryRetry(t);
    const h = await harness(t);
    h.worker.task("a", {}, () => ({ done: true }));
    const times: number[] = [];
    h.fake.intercept((r) => {
      if (r.path !== "/v1/tasks/complete") return undefined;
      times.push(Date.now());
      return times.length <= 3 ? error(503, "STORAGE_ERROR", "database is locked") : undefined;
    });
    void h.start();
    h.fake.enqueue({ task_name: "a" });
    await eventually(() => times.length === 4, "the fourth attempt");
    const gaps = times.slice(1).map((time, i) => time - (times[i] ?? 0));
    for (const [i, expected] of [200, 400, 800].entries()) {
      const gap = gaps[i] ?? 0;
      assert.ok(
        gap >= expected - 20 && gap < expected + 400,
        `gap ${i} was ${gap} ms, expected about ${expected}`,
      );
    }
    assert.equal(
      h.logger.lines.filter((l) => l.text.startsWith("[orbit] cannot deliver the result")).length,
      3,
    );
    await delay(300);
    assert.equal(h.fake.calls("/v1/tasks/complete").length, 4);
  });

  test("holds a result through an outage and a restart, then registers again", async (t) => {
    logEveryRetry(t);
    const h = await harness(t, { pollWaitMs: 200 });
    const release = gate();
    h.worker.task("payments.charge", {}, async () => {
      await release.promise;
      return { transaction_id: "tx-1" };
    });
    void h.start();
    const token = h.fake.enqueue({ task_name: "payments.charge" });
    await eventually(() => h.printed.length === 1, "the task to start");
    const firstSession = [...h.fake.sessions][0];
    await h.fake.goDown();
    release.open();
    await eventually(
      () =>
        h.logger.lines.filter((l) => l.text.startsWith("[orbit] cannot deliver the result"))
          .length >= 2,
      "failed deliveries",
    );
    h.fake.forgetSessions();
    await h.fake.comeBack();
    await eventually(() => h.fake.results.length === 1, "the result", 10_000);
    assert.deepEqual(h.fake.results[0]?.body, { token, output: { transaction_id: "tx-1" } });

    // Four poll loops and the heartbeat all hit UNKNOWN_SESSION; one registration serves them.
    await eventually(
      () => h.fake.sessions.size === 1 && !h.fake.sessions.has(firstSession ?? ""),
      "a new session",
    );
    await delay(300);
    assert.equal(h.fake.calls("/v1/workers/register").length, 2);
    const second = h.fake.enqueue({ task_name: "payments.charge" });
    await eventually(() => h.fake.results.length === 2, "a task on the new session");
    assert.equal(h.fake.holders.get(second), [...h.fake.sessions][0]);
  });

  test("an answered result is not sent again, accepted or not", async (t) => {
    const h = await harness(t);
    h.worker.task("dup", {}, () => ({})).task("big", {}, () => ({ blob: "x".repeat(100) }));
    h.fake.intercept((r) => {
      if (r.path !== "/v1/tasks/complete") return undefined;
      const token = (r.body as { token: string }).token;
      return token === "token-1"
        ? {
            status: 200,
            body: { accepted: false, reason: "duplicate result; step already resolved" },
          }
        : error(413, "PAYLOAD_TOO_LARGE", "task result is 312 bytes; the limit is 200");
    });
    void h.start();
    h.fake.enqueue({ task_name: "dup" });
    const big = h.fake.enqueue({ task_name: "big" });
    await eventually(() => h.fake.results.length === 3, "both results and a fallback");
    await delay(500);
    assert.equal(h.fake.calls("/v1/tasks/complete").length, 2);
    // The refused output is not sent again; a small failure takes its place.
    const fallback = h.fake.calls("/v1/tasks/fail")[0]?.body as Record<string, unknown>;
    assert.equal(fallback.token, big);
    assert.equal(fallback.error_code, "INVALID_RESULT");
    assert.ok(
      h.logger.lines.some(
        (l) =>
          l.level === "info" &&
          l.text.endsWith("not accepted: duplicate result; step already resolved"),
      ),
    );
    assert.ok(
      h.logger.lines.some((l) => l.level === "warn" && l.text.includes("PAYLOAD_TOO_LARGE")),
    );
  });
});

describe("sessions", () => {
  test("registers again when the runtime forgets the session", async (t) => {
    const h = await harness(t, { pollWaitMs: 100 });
    h.worker.task("a", {}, () => ({}));
    void h.start();
    await eventually(() => h.fake.calls("/v1/workers/heartbeat").length > 0, "a heartbeat");
    h.fake.forgetSessions();
    await eventually(() => h.fake.sessions.size === 1, "a new session");
    await delay(200);
    assert.equal(h.fake.calls("/v1/workers/register").length, 2);
    const registered = h.logger.lines.filter(
      (l) => l.text === "[orbit] worker test-worker registered (1 tasks)",
    );
    assert.equal(registered.length, 2);
    const token = h.fake.enqueue({ task_name: "a" });
    await eventually(() => h.fake.results.length === 1, "the result");
    assert.equal(h.fake.holders.get(token), [...h.fake.sessions][0]);
  });

  test("shuts down and rejects when the runtime refuses a poll", async (t) => {
    const h = await harness(t);
    h.worker.task("a", {}, () => ({}));
    h.fake.intercept((r) =>
      r.path === "/v1/workers/poll"
        ? error(403, "FORBIDDEN", "session belongs to worker `other`, not `test-worker`")
        : undefined,
    );
    await assert.rejects(
      h.start(),
      (err: unknown) => err instanceof ApiError && err.code === "FORBIDDEN",
    );
    assert.equal(h.fake.calls("/v1/workers/unregister").length, 1);
  });
});

describe("shutdown", () => {
  test("an unforeseen failure in a loop stops the worker in order and rejects run()", async (t) => {
    const h = await harness(t);
    h.worker.task("a", {}, () => ({}));
    const broken = new Error("standard output is closed");
    t.mock.method(console, "log", () => {
      throw broken;
    });
    const running = h.start();
    h.fake.enqueue({ task_name: "a" });
    await assert.rejects(running, (err: unknown) => err === broken);
    assert.equal(h.fake.calls("/v1/workers/unregister").length, 1);
    assert.ok(
      h.logger.lines.some((l) => l.text === "[orbit] cannot continue: standard output is closed"),
    );
  });

  test("stop() aborts open polls, lets running tasks report, then unregisters", async (t) => {
    const h = await harness(t, { pollWaitMs: 20_000, concurrency: 3 });
    const started = gate();
    h.worker.task("slow", {}, async () => {
      started.open();
      await delay(300);
      return { finished: true };
    });
    const running = h.start();
    h.fake.enqueue({ task_name: "slow" });
    await started.promise;
    await eventually(() => h.fake.activePolls === 2, "the other loops' open polls");
    const stoppedAt = Date.now();
    const seenBeforeStop = h.fake.requests.length;
    h.worker.stop();
    await running;

    assert.ok(Date.now() - stoppedAt < 2000, "shutdown waited for a long poll");
    await eventually(() => h.fake.abortedPolls === 2, "the aborted polls");
    const after = h.fake.requests.slice(seenBeforeStop).map((r) => r.path);
    assert.deepEqual(after, ["/v1/tasks/complete", "/v1/workers/unregister"]);
    assert.deepEqual(h.fake.results[0]?.body.output, { finished: true });
    assert.equal(h.fake.sessions.size, 0);
  });

  test("a session the runtime forgot is registered again to be closed", async (t) => {
    const h = await harness(t, { pollWaitMs: 20_000 }, { heartbeatIntervalMs: 60_000 });
    h.worker.task("a", {}, () => ({}));
    const running = h.start();
    await eventually(() => h.fake.activePolls === 4, "open polls");
    h.fake.forgetSessions();
    h.worker.stop();
    await running;
    assert.deepEqual(
      h.fake.requests.slice(-3).map((r) => r.path),
      ["/v1/workers/unregister", "/v1/workers/register", "/v1/workers/unregister"],
    );
    assert.equal(h.fake.sessions.size, 0);
    assert.equal(h.logger.lines.filter((l) => l.text.includes("registered (1 tasks)")).length, 1);
  });
});

describe("typed handlers (orbit codegen)", () => {
  test("decode the input, encode the output and announce the contract hash", async (t) => {
    const h = await harness(t);
    const seen: GreetingComposeInput[] = [];
    h.worker.task(GREETING_COMPOSE, (input) => {
      seen.push(input);
      return { message: `Hello, ${input.person.name}`.repeat(input.person.times ?? 1) };
    });
    h.worker.task("other.task", {}, () => ({ ok: true }));
    void h.start();
    const token = h.fake.enqueue({
      task_name: "greeting.compose",
      input: { person: { name: "Ada", times: 2 } },
    });
    await eventually(() => h.fake.results.length === 1, "the result");
    assert.deepEqual(h.fake.results[0], {
      path: "/v1/tasks/complete",
      body: { token, output: { message: "Hello, AdaHello, Ada" } },
    });
    assert.deepEqual(seen, [{ person: { name: "Ada", times: 2 }, tags: [] }]);
    const [register] = h.fake.calls("/v1/workers/register");
    const body = register?.body as { contracts: Record<string, unknown>[] };
    assert.deepEqual(body.contracts[0], {
      task_name: "greeting.compose",
      contract_version: "1.0.0",
      contract_hash: GREETING_COMPOSE.contractHash,
      contract: JSON.parse(GREETING_COMPOSE.contract) as unknown,
    });
    assert.match(GREETING_COMPOSE.contractHash, /^sha256:[0-9a-f]{64}$/);
    assert.deepEqual(body.contracts[1], { task_name: "other.task", contract_version: "1.0.0" });
  });

  test("input that does not decode fails with INVALID_INPUT naming the field", async (t) => {
    const h = await harness(t);
    let called = false;
    h.worker.task(GREETING_COMPOSE, () => {
      called = true;
      return { message: "" };
    });
    void h.start();
    const token = h.fake.enqueue({
      task_name: "greeting.compose",
      input: { person: { name: "Ada", times: "two" } },
    });
    await eventually(() => h.fake.results.length === 1, "the result");
    const result = h.fake.results[0];
    assert.equal(result?.path, "/v1/tasks/fail");
    const body = result.body;
    assert.equal(body["token"], token);
    assert.equal(body["error_code"], "INVALID_INPUT");
    assert.equal(body["retryable"], false);
    assert.deepEqual(body["details"], { path: "input.person.times" });
    assert.match(String(body["error_message"]), /input\.person\.times/);
    assert.equal(called, false);
  });
});
