import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { test, type TestContext } from "node:test";
import { eventually, FakeRuntime } from "./fake-runtime.ts";

const fixture = fileURLToPath(new URL("fixtures/signal-worker.ts", import.meta.url));
const packageDir = fileURLToPath(new URL("..", import.meta.url));

/** Runs the fixture worker in its own process against a fresh fake runtime. */
async function workerProcess(t: TestContext) {
  const fake = await FakeRuntime.start({ heartbeatIntervalMs: 1000 });
  const child = spawn(process.execPath, ["--import", "tsx", fixture], {
    cwd: packageDir,
    env: { ...process.env, ORBIT_SERVER: fake.url },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const exited = once(child, "exit") as Promise<[number | null, NodeJS.Signals | null]>;
  t.after(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    await fake.close();
  });
  await eventually(() => fake.activePolls === 4, "the worker's polls", 15_000);
  return { fake, child, exited, output: () => output };
}

/** Resolves to how the process ended, or fails if it lingers. */
async function exitWithin(exited: Promise<[number | null, NodeJS.Signals | null]>, ms: number) {
  const timeout = new Promise<never>((_, reject) =>
    setTimeout(() => {
      reject(new Error(`the worker process did not exit within ${ms} ms`));
    }, ms).unref(),
  );
  return Promise.race([exited, timeout]);
}

test("SIGTERM lets the running task finish and report, unregisters, and exits", async (t) => {
  const { fake, child, exited, output } = await workerProcess(t);
  fake.enqueue({ task_name: "slow.task", input: { ms: 700 } });
  await eventually(() => output().includes("HANDLER STARTED"), "the handler to start");
  const seenBeforeSignal = fake.requests.length;
  child.kill("SIGTERM");

  const [code, signal] = await exitWithin(exited, 10_000);
  assert.equal(signal, null, output());
  assert.equal(code, 0, output());
  assert.match(output(), /\[orbit\] received SIGTERM/);
  assert.match(output(), /RUN RESOLVED/);
  assert.deepEqual(
    fake.requests.slice(seenBeforeSignal).map((r) => r.path),
    ["/v1/tasks/complete", "/v1/workers/unregister"],
  );
  assert.deepEqual(fake.results[0]?.body.output, { slept: 700 });
  assert.equal(fake.abortedPolls, 3);
});

test("SIGINT with nothing running aborts the long polls and exits at once", async (t) => {
  const { fake, child, exited, output } = await workerProcess(t);
  const started = Date.now();
  child.kill("SIGINT");
  const [code] = await exitWithin(exited, 10_000);
  assert.equal(code, 0, output());
  assert.ok(Date.now() - started < 3000, "shutdown waited for the 20 s long polls");
  assert.equal(fake.calls("/v1/workers/unregister").length, 1);
  assert.match(output(), /\[orbit\] worker signal-test registered \(1 tasks\)/);
});

test("a second SIGINT exits at once, abandoning the running task", async (t) => {
  const { fake, child, exited, output } = await workerProcess(t);
  fake.enqueue({ task_name: "slow.task", input: { ms: 30_000 } });
  await eventually(() => output().includes("HANDLER STARTED"), "the handler to start");
  child.kill("SIGINT");
  await eventually(() => output().includes("[orbit] received SIGINT"), "the first signal");
  const started = Date.now();
  child.kill("SIGINT");
  const [code] = await exitWithin(exited, 5_000);
  assert.equal(code, 130, output());
  assert.ok(Date.now() - started < 2000, "the second Ctrl-C waited for the handler");
  assert.match(output(), /\[orbit\] received SIGINT again: exiting now/);
  assert.doesNotMatch(output(), /RUN RESOLVED/);
  assert.equal(fake.results.length, 0);
});
