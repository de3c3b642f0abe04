package io.github.ajmalx0.orbit;

/**
 * Thrown by a handler to fail its attempt with a stable error code.
 *
 * <p>A retryable failure leaves the decision to the step's retry policy; a
 * permanent one fails the step at once. {@code details} is any value the
 * worker's mapper can serialize; it is stored with the error in the history.
 */
public class TaskException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final String code;
    private final String errorMessage;
    private final boolean retryable;
    private final transient Object details;

    /** A failure with the given retryability and no details. */
    public TaskException(String code, String message, boolean retryable) {
        this(code, message, retryable, null);
    }

    /** A failure with the given retryability and details. */
    public TaskException(String code, String message, boolean retryable, Object details) {
        super(code + ": " + (message == null ? "" : message));
        if (code == null || code.isBlank()) {
            throw new IllegalArgumentException("a task error needs a non-blank code");
        }
        this.code = code;
        this.errorMessage = message == null ? "" : message;
        this.retryable = retryable;
        this.details = details;
    }

    /** A failure the step's retry policy may retry. */
    public static TaskException retryable(String code, String message) {
        return new TaskException(code, message, true);
    }

    /** A failure that ends the step whatever its retry policy says. */
    public static TaskException permanent(String code, String message) {
        return new TaskException(code, message, false);
    }

    /** The machine-readable error code, for example {@code CARD_DECLINED}. */
    public String code() {
        return code;
    }

    /** The human-readable message, without the code in front of it. */
    public String errorMessage() {
        return errorMessage;
    }

    /** Whether the runtime may retry the step. */
    public boolean retryable() {
        return retryable;
    }

    /** The details reported with the error, or {@code null}. */
    public Object details() {
        return details;
    }
}
