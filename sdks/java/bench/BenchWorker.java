// The Java worker of benchmarks/bench_http.py (--worker-kind java): serves
// bench.step, adding one to its input, with ORBIT_BENCH_CONCURRENCY poll
// threads, until SIGTERM. Run as a single source file with the SDK and
// Jackson on the class path.

import io.github.ajmalx0.orbit.Worker;
import java.time.Duration;
import java.util.logging.Level;
import java.util.logging.Logger;

public final class BenchWorker {
    record Step(long i) {}

    // Held here: java.util.logging keeps its loggers weakly, and a collected
    // one would come back at its default level.
    private static final Logger ORBIT_LOG = Logger.getLogger("orbit");

    public static void main(String[] args) {
        if (System.getenv("ORBIT_BENCH_QUIET") != null) {
            ORBIT_LOG.setLevel(Level.WARNING);
        }
        Worker worker = Worker.builder()
                .workerId(System.getenv("ORBIT_BENCH_WORKER_ID"))
                .concurrency(Integer.parseInt(System.getenv().getOrDefault("ORBIT_BENCH_CONCURRENCY", "4")))
                .pollWait(Duration.ofSeconds(1))
                .build();
        worker.task("bench.step", "1.0.0", Step.class, (in, ctx) -> new Step(in.i() + 1));
        Runtime.getRuntime().addShutdownHook(new Thread(worker::stop));
        worker.run();
    }
}
