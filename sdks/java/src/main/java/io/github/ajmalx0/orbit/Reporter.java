package io.github.ajmalx0.orbit;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.lang.System.Logger.Level;
import java.time.Duration;
import java.util.Set;

/**
 * Reports attempts' results, with the same rules as the Python SDK.
 *
 * <p>The runtime reconciles results by token, so sending one again is
 * harmless and a result held through an outage is still accepted afterwards.
 * Which answers are waited out:
 *
 * <ul>
 *   <li>no answer, any 5xx, 408 and 429 (a restarting, failing or overloaded
 *       runtime, database or proxy): retried with jittered backoff until the
 *       runtime answers, for up to the result retry timeout (10 minutes by
 *       default), and once more at most after shutdown began. Tries are not
 *       counted: a worker that gave up while it kept heartbeating would keep
 *       the attempt to itself, the runtime would never redeliver it, and a
 *       step without a timeout would wait forever after a short storage
 *       outage;
 *   <li>any other 4xx: a refusal, which sending again cannot change.
 * </ul>
 *
 * <p>A refused result would leave the attempt in flight until its timeout, so
 * a non-retryable INVALID_RESULT failure is reported in its place, once.
 * Refused credentials (401, 403) get no stand-in: it would be refused the
 * same way.
 *
 * <p>When the runtime offers result-then-poll, a report carries the poll
 * thread's next poll and its answer may bring the next task: one request per
 * task instead of two. The report's rules stay: a refused report took no task,
 * an answer without a task sends the thread back to its own poll (which meets
 * a lost session as usual), and a report made once shutdown began carries no
 * poll; one whose poll is waiting then is ended and sent again without it.
 */
final class Reporter {
    private static final Set<Integer> CREDENTIALS = Set.of(401, 403);
    private static final int MAX_MESSAGE_CHARS = 2000;

    private final Worker worker;
    private final Http http;
    private final System.Logger logger;
    private final Duration window;

    Reporter(Worker worker, Http http, System.Logger logger, Duration window) {
        this.worker = worker;
        this.http = http;
        this.logger = logger;
        this.window = window;
    }

    /** Reports the outcome (or a stand-in failure); the next task when an answer brought one. */
    JsonNode deliver(TaskContext ctx, Worker.Outcome outcome) {
        Sent sent = send(ctx, outcome);
        if (sent.refusal() == null) {
            return sent.next();
        }
        ApiException refusal = sent.refusal();
        Worker.Outcome fallback = fallback(ctx, outcome, refusal);
        if (fallback != null) {
            logger.log(Level.WARNING, "result refused (" + refusal.getMessage()
                    + "); reporting the attempt as failed " + ctx.identity());
            sent = send(ctx, fallback);
            if (sent.refusal() == null) {
                return sent.next();
            }
            refusal = sent.refusal();
        }
        logger.log(Level.ERROR, "result refused (" + refusal.getMessage() + ") " + ctx.identity());
        return null;
    }

    /** What sending a report came to: the refusal, or the next task its answer brought. */
    private record Sent(ApiException refusal, JsonNode next) {}

    /** Sends until answered or given up. */
    private Sent send(TaskContext ctx, Worker.Outcome outcome) {
        Backoff backoff = new Backoff(worker.random);
        long giveUpAt = System.nanoTime() + window.toNanos();
        // This result's own: the runtime may answer polls and still fail it.
        Contact contact = new Contact(logger, worker.nanos, away -> "result delivered after "
                + String.format(java.util.Locale.ROOT, "%.1fs", away) + " of retries " + ctx.identity());
        boolean lastChance = false;
        while (true) {
            String sessionId = worker.session().id();
            JsonNode answer;
            ObjectNode body = outcome.body();
            boolean withPoll = worker.session().resultThenPoll() && worker.enterWait();
            if (withPoll) {
                body = body.deepCopy();
                body.putObject("poll").put("worker_session_id", sessionId).put("wait_ms", worker.pollWaitMs());
            }
            try {
                answer = http.post(outcome.path(), body);
            } catch (InterruptedException e) {
                if (withPoll) {
                    continue; // shutdown ended the wait: sent again without the poll (harmless twice)
                }
                // Nothing in the SDK interrupts a reporting thread; someone else wants it to end.
                Thread.currentThread().interrupt();
                logger.log(Level.WARNING, "result delivery interrupted " + ctx.identity());
                return new Sent(null, null);
            } catch (ApiException e) {
                if (!Contact.isAway(e)) {
                    contact.answered();
                }
                if (e.isUnknownSession()) {
                    worker.session().renew(sessionId);
                } else if (!Contact.isAway(e)) {
                    return new Sent(e, null);
                }
                if (lastChance) {
                    logger.log(Level.WARNING, "result not delivered before shutdown (" + e.getMessage() + ") "
                            + ctx.identity());
                    return new Sent(null, null);
                }
                long delay = backoff.nextDelayMs();
                if (System.nanoTime() + delay * 1_000_000L - giveUpAt > 0) {
                    logger.log(Level.ERROR, "result not delivered after " + Worker.seconds(window.toMillis())
                            + " of retries (" + e.getMessage() + ") " + ctx.identity());
                    return new Sent(null, null);
                }
                contact.failed("result delivery failed: " + e.getMessage() + "; retrying in "
                        + Worker.seconds(delay) + " " + ctx.identity());
                lastChance = worker.awaitStop(delay);
                continue;
            } finally {
                if (withPoll) {
                    worker.leaveWait();
                }
            }
            contact.answered();
            if (answer != null && answer.path("accepted").isBoolean() && !answer.path("accepted").asBoolean()) {
                logger.log(Level.INFO, "result ignored: " + answer.path("reason").asText("") + " " + ctx.identity());
            }
            JsonNode next = answer == null ? null : answer.get("task");
            return new Sent(null, next != null && next.isObject() ? next : null);
        }
    }

    private static Worker.Outcome fallback(TaskContext ctx, Worker.Outcome refused, ApiException error) {
        if (CREDENTIALS.contains(error.status()) || refused.fallback()) {
            return null;
        }
        ObjectNode body = refused.body().objectNode();
        body.put("token", ctx.token());
        ObjectNode details = body.objectNode();
        boolean wasFailure = Worker.FAIL.equals(refused.path());
        details.put("refused", wasFailure ? "fail" : "complete");
        if (wasFailure) {
            details.set("error_code", refused.body().get("error_code"));
        }
        details.put("status", error.status()).put("code", error.code()).put("message", clip(error.detail()));
        body.put("error_code", "INVALID_RESULT")
                .put("error_message", "the runtime refused the task's result: " + clip(error.getMessage()))
                .put("retryable", false);
        body.set("details", details);
        return new Worker.Outcome(Worker.FAIL, body, true);
    }

    private static String clip(String text) {
        return text.length() <= MAX_MESSAGE_CHARS ? text : text.substring(0, MAX_MESSAGE_CHARS - 1) + "…";
    }
}
