package typed;

import io.github.ajmalx0.orbit.ContractRef;
import io.github.ajmalx0.orbit.Worker;
import java.time.Duration;
import java.util.Locale;

/**
 * The Java SDK's typed conformance program (../../README.md, "Typed workers"): conf.echo served
 * through the class `orbit codegen --lang java --package typed` generated from conformance.orbit,
 * which the suite compiles with this file. It answers the text in upper case.
 */
public final class TypedWorker {
    private TypedWorker() {}

    public static void main(String[] args) throws Exception {
        System.setProperty("java.util.logging.SimpleFormatter.format", "%1$tT.%1$tL %4$s %3$s %5$s%6$s%n");
        String pollWait = System.getenv().getOrDefault("CONF_POLL_WAIT_MS", "5000");
        Worker worker = Worker.builder()
                .workerId(System.getenv("CONF_WORKER_ID"))
                .pollWait(Duration.ofMillis(Long.parseLong(pollWait)))
                .build();
        var c = Typed.CONF_ECHO;
        worker.contract(
                new ContractRef<>(c.name(), c.version(), c.contractHash(), c.contract(), c.inputType(), c.outputType()),
                (input, ctx) -> {
                    System.err.println("CONF start " + ctx.executionId() + " " + ctx.stepId());
                    return new Typed.ConfEchoOutput(input.text().toUpperCase(Locale.ROOT));
                });
        worker.run();
    }
}
