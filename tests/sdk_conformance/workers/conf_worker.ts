// The TypeScript SDK's conformance worker program (interface: ../README.md).
import { TaskError, Worker, type Context } from "orbit-lang";

const worker = new Worker({
  workerId: process.env.CONF_WORKER_ID,
  concurrency: Number(process.env.CONF_CONCURRENCY ?? 1),
  pollWaitMs: Number(process.env.CONF_POLL_WAIT_MS ?? 5000),
});

function event(name: string, ctx: Context): void {
  process.stderr.write(`CONF ${name} ${ctx.executionId} ${ctx.stepId}\n`);
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

worker.task<{ text: string }, { text: string }>("conf.echo", { version: "1.0.0" }, (input, ctx) => {
  event("start", ctx);
  return { text: input.text };
});

worker.task<{ succeed_on: number }, { attempt: number }>(
  "conf.flaky",
  { version: "1.0.0" },
  (input, ctx) => {
    event("start", ctx);
    if (ctx.attempt < input.succeed_on) {
      throw new TaskError("CONF_RETRYABLE", `attempt ${ctx.attempt} fails`, { retryable: true });
    }
    return { attempt: ctx.attempt };
  },
);

worker.task<Record<string, never>, Record<string, never>>(
  "conf.fail_permanent",
  { version: "1.0.0" },
  (_input, ctx) => {
    event("start", ctx);
    throw new TaskError("CONF_PERMANENT", "permanent failure", {
      retryable: false,
      details: { source: "conformance" },
    });
  },
);

worker.task<Record<string, never>, { wrong: boolean }>(
  "conf.bad_output",
  { version: "1.0.0" },
  (_input, ctx) => {
    event("start", ctx);
    return { wrong: true };
  },
);

worker.task<{ ms: number }, { slept: number }>("conf.sleep", { version: "1.0.0" }, async (input, ctx) => {
  event("start", ctx);
  await sleep(input.ms);
  event("done", ctx);
  return { slept: input.ms };
});

worker.task<{ seconds: number }, { waited: boolean }>(
  "conf.sleep_until_cancelled",
  { version: "1.0.0" },
  async (input, ctx) => {
    event("start", ctx);
    const end = Date.now() + input.seconds * 1000;
    while (Date.now() < end) {
      if (ctx.signal.aborted) {
        event("cancelled", ctx);
        throw new TaskError("CANCELLED", "cancelled by the runtime", { retryable: false });
      }
      if (ctx.remainingMs() === 0) {
        event("deadline", ctx);
        throw new TaskError("CONF_DEADLINE", "the attempt's deadline passed", { retryable: false });
      }
      await sleep(50);
    }
    return { waited: true };
  },
);

await worker.run();
