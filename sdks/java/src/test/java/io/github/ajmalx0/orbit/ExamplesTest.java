package io.github.ajmalx0.orbit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The chapter's example worker (examples/workers/java) compiled against this
 * SDK and run as its own process: it serves a task, refuses a blank name
 * permanently, and drains on SIGTERM through its shutdown hook.
 */
@Timeout(60)
class ExamplesTest {
    static final Path EXAMPLE = Path.of("..", "..", "examples", "workers", "java", "src", "main", "java", "HelloWorker.java");

    @Test
    void helloWorkerServesGreetingsAndStopsOnSigterm(@TempDir Path classes) throws Exception {
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        String classpath = System.getProperty("java.class.path");
        int status = javac.run(null, null, null, "-Xlint:all", "-Werror", "-d", classes.toString(),
                "-cp", classpath, EXAMPLE.toString());
        assertEquals(0, status, "the example does not compile");

        try (FakeRuntime runtime = new FakeRuntime()) {
            Path java = Path.of(System.getProperty("java.home"), "bin", "java");
            ProcessBuilder builder = new ProcessBuilder(java.toString(), "-cp",
                    classes + File.pathSeparator + classpath, "HelloWorker")
                    .redirectErrorStream(true)
                    .redirectOutput(classes.resolve("worker.log").toFile());
            builder.environment().put("ORBIT_SERVER", runtime.url());
            builder.environment().remove("ORBIT_TOKEN");
            builder.environment().remove("ORBIT_WORKER_TOKEN");
            Process process = builder.start();
            try {
                runtime.queue("greeting.java", Map.of("name", "Ada", "excited", true));
                JsonNode output = runtime.nextResult(Duration.ofSeconds(30)).body().path("output");
                assertEquals("Hello, Ada, from Java!", output.path("message").asText());
                assertEquals(3, output.path("letters").asInt());

                runtime.queue("greeting.java", Map.of("name", "  "));
                JsonNode fail = runtime.nextResult(Duration.ofSeconds(30)).body();
                assertEquals("INVALID_NAME", fail.path("error_code").asText());
                assertFalse(fail.path("retryable").asBoolean());

                JsonNode register = runtime.requests.peek().body();
                assertEquals("hello-java", register.path("worker_id").asText());
                assertEquals("java", register.path("runtime").asText());
            } finally {
                process.destroy(); // SIGTERM
                assertTrue(process.waitFor(30, TimeUnit.SECONDS), "the worker did not stop on SIGTERM");
            }
            String log = Files.readString(classes.resolve("worker.log"));
            List<String> paths = runtime.paths();
            assertEquals("/v1/workers/unregister", paths.get(paths.size() - 1), log);
            assertTrue(log.contains("worker hello-java registered"), log);
        }
    }
}
