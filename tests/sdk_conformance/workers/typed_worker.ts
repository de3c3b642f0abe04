// The TypeScript SDK's typed conformance program (../README.md, "Typed
// workers"): conf.echo served through the types `orbit codegen --lang
// typescript` generated from conformance.orbit, which the suite writes
// beside this file as conformance.ts. It answers the text in upper case.
import { Worker } from "orbit-lang";
import { CONF_ECHO } from "./conformance.ts";

const worker = new Worker({
  workerId: process.env.CONF_WORKER_ID,
  pollWaitMs: Number(process.env.CONF_POLL_WAIT_MS ?? 5000),
});

worker.task(CONF_ECHO, (input, ctx) => {
  process.stderr.write(`CONF start ${ctx.executionId} ${ctx.stepId}\n`);
  return { text: input.text.toUpperCase() };
});

await worker.run();
