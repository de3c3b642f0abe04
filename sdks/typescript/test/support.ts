import type { TestContext } from "node:test";
import { reminders } from "../src/contact.ts";
import { Worker, type WorkerOptions } from "../src/index.ts";
import { FakeRuntime, recordingLogger, type FakeOptions } from "./fake-runtime.ts";

export interface Harness {
  fake: FakeRuntime;
  worker: Worker;
  logger: ReturnType<typeof recordingLogger>;
  /** JSON lines the handlers' contexts printed (ctx.log). */
  printed: Record<string, unknown>[];
  /** Starts the worker without signal handlers; the test's end stops it. */
  start(): Promise<void>;
}

/**
 * A fake runtime and a worker pointed at it, both torn down when the test
 * ends. ctx.log output is captured instead of cluttering the test report.
 */
export async function harness(
  t: TestContext,
  options: WorkerOptions = {},
  fakeOptions: FakeOptions = {},
): Promise<Harness> {
  const fake = await FakeRuntime.start(fakeOptions);
  const logger = recordingLogger();
  const printed: Record<string, unknown>[] = [];
  t.mock.method(console, "log", (line: string) => {
    printed.push(JSON.parse(line) as Record<string, unknown>);
  });
  const worker = new Worker({
    server: fake.url,
    workerId: "test-worker",
    pollWaitMs: 1000,
    logger,
    // Retry delays without jitter (each the full ceiling), so tests can predict them.
    random: () => 1,
    ...options,
  });
  let running: Promise<void> | undefined;
  t.after(async () => {
    worker.stop();
    await running?.catch(() => undefined);
    await fake.close();
  });
  return {
    fake,
    worker,
    logger,
    printed,
    start: () => {
      running = worker.run({ handleSignals: false });
      return running;
    },
  };
}

/**
 * Logs every retry while the runtime is away (each as a reminder), for the
 * tests that count retries by their lines; the test's end restores it.
 */
export function logEveryRetry(t: TestContext): void {
  const saved = { ...reminders };
  reminders.firstMs = 0;
  t.after(() => Object.assign(reminders, saved));
}

/** A promise with its resolve function, for holding a handler until the test lets go. */
export function gate(): { promise: Promise<void>; open: () => void } {
  let open = (): void => undefined;
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}

export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
