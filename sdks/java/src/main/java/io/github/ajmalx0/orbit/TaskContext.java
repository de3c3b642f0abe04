package io.github.ajmalx0.orbit;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import java.util.OptionalLong;
import java.util.concurrent.CompletableFuture;

/**
 * What a handler knows about the attempt it runs; created by the SDK.
 *
 * <p>Cancellation (a heartbeat's cancel list, or the attempt's deadline passing)
 * sets {@link #isCancelled()}, completes {@link #cancellation()} and interrupts
 * the thread running the handler, but only while the handler runs: the
 * interrupt never leaks into the SDK's own reporting of the result.
 */
public final class TaskContext {
    private final String token;
    private final String executionId;
    private final String workflow;
    private final String workflowVersion;
    private final String stepId;
    private final String taskName;
    private final String contractVersion;
    private final JsonNode input;
    private final String idempotencyKey;
    private final int attempt;
    private final boolean redelivery;
    private final OptionalLong deadlineMs;
    private final OptionalLong timeoutMs;
    private final System.Logger logger;

    private final CompletableFuture<Void> cancellation = new CompletableFuture<>();
    // Guarded by this: the thread running the handler, while it runs.
    private Thread handlerThread;
    private volatile boolean deadlinePassed;
    private volatile boolean cancelled;

    TaskContext(JsonNode task, System.Logger logger) {
        this.token = task.path("token").asText();
        this.executionId = task.path("execution_id").asText("");
        this.workflow = task.path("workflow").asText("");
        this.workflowVersion = task.path("workflow_version").asText("");
        this.stepId = task.path("step_id").asText("");
        this.taskName = task.path("task_name").asText("");
        this.contractVersion = task.path("contract_version").asText("");
        JsonNode in = task.get("input");
        this.input = in == null || in.isNull() ? JsonNodeFactory.instance.objectNode() : in;
        this.idempotencyKey = task.path("idempotency_key").asText("");
        this.attempt = task.path("attempt").asInt(1);
        this.redelivery = task.path("redelivery").asBoolean(false);
        this.deadlineMs = optionalLong(task.get("deadline_ms"));
        this.timeoutMs = optionalLong(task.get("timeout_ms"));
        this.logger = logger;
    }

    private static OptionalLong optionalLong(JsonNode node) {
        return node == null || !node.canConvertToLong() ? OptionalLong.empty() : OptionalLong.of(node.asLong());
    }

    /** Identifies this delivery; the SDK echoes it in the result. */
    public String token() {
        return token;
    }

    /** The workflow execution. */
    public String executionId() {
        return executionId;
    }

    /** The workflow's name. */
    public String workflow() {
        return workflow;
    }

    /** The workflow's version. */
    public String workflowVersion() {
        return workflowVersion;
    }

    /** The step: {@code <step>}, {@code <step>[i]} or {@code compensate:<step>}. */
    public String stepId() {
        return stepId;
    }

    /** The task's name. */
    public String taskName() {
        return taskName;
    }

    /** The task's contract version. */
    public String contractVersion() {
        return contractVersion;
    }

    /** The raw input; {@code {}} when the runtime sent none. */
    public JsonNode input() {
        return input;
    }

    /** Stable across retries and redeliveries of the step: key side effects on it. */
    public String idempotencyKey() {
        return idempotencyKey;
    }

    /** The 1-based attempt number; a redelivery keeps it. */
    public int attempt() {
        return attempt;
    }

    /** True when an earlier delivery of this attempt has an unknown outcome. */
    public boolean redelivery() {
        return redelivery;
    }

    /** When the step has a timeout: the end of this attempt, in milliseconds since the Unix epoch. */
    public OptionalLong deadlineMs() {
        return deadlineMs;
    }

    /** The step's timeout in milliseconds, when it has one. */
    public OptionalLong timeoutMs() {
        return timeoutMs;
    }

    /** Milliseconds left before the deadline (never negative), when there is one. */
    public OptionalLong remainingMs() {
        if (deadlineMs.isEmpty()) {
            return OptionalLong.empty();
        }
        return OptionalLong.of(Math.max(0, deadlineMs.getAsLong() - System.currentTimeMillis()));
    }

    /** True once the attempt was cancelled by the runtime or by its deadline. */
    public boolean isCancelled() {
        return cancelled;
    }

    /** Completes when the attempt is cancelled. */
    public CompletableFuture<Void> cancellation() {
        return cancellation;
    }

    /** Throws a retryable {@code CANCELLED} TaskException once the attempt was cancelled. */
    public void throwIfCancelled() {
        if (isCancelled()) {
            throw TaskException.retryable("CANCELLED", cancelReason());
        }
    }

    /** Logs {@code message} at INFO, followed by the execution, step and attempt. */
    public void log(String message) {
        log(System.Logger.Level.INFO, message);
    }

    /** Logs {@code message} at {@code level}, followed by the execution, step and attempt. */
    public void log(System.Logger.Level level, String message) {
        if (logger.isLoggable(level)) {
            logger.log(level, message + " " + identity());
        }
    }

    String identity() {
        return "execution=" + executionId + " step=" + stepId + " attempt=" + attempt;
    }

    String cancelReason() {
        return deadlinePassed ? "the attempt's deadline passed" : "the attempt was cancelled";
    }

    boolean deadlinePassed() {
        return deadlinePassed;
    }

    /** Cancels the attempt; false if it already was. */
    boolean cancel(boolean byDeadline) {
        synchronized (this) {
            if (cancelled) {
                return false;
            }
            cancelled = true;
            if (byDeadline) {
                deadlinePassed = true;
            }
            if (handlerThread != null) {
                handlerThread.interrupt();
            }
        }
        // Outside the lock: callbacks registered by the handler run here.
        cancellation.complete(null);
        return true;
    }

    void handlerStarted() {
        synchronized (this) {
            handlerThread = Thread.currentThread();
            if (cancelled) {
                handlerThread.interrupt();
            }
        }
    }

    void handlerFinished() {
        synchronized (this) {
            handlerThread = null;
        }
        // A cancellation that came as the handler returned must not reach the SDK's own calls.
        Thread.interrupted();
    }

    @Override
    public String toString() {
        return "TaskContext[execution=" + executionId + ", step=" + stepId + ", attempt=" + attempt
                + ", task=" + taskName + "]";
    }
}
