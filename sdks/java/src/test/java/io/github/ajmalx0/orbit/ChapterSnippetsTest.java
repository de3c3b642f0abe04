package io.github.ajmalx0.orbit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The smaller examples of the Java SDK's chapter and docs page, compiled and run. */
@Timeout(30)
class ChapterSnippetsTest {
    record Section(String title) {}

    record Report(List<Section> sections) {}

    /** Stands in for a renderer that ignores interrupts and must be aborted. */
    static final class Renderer {
        final AtomicBoolean aborted = new AtomicBoolean();
        final CountDownLatch started = new CountDownLatch(1);

        void render(Section s) {
            started.countDown();
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (!aborted.get() && System.nanoTime() < end) {
                Thread.onSpinWait();
            }
        }

        void abort() {
            aborted.set(true);
        }
    }

    @Test
    void cancellationAbortsAResourceThatIgnoresInterrupts() throws Exception {
        Renderer renderer = new Renderer();
        try (FakeRuntime runtime = new FakeRuntime()) {
            Worker worker = Worker.builder().server(runtime.url()).token("").concurrency(1)
                    .pollWait(Duration.ofMillis(300)).build();
            worker.task("reports.render", "1.0.0", Report.class, (report, ctx) -> {
                ctx.cancellation().thenRun(renderer::abort);
                for (Section s : report.sections()) {
                    ctx.throwIfCancelled();
                    renderer.render(s);
                }
                return Map.of("pages", report.sections().size());
            });
            worker.start();
            try {
                String token = runtime.queue("reports.render",
                        Map.of("sections", List.of(Map.of("title", "a"), Map.of("title", "b"))));
                assertTrue(renderer.started.await(10, TimeUnit.SECONDS));
                runtime.cancels.add(token);
                JsonNode fail = runtime.nextResult(Duration.ofSeconds(10)).body();
                assertEquals("CANCELLED", fail.path("error_code").asText());
                assertTrue(renderer.aborted.get());
            } finally {
                assertTrue(worker.stop(Duration.ofSeconds(10)));
            }
        }
    }

    @Test
    void unreadableTlsFilesFailTheBuild() {
        assertThrows(UncheckedIOException.class, () -> Worker.builder()
                .workerId("payments-1")
                .server("https://orbit.internal:7233")
                .caCertFile(Path.of("/nonexistent/orbit/ca.pem"))
                .clientCert(Path.of("/nonexistent/orbit/payments-1.pem"), Path.of("/nonexistent/orbit/payments-1.key"))
                .build());
    }
}
