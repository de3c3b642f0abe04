package io.github.ajmalx0.orbit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.System.Logger.Level;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * What a worker logs while the runtime is away: one line when it is lost,
 * reminders further and further apart, one line when it answers again.
 */
@Timeout(30)
class ContactTest {
    static final Duration WAIT = Duration.ofSeconds(10);
    static final long SECOND = 1_000_000_000L;

    @Test
    void oneLineOnLossRemindersBackOffAndOneLineOnReturn() {
        CapturingLogger log = new CapturingLogger();
        AtomicLong clock = new AtomicLong(1000 * SECOND);
        Contact contact = new Contact(log, clock::get);
        contact.answered(); // nothing was lost: nothing to say
        for (int i = 0; i < 70; i++) { // seventy seconds of retries, one a second
            contact.failed("poll failed: down; retrying in 1.0s");
            clock.addAndGet(SECOND);
        }
        contact.answered();
        contact.answered();

        assertEquals(List.of(
                "poll failed: down; retrying in 1.0s",
                "poll failed: down; retrying in 1.0s (runtime unreachable for 10s; 9 similar lines logged at DEBUG only)",
                "poll failed: down; retrying in 1.0s (runtime unreachable for 30s; 19 similar lines logged at DEBUG only)"),
                log.at(Level.WARNING));
        assertEquals(67, log.at(Level.DEBUG).size());
        assertEquals(List.of("runtime reachable again after 70.0s"), log.at(Level.INFO));

        contact.failed("heartbeat failed: down again");
        assertEquals("heartbeat failed: down again", log.at(Level.WARNING).get(3));
    }

    @Test
    void remindersAreAtMostTenMinutesApart() {
        CapturingLogger log = new CapturingLogger();
        AtomicLong clock = new AtomicLong(1000 * SECOND);
        Contact contact = new Contact(log, clock::get);
        for (int i = 0; i < 3 * 3600 / 5; i++) { // three hours, a retry every 5 s
            contact.failed("poll failed");
            clock.addAndGet(5 * SECOND);
        }
        List<String> reminders = log.at(Level.WARNING);
        List<Long> away = new ArrayList<>();
        for (String line : reminders.subList(1, reminders.size())) {
            away.add(Long.parseLong(line.split("for ")[1].split("s;")[0]));
        }
        // 10 s after the loss, then twice as far apart each time, up to 600 s.
        assertEquals(List.of(10L, 30L, 70L, 150L, 310L, 630L, 1230L, 1830L), away.subList(0, 8));
        for (int i = 7; i < away.size(); i++) {
            assertEquals(600L, away.get(i) - away.get(i - 1));
        }
    }

    @Test
    void aWorkerLogsAnOutageOnceAndItsEndOnce() throws Exception {
        CapturingLogger log = new CapturingLogger();
        try (FakeRuntime runtime = new FakeRuntime()) {
            Worker w = Worker.builder().workerId("test-java").server(runtime.url()).token("").concurrency(4)
                    .pollWait(Duration.ofMillis(300)).logger(log).build();
            w.rawTask("a.one", "1.0.0", (in, ctx) -> Map.of());
            w.random = () -> 0.05; // retries 10 ms, 20 ms ... 250 ms apart
            AtomicLong clock = new AtomicLong(0);
            w.nanos = clock::get; // a stopped clock: no reminder falls due
            w.start();
            try {
                long registered = System.nanoTime() + WAIT.toNanos();
                while (runtime.paths().stream().filter("/v1/workers/poll"::equals).count() < 4) {
                    assertTrue(System.nanoTime() < registered, "the worker did not poll");
                    Thread.sleep(10);
                }
                runtime.down = true;
                // Four poll threads and the heartbeat retry many times meanwhile.
                long deadline = System.nanoTime() + WAIT.toNanos();
                while (log.at(Level.DEBUG).size() < 30) {
                    assertTrue(System.nanoTime() < deadline, "too few retries: " + log.lines());
                    Thread.sleep(10);
                }
                runtime.down = false;
                runtime.queue("a.one", Map.of());
                runtime.nextResult(WAIT);
            } finally {
                assertTrue(w.stop(WAIT), "the worker did not stop");
            }
        }
        List<String> warnings = log.at(Level.WARNING).stream().filter(l -> !l.startsWith("runtime: ")).toList();
        assertEquals(1, warnings.size(), warnings.toString());
        assertTrue(warnings.get(0).startsWith("poll failed: ") || warnings.get(0).startsWith("heartbeat failed: "),
                warnings.get(0));
        assertTrue(log.at(Level.DEBUG).size() >= 30, log.at(Level.DEBUG).toString());
        List<String> back = log.at(Level.INFO).stream().filter(l -> l.startsWith("runtime reachable again")).toList();
        assertEquals(List.of("runtime reachable again after 0.0s"), back);
    }

    @Test
    void aResultTheRuntimeKeepsFailingIsLoggedOnceAndOnceDelivered() throws Exception {
        // Polls are answered while this one result is not: only the result's own lines are quiet.
        CapturingLogger log = new CapturingLogger();
        try (FakeRuntime runtime = new FakeRuntime()) {
            for (int i = 0; i < 6; i++) {
                runtime.resultFailures.add(500);
            }
            Worker w = Worker.builder().workerId("test-java").server(runtime.url()).token("").concurrency(1)
                    .pollWait(Duration.ofMillis(300)).logger(log).build();
            w.rawTask("a.one", "1.0.0", (in, ctx) -> Map.of());
            w.random = () -> 0.0;
            AtomicLong clock = new AtomicLong(0);
            w.nanos = () -> clock.addAndGet(SECOND / 10);
            w.start();
            try {
                runtime.queue("a.one", Map.of());
                runtime.nextResult(WAIT);
            } finally {
                assertTrue(w.stop(WAIT), "the worker did not stop");
            }
        }
        List<String> warnings = log.at(Level.WARNING).stream().filter(l -> !l.startsWith("runtime: ")).toList();
        assertEquals(List.of("result delivery failed: UNAVAILABLE (HTTP 500): scripted failure; retrying in 0.0s"
                + " execution=exec-tok-1 step=step attempt=1"), warnings);
        assertEquals(5, log.at(Level.DEBUG).stream().filter(l -> l.startsWith("result delivery failed")).count());
        List<String> delivered = log.at(Level.INFO).stream().filter(l -> l.startsWith("result delivered")).toList();
        assertEquals(1, delivered.size(), log.lines().toString());
        assertTrue(delivered.get(0).endsWith("s of retries execution=exec-tok-1 step=step attempt=1"), delivered.get(0));
        assertTrue(log.lines().stream().noneMatch(l -> l.startsWith("runtime reachable again")), log.lines().toString());
    }
}
