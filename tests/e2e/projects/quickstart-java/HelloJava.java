// The quick start's two tasks served by one Java worker, for the Hello
// workflow with both steps routed `using java` (tests/e2e/test_e2e_java_workers.py).
// Run as a single source file with the SDK and Jackson on the class path.

import io.github.ajmalx0.orbit.TaskException;
import io.github.ajmalx0.orbit.Worker;

public final class HelloJava {
    record Compose(String name) {}

    record Decorate(String message, int excitement) {}

    record Greeting(String message) {}

    public static void main(String[] args) {
        System.setProperty("java.util.logging.SimpleFormatter.format", "%1$tT %4$s %3$s %5$s%6$s%n");
        Worker worker = Worker.builder().workerId("hello-java").build();
        worker.task("greeting.compose", "1.0.0", Compose.class, (in, ctx) -> {
            ctx.log("composing a greeting for " + in.name());
            return new Greeting("Hello, " + in.name());
        });
        worker.task("greeting.decorate", "1.0.0", Decorate.class, (in, ctx) -> {
            if (in.excitement() < 0) {
                throw TaskException.permanent("INVALID_EXCITEMENT", "excitement must not be negative");
            }
            return new Greeting(in.message() + "!".repeat(in.excitement()));
        });
        Runtime.getRuntime().addShutdownHook(new Thread(worker::stop));
        worker.run();
    }
}
