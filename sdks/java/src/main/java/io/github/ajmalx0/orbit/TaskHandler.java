package io.github.ajmalx0.orbit;

/**
 * A handler whose input the SDK decodes into {@code I} with the worker's mapper.
 *
 * @param <I> the input type
 * @param <O> the result type; it must serialize to a JSON object ({@code null} reports {@code {}})
 */
@FunctionalInterface
public interface TaskHandler<I, O> {
    /** Runs one attempt. Throw {@link TaskException} to fail it on purpose. */
    O handle(I input, TaskContext ctx) throws Exception;
}
