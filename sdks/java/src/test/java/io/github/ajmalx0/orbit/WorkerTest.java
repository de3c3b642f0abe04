package io.github.ajmalx0.orbit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.JsonNode;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(30)
class WorkerTest {
    static final Duration WAIT = Duration.ofSeconds(10);

    record Greeting(String name, boolean excited) {}

    record Message(String message, int letters) {}

    FakeRuntime runtime;
    Worker worker;

    @BeforeEach
    void setUp() throws Exception {
        runtime = new FakeRuntime();
    }

    @AfterEach
    void tearDown() throws Exception {
        if (worker != null) {
            assertTrue(worker.stop(WAIT), "the worker did not stop");
        }
        runtime.close();
    }

    Worker.Builder builder() {
        return Worker.builder()
                .workerId("test-java")
                .server(runtime.url())
                .token("")
                .concurrency(1)
                .pollWait(Duration.ofMillis(300));
    }

    Worker started(Worker w) {
        worker = w;
        w.random = () -> 0.0; // retries without delays
        w.start();
        return w;
    }

    @Test
    void registersItsContractsAndCompletesATypedTask() throws Exception {
        Worker w = builder().build();
        w.task("greeting.java", "1.0.0", Greeting.class, (in, ctx) ->
                new Message("Hello, " + in.name() + (in.excited() ? "!" : "."), in.name().length()));
        started(w);
        String token = runtime.queue("greeting.java", Map.of("name", "Ada", "excited", true, "extra", 1));
        FakeRuntime.Request result = runtime.nextResult(WAIT);
        assertEquals("/v1/tasks/complete", result.path());
        assertEquals(token, result.body().path("token").asText());
        assertEquals("Hello, Ada!", result.body().path("output").path("message").asText());
        assertEquals(3, result.body().path("output").path("letters").asInt());

        JsonNode register = runtime.requests.peek().body();
        assertEquals("test-java", register.path("worker_id").asText());
        assertEquals("java", register.path("runtime").asText());
        assertEquals("orbit-java/" + Worker.VERSION, register.path("sdk").asText());
        assertEquals("greeting.java", register.path("contracts").get(0).path("task_name").asText());
        assertEquals("1.0.0", register.path("contracts").get(0).path("contract_version").asText());
        assertEquals(null, runtime.requests.peek().authorization());
    }

    @Test
    void rawAndGenericHandlers() throws Exception {
        Worker w = builder().build();
        w.rawTask("inventory.release", "1.0.0", (in, ctx) -> Map.of("released", in.path("reservation_id").asText()));
        w.task("orders.tally", "1.0.0", new TypeReference<Map<String, List<String>>>() {},
                (in, ctx) -> Map.of("count", in.size()));
        w.rawTask("nothing", "1.0.0", (in, ctx) -> null);
        started(w);
        runtime.queue("inventory.release", Map.of("reservation_id", "r-7"));
        assertEquals("r-7", runtime.nextResult(WAIT).body().path("output").path("released").asText());
        runtime.queue("orders.tally", Map.of("a", List.of("x"), "b", List.of()));
        assertEquals(2, runtime.nextResult(WAIT).body().path("output").path("count").asInt());
        runtime.queue("nothing", null);
        JsonNode output = runtime.nextResult(WAIT).body().path("output");
        assertTrue(output.isObject() && output.isEmpty(), output.toString());
    }

    @Test
    void taskExceptionsAreReportedWithTheirRetryability() throws Exception {
        Worker w = builder().build();
        w.rawTask("permanent", "1.0.0", (in, ctx) -> {
            throw new TaskException("CARD_DECLINED", "limit exceeded", false, Map.of("limit", 5000));
        });
        w.rawTask("retryable", "1.0.0", (in, ctx) -> {
            throw TaskException.retryable("BANK_UNAVAILABLE", "upstream timed out");
        });
        w.rawTask("crash", "1.0.0", (in, ctx) -> {
            throw new IllegalStateException("boom");
        });
        started(w);
        runtime.queue("permanent", Map.of());
        JsonNode fail = runtime.nextResult(WAIT).body();
        assertEquals("CARD_DECLINED", fail.path("error_code").asText());
        assertEquals("limit exceeded", fail.path("error_message").asText());
        assertFalse(fail.path("retryable").asBoolean());
        assertEquals(5000, fail.path("details").path("limit").asInt());

        runtime.queue("retryable", Map.of());
        fail = runtime.nextResult(WAIT).body();
        assertEquals("BANK_UNAVAILABLE", fail.path("error_code").asText());
        assertTrue(fail.path("retryable").asBoolean());

        runtime.queue("crash", Map.of());
        fail = runtime.nextResult(WAIT).body();
        assertEquals("UNHANDLED_EXCEPTION", fail.path("error_code").asText());
        assertEquals("java.lang.IllegalStateException: boom", fail.path("error_message").asText());
        assertTrue(fail.path("retryable").asBoolean());
        assertEquals("java.lang.IllegalStateException", fail.path("details").path("exception").asText());
        assertTrue(fail.path("details").path("stack_trace").asText().contains("boom"));
    }

    @Test
    void undecodableInputAndNonObjectResultsAreNotRetryable() throws Exception {
        Worker w = builder().build();
        w.task("typed", "1.0.0", Greeting.class, (in, ctx) -> Map.of());
        w.rawTask("list", "1.0.0", (in, ctx) -> List.of(1, 2));
        started(w);
        runtime.queue("typed", Map.of("name", List.of("not", "a", "string")));
        JsonNode fail = runtime.nextResult(WAIT).body();
        assertEquals("INVALID_INPUT", fail.path("error_code").asText());
        assertFalse(fail.path("retryable").asBoolean());
        runtime.queue("list", Map.of());
        fail = runtime.nextResult(WAIT).body();
        assertEquals("INVALID_RESULT", fail.path("error_code").asText());
        assertFalse(fail.path("retryable").asBoolean());
    }

    @Test
    void aHeartbeatCancellationInterruptsTheHandler() throws Exception {
        CountDownLatch running = new CountDownLatch(1);
        AtomicBoolean futureCompleted = new AtomicBoolean();
        Worker w = builder().build();
        w.rawTask("slow", "1.0.0", (in, ctx) -> {
            ctx.cancellation().thenRun(() -> futureCompleted.set(true));
            running.countDown();
            Thread.sleep(60_000);
            return Map.of();
        });
        started(w);
        String token = runtime.queue("slow", Map.of());
        assertTrue(running.await(10, TimeUnit.SECONDS));
        runtime.cancels.add(token);
        JsonNode fail = runtime.nextResult(WAIT).body();
        assertEquals("CANCELLED", fail.path("error_code").asText());
        assertTrue(fail.path("retryable").asBoolean());
        assertTrue(futureCompleted.get());
    }

    @Test
    void theLocalDeadlineCancelsTheAttempt() throws Exception {
        Worker w = builder().build();
        w.rawTask("slow", "1.0.0", (in, ctx) -> {
            try {
                Thread.sleep(60_000);
            } catch (InterruptedException e) {
                assertTrue(ctx.isCancelled());
                assertEquals(0, ctx.remainingMs().getAsLong());
                throw TaskException.permanent("DEADLINE", "stopped at " + ctx.remainingMs().getAsLong());
            }
            return Map.of();
        });
        started(w);
        runtime.queue("slow", Map.of(), System.currentTimeMillis() + 300);
        JsonNode fail = runtime.nextResult(WAIT).body();
        assertEquals("DEADLINE", fail.path("error_code").asText());
    }

    @Test
    void throwIfCancelledAfterADeadlineThatAlreadyPassed() throws Exception {
        Worker w = builder().build();
        w.rawTask("late", "1.0.0", (in, ctx) -> {
            while (true) {
                ctx.throwIfCancelled();
                Thread.onSpinWait();
            }
        });
        started(w);
        runtime.queue("late", Map.of(), System.currentTimeMillis() - 1000);
        JsonNode fail = runtime.nextResult(WAIT).body();
        assertEquals("CANCELLED", fail.path("error_code").asText());
        assertTrue(fail.path("retryable").asBoolean());
    }

    @Test
    void aResultIsRetriedThroughAnOutageAndDeliveredOnce() throws Exception {
        Worker w = builder().build();
        w.rawTask("echo", "1.0.0", (in, ctx) -> in);
        runtime.resultFailures.addAll(List.of(0, 503, 502, 0, 504));
        started(w);
        runtime.queue("echo", Map.of("text", "hi"));
        JsonNode result = runtime.nextResult(WAIT).body();
        assertEquals("hi", result.path("output").path("text").asText());
        assertTrue(runtime.resultFailures.isEmpty());
        assertEquals(null, runtime.results.poll(300, TimeUnit.MILLISECONDS));
    }

    @Test
    void aRefusedResultIsReplacedByAFailure() throws Exception {
        Worker w = builder().build();
        w.rawTask("echo", "1.0.0", (in, ctx) -> in);
        runtime.resultFailures.add(400);
        started(w);
        runtime.queue("echo", Map.of("text", "hi"));
        JsonNode fail = runtime.nextResult(WAIT).body();
        assertEquals("INVALID_RESULT", fail.path("error_code").asText());
        assertEquals("complete", fail.path("details").path("refused").asText());
        assertEquals(400, fail.path("details").path("status").asInt());
    }

    /**
     * A storage outage of a few seconds answers every report 500 until the
     * database is back; giving up would leave the attempt to a worker that
     * keeps heartbeating, so the runtime would never redeliver it.
     */
    @Test
    void serverErrorsAreRetriedUntilTheRuntimeTakesTheResult() throws Exception {
        Worker w = builder().build();
        w.random = () -> 0.05;
        w.rawTask("echo", "1.0.0", (in, ctx) -> in);
        runtime.resultFailures.addAll(List.of(500, 500, 500, 500, 500, 501, 500));
        started(w);
        runtime.queue("echo", Map.of("text", "hi"));
        FakeRuntime.Request result = runtime.nextResult(WAIT);
        assertEquals("/v1/tasks/complete", result.path());
        assertEquals("hi", result.body().path("output").path("text").asText());
        assertTrue(runtime.resultFailures.isEmpty());
        assertEquals(8, reports());
        assertEquals(null, runtime.results.poll(300, TimeUnit.MILLISECONDS));
    }

    @Test
    void aRefusedResultIsSentOnce() throws Exception {
        Worker w = builder().build();
        w.rawTask("echo", "1.0.0", (in, ctx) -> in);
        runtime.resultFailures.add(409);
        started(w);
        runtime.queue("echo", Map.of());
        assertEquals("INVALID_RESULT", runtime.nextResult(WAIT).body().path("error_code").asText());
        assertEquals(null, runtime.results.poll(300, TimeUnit.MILLISECONDS));
        assertEquals(2, reports(), "the refused result, then its stand-in");
    }

    private long reports() {
        return runtime.requests.stream()
                .filter(r -> r.path().equals("/v1/tasks/complete") || r.path().equals("/v1/tasks/fail"))
                .count();
    }

    @Test
    void deliveryGivesUpAfterTheRetryWindow() throws Exception {
        Worker w = builder().resultRetryTimeout(Duration.ofMillis(300)).build();
        w.rawTask("echo", "1.0.0", (in, ctx) -> in);
        for (int i = 0; i < 10_000; i++) {
            runtime.resultFailures.add(503);
        }
        worker = w;
        w.random = () -> 1.0; // the longest delays: 0.2 s, then 0.4 s passes the window
        w.start();
        runtime.queue("echo", Map.of());
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (runtime.resultFailures.size() > 9_998 && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        Thread.sleep(800);
        assertEquals(9_998, runtime.resultFailures.size(), "two attempts, then it gave up");
    }

    @Test
    void anUnknownSessionMakesTheWorkerRegisterAgain() throws Exception {
        runtime.forgetSessionOnPoll.set(1);
        Worker w = builder().build();
        w.rawTask("echo", "1.0.0", (in, ctx) -> in);
        started(w);
        runtime.queue("echo", Map.of("n", 1));
        assertEquals(1, runtime.nextResult(WAIT).body().path("output").path("n").asInt());
        assertEquals(2, runtime.sessions.get());
    }

    @Test
    void stopLetsTheRunningTaskFinishThenUnregisters() throws Exception {
        CountDownLatch running = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        AtomicBoolean interrupted = new AtomicBoolean();
        Worker w = builder().pollWait(Duration.ofSeconds(30)).build();
        w.rawTask("slow", "1.0.0", (in, ctx) -> {
            running.countDown();
            release.await();
            interrupted.set(Thread.currentThread().isInterrupted());
            return Map.of("done", true);
        });
        started(w);
        runtime.queue("slow", Map.of());
        assertTrue(running.await(10, TimeUnit.SECONDS));
        Thread stopper = new Thread(w::stop);
        stopper.start();
        stopper.join(300);
        assertTrue(stopper.isAlive(), "stop() waits for the running task");
        release.countDown();
        stopper.join(10_000);
        assertFalse(stopper.isAlive());
        assertFalse(interrupted.get(), "shutdown must not interrupt a running handler");
        assertTrue(runtime.nextResult(WAIT).body().path("output").path("done").asBoolean());
        List<String> paths = runtime.paths();
        assertEquals("/v1/workers/unregister", paths.get(paths.size() - 1));
    }

    @Test
    void stopEndsAnOpenLongPollAtOnce() throws Exception {
        Worker w = builder().pollWait(Duration.ofSeconds(30)).build();
        w.rawTask("echo", "1.0.0", (in, ctx) -> in);
        started(w);
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (!runtime.paths().contains("/v1/workers/poll") && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        long start = System.nanoTime();
        assertTrue(w.stop(Duration.ofSeconds(5)));
        assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(5));
        assertTrue(runtime.paths().contains("/v1/workers/unregister"));
    }

    @Test
    void contextLogsCarryTheAttempt() throws Exception {
        CapturingLogger logger = new CapturingLogger();
        Worker w = builder().logger(logger).build();
        w.rawTask("echo", "1.0.0", (in, ctx) -> {
            ctx.log("composing a greeting");
            return in;
        });
        started(w);
        String token = runtime.queue("echo", Map.of());
        runtime.nextResult(WAIT);
        assertTrue(logger.lines().contains("composing a greeting execution=exec-" + token + " step=step attempt=1"),
                logger.lines().toString());
        assertTrue(logger.lines().contains("worker test-java registered (1 tasks)"));
        assertTrue(logger.lines().contains("runtime: a test warning"));
    }

    @Test
    void registrationRules() {
        Worker w = builder().build();
        assertThrows(IllegalStateException.class, w::run);
        w.rawTask("a", "1.0.0", (in, ctx) -> in);
        assertThrows(IllegalArgumentException.class, () -> w.rawTask("a", "1.0.0", (in, ctx) -> in));
        started(w);
        assertThrows(IllegalStateException.class, () -> w.rawTask("b", "1.0.0", (in, ctx) -> in));
        assertThrows(IllegalStateException.class, w::run);
    }

    @Test
    void aRefusedRegistrationIsThrownFromRun() throws Exception {
        Worker w = Worker.builder().server(runtime.url() + "/nowhere").token("t").build();
        w.rawTask("a", "1.0.0", (in, ctx) -> in);
        ApiException e = assertThrows(ApiException.class, w::run);
        assertEquals(404, e.status());
        assertEquals(ApiException.HTTP_ERROR, e.code());
        assertEquals("Bearer t", runtime.requests.peek().authorization());
    }

    @Test
    void builderRules() {
        assertThrows(IllegalArgumentException.class, () -> Worker.builder().clientCert(java.nio.file.Path.of("a"), null));
        assertThrows(IllegalArgumentException.class, () -> Worker.builder().concurrency(0));
        assertThrows(IllegalArgumentException.class, () -> Worker.builder().server("ftp://x").build());
        Worker w = Worker.builder().server("http://example.test:1/").build();
        assertEquals("http://example.test:1", w.server());
        assertTrue(w.workerId().startsWith("java-"), w.workerId());
    }

    @Test
    void backoffIsJitteredBelowADoublingCeiling() {
        Backoff top = new Backoff(() -> 1.0);
        assertEquals(List.of(200L, 400L, 800L, 1600L, 3200L, 5000L, 5000L),
                List.of(top.nextDelayMs(), top.nextDelayMs(), top.nextDelayMs(), top.nextDelayMs(),
                        top.nextDelayMs(), top.nextDelayMs(), top.nextDelayMs()));
        top.reset();
        assertEquals(200L, top.nextDelayMs());
        Backoff half = new Backoff(() -> 0.5);
        assertEquals(100L, half.nextDelayMs());
        assertEquals(200L, half.nextDelayMs());
    }
}
