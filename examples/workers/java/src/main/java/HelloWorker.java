import io.github.ajmalx0.orbit.TaskException;
import io.github.ajmalx0.orbit.Worker;

/** Serves greeting.java from examples/java_hello.orbit. */
public final class HelloWorker {
    record Input(String name, boolean excited) {}

    record Output(String message, int letters) {}

    /** The business logic, kept apart from the SDK so that it tests on its own. */
    static Output greet(Input in) {
        String name = in.name() == null ? "" : in.name().strip();
        if (name.isEmpty()) {
            throw TaskException.permanent("INVALID_NAME", "name must not be blank");
        }
        int letters = (int) name.codePoints().filter(Character::isLetter).count();
        return new Output("Hello, " + name + ", from Java" + (in.excited() ? "!" : "."), letters);
    }

    public static void main(String[] args) {
        Worker worker = Worker.builder().workerId("hello-java").build();
        worker.task("greeting.java", "1.0.0", Input.class, (in, ctx) -> greet(in));

        // SIGINT and SIGTERM run the hook, which drains the worker.
        Runtime.getRuntime().addShutdownHook(new Thread(worker::stop));
        worker.run();
    }
}
