package io.github.ajmalx0.orbit;

/**
 * An error answer from the runtime, or no answer at all.
 *
 * <p>{@link #status()} is 0 and {@link #code()} is {@code CONNECTION} when the
 * request got no HTTP response; {@code HTTP_ERROR} stands for an error answer
 * that does not carry the runtime's JSON error object (a proxy's, say).
 */
public class ApiException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** The code of a request that got no response. */
    public static final String CONNECTION = "CONNECTION";
    /** The code of an error answer without the runtime's error object. */
    public static final String HTTP_ERROR = "HTTP_ERROR";

    private final int status;
    private final String code;
    private final String detail;

    ApiException(int status, String code, String detail) {
        super(status == 0 ? detail : code + " (HTTP " + status + "): " + detail);
        this.status = status;
        this.code = code;
        this.detail = detail;
    }

    static ApiException connection(String detail) {
        return new ApiException(0, CONNECTION, detail);
    }

    /** The HTTP status, or 0 for a connection failure. */
    public int status() {
        return status;
    }

    /** The runtime's error code, {@code CONNECTION} or {@code HTTP_ERROR}. */
    public String code() {
        return code;
    }

    /** The runtime's message (or the reason the connection failed). */
    public String detail() {
        return detail;
    }

    /** True when the request got no HTTP response. */
    public boolean isConnectionError() {
        return status == 0;
    }

    boolean isUnknownSession() {
        return status == 404 && "UNKNOWN_SESSION".equals(code);
    }

    /** Connection failures and 5xx answers are worth retrying; other answers are final. */
    boolean isTransient() {
        return isConnectionError() || status >= 500;
    }
}
