// Worker `expense-typescript` for chapter 64's ExpenseClaim: delivers
// people.notify messages by writing them to its log.
import { Worker } from "orbit-lang";

const worker = new Worker({
  workerId: "expense-typescript",
  pollWaitMs: Number(process.env.E2E_POLL_WAIT_MS ?? 3000),
});

worker.task<{ to: string; message: string }, { delivered: boolean }>(
  "people.notify",
  { version: "1.0.0" },
  async (input, ctx) => {
    ctx.log("notified", { to: input.to, text: input.message });
    return { delivered: true };
  },
);

await worker.run();
