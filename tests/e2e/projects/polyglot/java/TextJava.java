// The polyglot workflow's Java step (tests/e2e/test_e2e_java_workers.py):
// text.initials takes the tokens and returns the first letter of each, upper
// case. Run as a single source file with the SDK and Jackson on the class path.

import io.github.ajmalx0.orbit.Worker;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;

public final class TextJava {
    record Tokens(List<String> tokens) {}

    public static void main(String[] args) {
        System.setProperty("java.util.logging.SimpleFormatter.format", "%1$tT %4$s %3$s %5$s%6$s%n");
        Worker worker = Worker.builder().workerId("text-java").build();
        worker.task("text.initials", "1.0.0", Tokens.class, (in, ctx) -> Map.of("initials",
                in.tokens().stream()
                        .filter(t -> !t.isEmpty())
                        .map(t -> t.substring(0, 1).toUpperCase(java.util.Locale.ROOT))
                        .collect(Collectors.joining())));
        Runtime.getRuntime().addShutdownHook(new Thread(worker::stop));
        worker.run();
    }
}
