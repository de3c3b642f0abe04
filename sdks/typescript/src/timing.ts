/**
 * Timers that cooperate with AbortSignal. Node.js 18 has no AbortSignal.any,
 * so a signal that follows a parent and adds a deadline is built by hand; the
 * caller must dispose it, or every request would leave a listener behind on
 * the long-lived parent.
 */

export interface ScopedSignal {
  readonly signal: AbortSignal;
  dispose(): void;
}

/**
 * A signal aborted when `parent` aborts (with the parent's reason) or, when
 * `timeoutMs` is given, after that long (with `onTimeout()` as the reason).
 */
export function scopedSignal(
  parent: AbortSignal | undefined,
  timeoutMs: number | undefined,
  onTimeout: () => unknown,
): ScopedSignal {
  const controller = new AbortController();
  const follow = (): void => {
    controller.abort(parent?.reason);
  };
  if (parent?.aborted) follow();
  else parent?.addEventListener("abort", follow, { once: true });
  const timer =
    timeoutMs === undefined
      ? undefined
      : setTimeout(() => {
          controller.abort(onTimeout());
        }, timeoutMs);
  return {
    signal: controller.signal,
    dispose: () => {
      clearTimeout(timer);
      parent?.removeEventListener("abort", follow);
    },
  };
}

/** Resolves after `ms`, or as soon as `signal` aborts; never rejects. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) {
      resolve();
      return;
    }
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}

/** A source of random numbers in [0, 1], like Math.random. */
export type RandomSource = () => number;

/**
 * Delays for retries: capped exponential backoff with full jitter. A ceiling
 * starts at 200 ms and doubles on each failure up to 5 s; each delay is drawn
 * uniformly below it. Without the draw, workers that lost the runtime at the
 * same moment (a restart) would retry at the same moments and hit it as one
 * burst each time. Tests pass a fixed `random` to know the delays.
 */
export class Backoff {
  static readonly INITIAL_MS = 200;
  static readonly MAX_MS = 5000;
  readonly #random: RandomSource;
  #ceiling = Backoff.INITIAL_MS;

  constructor(random: RandomSource = Math.random) {
    this.#random = random;
  }

  next(): number {
    const ceiling = this.#ceiling;
    this.#ceiling = Math.min(ceiling * 2, Backoff.MAX_MS);
    return Math.round(ceiling * Math.min(Math.max(this.#random(), 0), 1));
  }

  reset(): void {
    this.#ceiling = Backoff.INITIAL_MS;
  }
}
