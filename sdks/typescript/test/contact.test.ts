import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Contact, reminders } from "../src/contact.ts";
import { error, eventually, recordingLogger } from "./fake-runtime.ts";
import { harness } from "./support.ts";

function clocked(): {
  contact: Contact;
  logger: ReturnType<typeof recordingLogger>;
  at: { now: number };
} {
  const logger = recordingLogger();
  const at = { now: 1_000_000 };
  return { contact: new Contact(logger, () => at.now), logger, at };
}

describe("logging while the runtime is away", () => {
  test("one line on loss, reminders further and further apart, one line on return", () => {
    const { contact, logger, at } = clocked();
    contact.answered(); // nothing was lost: nothing to say
    for (let i = 0; i < 70; i++) {
      contact.failed("[orbit] poll failed: down; retrying in 1000 ms");
      at.now += 1000;
    }
    contact.answered();
    contact.answered();
    assert.deepEqual(logger.lines, [
      { level: "warn", text: "[orbit] poll failed: down; retrying in 1000 ms" },
      {
        level: "warn",
        text:
          "[orbit] poll failed: down; retrying in 1000 ms " +
          "(runtime unreachable for 10 s; 9 similar lines not logged)",
      },
      {
        level: "warn",
        text:
          "[orbit] poll failed: down; retrying in 1000 ms " +
          "(runtime unreachable for 30 s; 19 similar lines not logged)",
      },
      { level: "info", text: "[orbit] runtime reachable again after 70.0 s" },
    ]);
    contact.failed("[orbit] heartbeat failed: down again");
    assert.deepEqual(logger.lines.at(-1), {
      level: "warn",
      text: "[orbit] heartbeat failed: down again",
    });
  });

  test("reminders are at most ten minutes apart", () => {
    const { contact, logger, at } = clocked();
    for (let i = 0; i < (3 * 3600) / 5; i++) {
      contact.failed("[orbit] poll failed");
      at.now += 5000;
    }
    const away = logger.lines.slice(1).map((l) => Number(/for (\d+) s/.exec(l.text)?.[1]));
    assert.deepEqual(away.slice(0, 8), [10, 30, 70, 150, 310, 630, 1230, 1830]);
    assert.deepEqual(new Set(away.slice(7).map((a, i) => a - (away[i + 6] ?? 0))), new Set([600]));
  });

  test("a worker logs an outage once, a reminder, and its end once", async (t) => {
    const saved = { ...reminders };
    reminders.firstMs = 1000;
    t.after(() => Object.assign(reminders, saved));
    // Four poll loops and the heartbeat, retrying 10 ms, 20 ms ... 250 ms apart.
    const h = await harness(t, { concurrency: 4, random: () => 0.05, pollWaitMs: 200 });
    h.worker.task("a", {}, () => ({}));
    void h.start();
    await eventually(() => h.fake.calls("/v1/workers/poll").length >= 4, "the polls");
    await h.fake.goDown();
    await eventually(
      () => h.logger.lines.some((l) => l.text.includes("(runtime unreachable")),
      "a reminder",
    );
    await h.fake.comeBack();
    h.fake.enqueue({ task_name: "a" });
    await eventually(() => h.fake.results.length === 1, "the result");

    const warnings = h.logger.lines.filter((l) => l.level === "warn").map((l) => l.text);
    assert.equal(warnings.length, 2, JSON.stringify(warnings));
    assert.match(warnings[0] ?? "", /^\[orbit\] (poll|heartbeat) failed: /);
    const leftOut = Number(/; (\d+) similar lines not logged\)$/.exec(warnings[1] ?? "")?.[1]);
    assert.ok(leftOut >= 10, `only ${leftOut} retries left out`);
    const back = h.logger.lines.filter((l) => l.text.startsWith("[orbit] runtime reachable again"));
    assert.equal(back.length, 1, JSON.stringify(h.logger.lines));
    assert.equal(back[0]?.level, "info");
  });
});

describe("logging while one result is not taken", () => {
  test("its first failure, then one line once it is delivered", async (t) => {
    // Polls are answered while this one result is not: only its own lines are quiet.
    const h = await harness(t, { concurrency: 1, random: () => 0.05 });
    h.worker.task("a", {}, () => ({}));
    const script = Array.from({ length: 6 }, () => error(500, "STORAGE_ERROR", "not loaded"));
    h.fake.intercept((r) => (r.path === "/v1/tasks/complete" ? script.shift() : undefined));
    void h.start();
    h.fake.enqueue({ task_name: "a" });
    await eventually(
      () => h.logger.lines.some((l) => l.text.includes("delivered after")),
      "the result to be delivered",
    );
    assert.equal(h.fake.calls("/v1/tasks/complete").length, 7);
    const warnings = h.logger.lines.filter((l) => l.level === "warn").map((l) => l.text);
    assert.equal(warnings.length, 1, JSON.stringify(warnings));
    assert.match(warnings[0] ?? "", /^\[orbit\] cannot deliver the result for a .*STORAGE_ERROR/);
    const delivered = h.logger.lines.filter((l) => l.text.includes("delivered after"));
    assert.equal(delivered.length, 1);
    const [line] = delivered;
    assert.ok(line);
    assert.equal(line.level, "info");
    assert.match(
      line.text,
      /^\[orbit\] result for a \(execution .*\) delivered after [\d.]+ s of retries$/,
    );
    assert.ok(!h.logger.lines.some((l) => l.text.includes("runtime reachable again")));
  });
});
