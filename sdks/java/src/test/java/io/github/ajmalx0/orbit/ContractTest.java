package io.github.ajmalx0.orbit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.annotation.JsonIgnoreProperties;
import com.fasterxml.jackson.annotation.JsonProperty;
import com.fasterxml.jackson.databind.JsonNode;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Typed contracts as {@code orbit codegen --lang java} generates them. */
@Timeout(30)
class ContractTest {
    static final Duration WAIT = Duration.ofSeconds(10);
    static final String HASH = "sha256:" + "5b".repeat(32);
    static final String DOCUMENT = "{\"input\":{\"fields\":[]},\"name\":\"orders.validate\",\"version\":\"1.0.0\"}";

    /** Shaped like a generated record. */
    @JsonIgnoreProperties(ignoreUnknown = true)
    record Item(@JsonProperty(value = "sku", required = true) String sku,
            @JsonProperty(value = "quantity", required = true) long quantity) {}

    @JsonIgnoreProperties(ignoreUnknown = true)
    record OrdersValidateInput(@JsonProperty(value = "amount", required = true) double amount,
            @JsonProperty(value = "items", required = true) List<Item> items) {}

    record OrdersValidateOutput(@JsonProperty(value = "valid", required = true) boolean valid) {}

    /** The generated TaskContract's shape, which the SDK does not depend on. */
    record TaskContract<I, O>(String name, String version, String contractHash, String contract,
            Class<I> inputType, Class<O> outputType) {}

    static final TaskContract<OrdersValidateInput, OrdersValidateOutput> ORDERS_VALIDATE = new TaskContract<>(
            "orders.validate", "1.0.0", HASH, DOCUMENT, OrdersValidateInput.class, OrdersValidateOutput.class);

    FakeRuntime runtime;
    Worker worker;

    @BeforeEach
    void setUp() throws Exception {
        runtime = new FakeRuntime();
    }

    @AfterEach
    void tearDown() throws Exception {
        if (worker != null) {
            assertTrue(worker.stop(WAIT), "the worker did not stop");
        }
        runtime.close();
    }

    void start() {
        worker = Worker.builder().workerId("test-java").server(runtime.url()).token("").concurrency(1)
                .pollWait(Duration.ofMillis(300)).build();
        var c = ORDERS_VALIDATE;
        worker.contract(new ContractRef<>(c.name(), c.version(), c.contractHash(), c.contract(),
                c.inputType(), c.outputType()),
                (input, ctx) -> new OrdersValidateOutput(input.amount() > 0 && !input.items().isEmpty()));
        worker.rawTask("untyped", "1.0.0", (input, ctx) -> Map.of());
        worker.random = () -> 0.0;
        worker.start();
    }

    @Test
    void theRegisterRequestCarriesTheHashAndTheDocument() throws Exception {
        start();
        runtime.queue("orders.validate", Map.of("amount", 5.0, "items", List.of(Map.of("sku", "a", "quantity", 2))));
        JsonNode result = runtime.nextResult(WAIT).body();
        assertTrue(result.path("output").path("valid").asBoolean(), result.toString());

        JsonNode contracts = runtime.requests.peek().body().path("contracts");
        JsonNode typed = contracts.get(0);
        assertEquals("orders.validate", typed.path("task_name").asText());
        assertEquals("1.0.0", typed.path("contract_version").asText());
        assertEquals(HASH, typed.path("contract_hash").asText());
        assertEquals("orders.validate", typed.path("contract").path("name").asText());
        JsonNode untyped = contracts.get(1);
        assertFalse(untyped.has("contract_hash"), untyped.toString());
        assertFalse(untyped.has("contract"), untyped.toString());
    }

    @Test
    void inputThatDoesNotDecodeIsInvalidInputWithTheFieldPath() throws Exception {
        start();
        runtime.queue("orders.validate",
                Map.of("amount", 5.0, "items", List.of(Map.of("sku", "a", "quantity", "two"))));
        JsonNode fail = runtime.nextResult(WAIT).body();
        assertEquals("INVALID_INPUT", fail.path("error_code").asText(), fail.toString());
        assertFalse(fail.path("retryable").asBoolean());
        assertEquals("input.items[0].quantity", fail.path("details").path("path").asText());
        assertTrue(fail.path("error_message").asText().startsWith("input does not match `orders.validate@1.0.0`: "),
                fail.toString());

        runtime.queue("orders.validate", Map.of("items", List.of()));
        JsonNode missing = runtime.nextResult(WAIT).body();
        assertEquals("INVALID_INPUT", missing.path("error_code").asText(), missing.toString());
        assertEquals("input.amount", missing.path("details").path("path").asText(), missing.toString());
    }

    @Test
    void aMalformedHashIsRefusedAtOnce() {
        assertThrows(IllegalArgumentException.class, () -> new ContractRef<>("t", "1.0.0", "sha256:nope", null,
                OrdersValidateInput.class, OrdersValidateOutput.class));
    }
}
