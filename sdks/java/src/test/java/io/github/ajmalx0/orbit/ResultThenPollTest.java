package io.github.ajmalx0.orbit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The result-then-poll extension: used when the runtime offers it, and only then. */
@Timeout(30)
class ResultThenPollTest {
    static final Duration WAIT = Duration.ofSeconds(10);

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

    Worker started(Duration pollWait) {
        worker = Worker.builder()
                .workerId("test-java")
                .server(runtime.url())
                .token("")
                .concurrency(1)
                .pollWait(pollWait)
                .build();
        worker.rawTask("echo", "1.0.0", (in, ctx) -> Map.of("ok", true));
        worker.random = () -> 0.0;
        worker.start();
        return worker;
    }

    private long polls() {
        return runtime.paths().stream().filter(Worker.POLL::equals).count();
    }

    @Test
    void resultsCarryTheNextPollWhenTheRuntimeOffersIt() throws Exception {
        runtime.offerResultThenPoll = true;
        String first = runtime.queue("echo", Map.of());
        String second = runtime.queue("echo", Map.of());
        started(Duration.ofMillis(300));
        for (String token : new String[] {first, second}) {
            FakeRuntime.Request result = runtime.nextResult(WAIT);
            assertEquals(token, result.body().path("token").asText());
            JsonNode poll = result.body().path("poll");
            assertEquals("session-1", poll.path("worker_session_id").asText());
            assertEquals(300, poll.path("wait_ms").asLong());
        }
        // One poll found the first task; the first result's answer brought the second.
        assertEquals(1, polls());
        JsonNode register = runtime.requests.peek().body();
        assertEquals("result-then-poll", register.path("extensions").get(0).asText());
    }

    @Test
    void resultsAreTheBooksWhenTheRuntimeDoesNotOfferIt() throws Exception {
        runtime.queue("echo", Map.of());
        runtime.queue("echo", Map.of());
        started(Duration.ofMillis(300));
        for (int i = 0; i < 2; i++) {
            assertFalse(runtime.nextResult(WAIT).body().has("poll"));
        }
        assertTrue(polls() >= 2);
    }

    @Test
    void aRefusedResultLosesNoTask() throws Exception {
        runtime.offerResultThenPoll = true;
        runtime.resultFailures.add(400);
        String first = runtime.queue("echo", Map.of());
        String second = runtime.queue("echo", Map.of());
        started(Duration.ofMillis(300));
        // The refused report took no task; the failure sent in its place
        // carries the poll, which brings the second task.
        FakeRuntime.Request fallback = runtime.nextResult(WAIT);
        assertEquals(Worker.FAIL, fallback.path());
        assertEquals(first, fallback.body().path("token").asText());
        assertTrue(fallback.body().path("poll").isObject());
        FakeRuntime.Request next = runtime.nextResult(WAIT);
        assertEquals(second, next.body().path("token").asText());
        assertEquals(1, polls());
    }

    @Test
    void shutdownDoesNotWaitForAResultsPoll() throws Exception {
        runtime.offerResultThenPoll = true;
        String token = runtime.queue("echo", Map.of());
        started(Duration.ofSeconds(20));
        assertTrue(runtime.nextResult(WAIT).body().has("poll"));
        long began = System.nanoTime();
        assertTrue(worker.stop(WAIT), "the worker did not stop");
        worker = null;
        assertTrue(System.nanoTime() - began < Duration.ofSeconds(3).toNanos(), "stopped at once");
        // Sent again without the poll once shutdown had begun.
        FakeRuntime.Request again = runtime.nextResult(WAIT);
        assertEquals(token, again.body().path("token").asText());
        assertFalse(again.body().has("poll"));
    }
}
