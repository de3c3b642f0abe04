package io.github.ajmalx0.orbit;

import java.util.regex.Pattern;

/**
 * A task contract that {@code orbit codegen --lang java} generated, as the
 * worker registers it: the task's name and contract version, the contract's
 * hash (announced at registration, so that a runtime whose deployed contract
 * differs refuses the worker with CONTRACT_MISMATCH instead of sending it
 * input it would misread), the contract document (lets the runtime name the
 * first field that differs) and the generated records of the input and
 * output.
 *
 * <p>The generated {@code TaskContract} has the same components in the same
 * order, but the generated code depends on Jackson only, not on this SDK, so
 * it is copied over:
 *
 * <pre>{@code
 * var c = Contracts.ORDERS_VALIDATE;
 * worker.contract(new ContractRef<>(c.name(), c.version(), c.contractHash(), c.contract(),
 *         c.inputType(), c.outputType()), (input, ctx) -> ...);
 * }</pre>
 *
 * @param name the task name
 * @param version the contract version
 * @param contractHash {@code sha256:} and 64 lowercase hex digits
 * @param contract the hashed contract document as JSON text, or {@code null} to send only the hash
 * @param inputType the record the input decodes into
 * @param outputType the record the handler returns
 * @param <I> the input type
 * @param <O> the output type
 */
public record ContractRef<I, O>(
        String name, String version, String contractHash, String contract, Class<I> inputType, Class<O> outputType) {
    private static final Pattern HASH = Pattern.compile("sha256:[0-9a-f]{64}");

    /** Checks what the runtime would refuse, so that a mistake shows at startup. */
    public ContractRef {
        if (name == null || name.isBlank() || version == null || version.isBlank()) {
            throw new IllegalArgumentException("a contract needs a task name and a contract version");
        }
        if (contractHash == null || !HASH.matcher(contractHash).matches()) {
            throw new IllegalArgumentException("the hash of contract `" + name + "@" + version
                    + "` is not sha256: and 64 lowercase hex digits: " + contractHash);
        }
        if (inputType == null || outputType == null) {
            throw new IllegalArgumentException("contract `" + name + "@" + version + "` needs its input and output types");
        }
    }
}
