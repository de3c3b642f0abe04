package io.github.ajmalx0.orbit;

import java.util.function.DoubleSupplier;

/**
 * Capped exponential backoff with full jitter, the same curve as the other
 * ORBIT SDKs: a ceiling of 0.2 s doubling up to 5 s, each delay drawn
 * uniformly below it. The jitter keeps workers that lost the runtime together
 * from coming back together.
 */
final class Backoff {
    static final long INITIAL_MS = 200;
    static final long MAX_MS = 5000;

    private final DoubleSupplier random;
    private long ceilingMs = INITIAL_MS;

    Backoff(DoubleSupplier random) {
        this.random = random;
    }

    long nextDelayMs() {
        long ceiling = ceilingMs;
        ceilingMs = Math.min(ceiling * 2, MAX_MS);
        double r = Math.min(Math.max(random.getAsDouble(), 0.0), 1.0);
        return (long) (ceiling * r);
    }

    void reset() {
        ceilingMs = INITIAL_MS;
    }
}
