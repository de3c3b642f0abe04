// A TypeScript worker for chapter 42's delivery guarantees, named by
// E2E_WORKER_ID, with one poll slot. demo.work returns its input; demo.wait
// waits `seconds` unless ctx.signal aborts first, and then rejects with the
// signal's reason, which the SDK reports as CANCELLED.
import { Worker } from "orbit-lang";

const worker = new Worker({
  workerId: process.env.E2E_WORKER_ID,
  concurrency: 1,
  pollWaitMs: Number(process.env.E2E_POLL_WAIT_MS ?? 3000),
});

worker.task<{ n: number }, { n: number }>("demo.work", { version: "1.0.0" }, async (input, ctx) => {
  ctx.log("working", { n: input.n, redelivery: ctx.redelivery, attempt: ctx.attempt });
  return { n: input.n };
});

worker.task<{ seconds: number }, { waited: boolean }>(
  "demo.wait",
  { version: "1.0.0" },
  async (input, ctx) => {
    ctx.log("waiting for the runtime to cancel");
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(resolve, input.seconds * 1000);
      ctx.signal.addEventListener(
        "abort",
        () => {
          clearTimeout(timer);
          ctx.log("cancelled by the runtime");
          reject(ctx.signal.reason);
        },
        { once: true },
      );
    });
    return { waited: true };
  },
);

await worker.run();
