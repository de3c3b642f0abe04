package io.github.ajmalx0.orbit;

import java.lang.System.Logger.Level;
import java.util.Locale;
import java.util.function.DoubleFunction;
import java.util.function.LongSupplier;

/**
 * What a worker logs while the runtime is away: one line, then fewer and
 * fewer (the same rules as the Python SDK's {@code _contact.py}).
 *
 * <p>Every poll thread, the heartbeat thread, registration and each result
 * being delivered retry on their own while the runtime (or its database)
 * cannot answer; one line per retry buries the rest of the log under dozens of
 * lines a minute. The poll threads, the heartbeat and registration share one
 * Contact, and each result being delivered has its own (a runtime that answers
 * polls may still fail to store one result, which must not read as the
 * runtime coming and going):
 *
 * <ul>
 *   <li>the first failure after the runtime last answered is logged as it is,
 *       at WARNING;
 *   <li>the next ones at DEBUG only, except a reminder at WARNING when one is
 *       due: {@link #REMINDER_FIRST_MS} after the loss, then at intervals
 *       doubling up to {@link #REMINDER_MAX_MS}, each saying how long the
 *       runtime has been away and how many lines were held back;
 *   <li>the first answer after that is logged once, at INFO
 *       ({@code runtime reachable again after 12.3s}, or the owner's line).
 * </ul>
 *
 * <p>Only failures meaning "the runtime is away" (no answer, 5xx, 408, 429)
 * come here; a refusal is about the request and is logged where it happens.
 */
final class Contact {
    static final long REMINDER_FIRST_MS = 10_000;
    static final long REMINDER_MAX_MS = 600_000;

    private final System.Logger logger;
    private final LongSupplier nanos;
    private final DoubleFunction<String> back;

    private final Object lock = new Object();
    /** When the runtime was lost (nanos), meaningful only while {@link #lost} is set. */
    private long lostAt;
    private volatile boolean lost;
    private long gapMs = REMINDER_FIRST_MS;
    private long nextReminder;
    private int heldBack;

    Contact(System.Logger logger, LongSupplier nanos) {
        this(logger, nanos, away -> "runtime reachable again after " + String.format(Locale.ROOT, "%.1fs", away));
    }

    /** {@code back} makes the line that ends an outage from the seconds it lasted. */
    Contact(System.Logger logger, LongSupplier nanos, DoubleFunction<String> back) {
        this.logger = logger;
        this.nanos = nanos;
        this.back = back;
    }

    /** Whether the runtime failed the last call. */
    boolean lost() {
        return lost;
    }

    /** Logs {@code line}, a retry because the runtime did not answer, if it is due. */
    void failed(String line) {
        long awayMs;
        int held;
        synchronized (lock) {
            long now = nanos.getAsLong();
            if (!lost) {
                lost = true;
                lostAt = now;
                gapMs = REMINDER_FIRST_MS;
                nextReminder = now + gapMs * 1_000_000L;
                heldBack = 0;
                logger.log(Level.WARNING, line);
                return;
            }
            if (now - nextReminder < 0) {
                heldBack++;
                logger.log(Level.DEBUG, line);
                return;
            }
            awayMs = (now - lostAt) / 1_000_000L;
            held = heldBack;
            gapMs = Math.min(gapMs * 2, REMINDER_MAX_MS);
            nextReminder = now + gapMs * 1_000_000L;
            heldBack = 0;
        }
        logger.log(Level.WARNING, line + " (runtime unreachable for " + Math.round(awayMs / 1000.0) + "s; "
                + held + " similar lines logged at DEBUG only)");
    }

    /** Notes an answer from the runtime; logs the end of an outage once. */
    void answered() {
        if (!lost) {
            return; // the common case, without the lock
        }
        long since;
        synchronized (lock) {
            if (!lost) {
                return; // another thread logged it
            }
            lost = false;
            since = lostAt;
        }
        logger.log(Level.INFO, back.apply((nanos.getAsLong() - since) / 1e9));
    }

    /** Whether a failure means the runtime is away rather than refusing the request. */
    static boolean isAway(ApiException e) {
        return e.isConnectionError() || e.status() >= 500 || e.status() == 408 || e.status() == 429;
    }
}
