// The Java SDK's worker program for the protocol conformance suite
// (tests/sdk_conformance/README.md, "The worker program interface"): it serves
// the conf.* tasks and shuts down gracefully on SIGTERM or SIGINT, exiting 0.
// Run it as a single source file with the SDK and Jackson on the class path.

import io.github.ajmalx0.orbit.TaskContext;
import io.github.ajmalx0.orbit.TaskException;
import io.github.ajmalx0.orbit.Worker;
import java.time.Duration;
import java.util.Map;

public final class ConfWorker {
    record Echo(String text) {}

    record Flaky(int succeed_on) {}

    record Sleep(long ms) {}

    record Wait(long seconds) {}

    static void event(String name, TaskContext ctx) {
        System.err.println("CONF " + name + " " + ctx.executionId() + " " + ctx.stepId());
        System.err.flush();
    }

    static int envInt(String name, int fallback) {
        try {
            return Integer.parseInt(System.getenv(name));
        } catch (RuntimeException e) {
            return fallback;
        }
    }

    public static void main(String[] args) throws Exception {
        // One line per record, so every log line carries its message.
        System.setProperty("java.util.logging.SimpleFormatter.format", "%1$tT.%1$tL %4$s %3$s %5$s%6$s%n");
        Worker worker = Worker.builder()
                .workerId(System.getenv("CONF_WORKER_ID"))
                .concurrency(envInt("CONF_CONCURRENCY", 1))
                .pollWait(Duration.ofMillis(envInt("CONF_POLL_WAIT_MS", 5000)))
                .build();
        worker.task("conf.echo", "1.0.0", Echo.class, (in, ctx) -> {
            event("start", ctx);
            return new Echo(in.text());
        });
        worker.task("conf.flaky", "1.0.0", Flaky.class, (in, ctx) -> {
            event("start", ctx);
            if (ctx.attempt() < in.succeed_on()) {
                throw TaskException.retryable("CONF_RETRYABLE", "attempt " + ctx.attempt() + " fails");
            }
            return Map.of("attempt", ctx.attempt());
        });
        worker.rawTask("conf.fail_permanent", "1.0.0", (in, ctx) -> {
            event("start", ctx);
            throw new TaskException("CONF_PERMANENT", "permanent failure", false, Map.of("source", "conformance"));
        });
        worker.rawTask("conf.bad_output", "1.0.0", (in, ctx) -> {
            event("start", ctx);
            return Map.of("wrong", true);
        });
        // Ignores cancellation and shutdown on purpose: a result finished during
        // shutdown or an outage must still be delivered.
        worker.task("conf.sleep", "1.0.0", Sleep.class, (in, ctx) -> {
            event("start", ctx);
            long end = System.nanoTime() + in.ms() * 1_000_000L;
            boolean interrupted = false;
            while (System.nanoTime() < end) {
                try {
                    Thread.sleep(Math.max(1, (end - System.nanoTime()) / 1_000_000L));
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
            event("done", ctx);
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
            return Map.of("slept", in.ms());
        });
        worker.task("conf.sleep_until_cancelled", "1.0.0", Wait.class, (in, ctx) -> {
            event("start", ctx);
            try {
                Thread.sleep(in.seconds() * 1000);
                return Map.of("waited", true);
            } catch (InterruptedException e) {
                if (ctx.remainingMs().isPresent() && ctx.remainingMs().getAsLong() == 0) {
                    event("deadline", ctx);
                    throw TaskException.permanent("CONF_DEADLINE", "the attempt's deadline passed");
                }
                event("cancelled", ctx);
                throw TaskException.permanent("CANCELLED", "cancelled by the runtime");
            }
        });

        // A signal handler rather than a shutdown hook: the JVM exits with
        // 143 after the hooks of a SIGTERM, and the suite expects 0.
        for (String name : new String[] {"TERM", "INT"}) {
            sun.misc.Signal.handle(new sun.misc.Signal(name), signal -> new Thread(worker::stop, "conf-stop").start());
        }
        worker.run();
    }
}
