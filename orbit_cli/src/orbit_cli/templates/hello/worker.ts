// Serves greeting.decorate, the Hello workflow's TypeScript step.
//
// Start it with `npm start --prefix workers/typescript` after `npm install` there
// (Node.js 22.18 and later can also run `node workers/typescript/worker.ts` as is).
import { Worker } from "orbit-lang";

const worker = new Worker({ workerId: "hello-typescript" });

worker.task<{ message: string; excitement: number }, { message: string }>(
  "greeting.decorate",
  { version: "1.0.0" },
  async (input) => ({ message: input.message + "!".repeat(input.excitement) }),
);

await worker.run();
