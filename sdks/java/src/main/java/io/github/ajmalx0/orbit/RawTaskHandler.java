package io.github.ajmalx0.orbit;

import com.fasterxml.jackson.databind.JsonNode;

/** A handler that takes its input as a Jackson tree ({@code {}} when the runtime sent none). */
@FunctionalInterface
public interface RawTaskHandler {
    /** Runs one attempt; the result must serialize to a JSON object ({@code null} reports {@code {}}). */
    Object handle(JsonNode input, TaskContext ctx) throws Exception;
}
