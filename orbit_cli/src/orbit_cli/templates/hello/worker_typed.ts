// Serves greeting.decorate, the Hello workflow's TypeScript step, with a typed handler.
//
// hello_contracts.ts is generated from workflows/hello.orbit; after changing the
// contracts, run `orbit codegen --lang typescript workflows/hello.orbit -o workers/typescript --package hello_contracts`.
// Start it with `npm start --prefix workers/typescript` after `npm install` there
// (Node.js 22.18 and later can also run `node workers/typescript/worker.ts` as is).
import { Worker } from "orbit-lang";
import { GREETING_DECORATE } from "./hello_contracts.ts";

const worker = new Worker({ workerId: "hello-typescript" });

worker.task(GREETING_DECORATE, async (input) => ({
  message: input.message + "!".repeat(input.excitement),
}));

await worker.run();
