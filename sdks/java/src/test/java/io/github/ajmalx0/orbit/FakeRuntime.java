package io.github.ajmalx0.orbit;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import com.sun.net.httpserver.HttpsConfigurator;
import com.sun.net.httpserver.HttpsParameters;
import com.sun.net.httpserver.HttpsServer;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingDeque;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.net.ssl.SSLContext;

/**
 * A scripted ORBIT runtime on the JDK's HttpServer: tasks are queued by the
 * test, every request is recorded, and result answers can be replaced by
 * error statuses (0 drops the connection without an answer).
 */
final class FakeRuntime implements AutoCloseable {
    static final ObjectMapper JSON = new ObjectMapper();

    record Request(String path, JsonNode body, String authorization) {}

    final BlockingQueue<Request> requests = new LinkedBlockingQueue<>();
    final BlockingQueue<Request> results = new LinkedBlockingQueue<>();
    final LinkedBlockingDeque<ObjectNode> tasks = new LinkedBlockingDeque<>();
    final ConcurrentLinkedDeque<String> cancels = new ConcurrentLinkedDeque<>();
    /** Statuses answered to the next results instead of accepting them. */
    final ConcurrentLinkedDeque<Integer> resultFailures = new ConcurrentLinkedDeque<>();
    /** Statuses answered to the next polls and heartbeats instead of serving them (0: no answer). */
    final ConcurrentLinkedDeque<Integer> pollFailures = new ConcurrentLinkedDeque<>();
    /** While set, polls and heartbeats get 503 or no answer, in turn: the runtime is away. */
    volatile boolean down;
    private final AtomicInteger downAnswers = new AtomicInteger();
    final AtomicInteger sessions = new AtomicInteger();
    final AtomicInteger forgetSessionOnPoll = new AtomicInteger();
    volatile int heartbeatIntervalMs = 100;
    /** Whether result-then-poll is offered to a worker that asks (off: the book's protocol). */
    volatile boolean offerResultThenPoll;
    volatile String currentSession;

    private final HttpServer server;
    private final ExecutorService pool = Executors.newCachedThreadPool();
    private final AtomicInteger tokens = new AtomicInteger();

    FakeRuntime() throws IOException {
        this(null, false);
    }

    FakeRuntime(SSLContext tls, boolean needClientAuth) throws IOException {
        InetSocketAddress address = new InetSocketAddress("127.0.0.1", 0);
        if (tls == null) {
            server = HttpServer.create(address, 0);
        } else {
            HttpsServer https = HttpsServer.create(address, 0);
            https.setHttpsConfigurator(new HttpsConfigurator(tls) {
                @Override
                public void configure(HttpsParameters params) {
                    params.setNeedClientAuth(needClientAuth);
                }
            });
            server = https;
        }
        server.createContext("/", this::handle);
        server.setExecutor(pool);
        server.start();
    }

    String url() {
        String scheme = server instanceof HttpsServer ? "https" : "http";
        return scheme + "://127.0.0.1:" + server.getAddress().getPort();
    }

    /** Queues a task assignment for {@code task} with {@code input}; returns its token. */
    String queue(String task, Object input) {
        return queue(task, input, null);
    }

    String queue(String task, Object input, Long deadlineMs) {
        String token = "tok-" + tokens.incrementAndGet();
        ObjectNode t = JSON.createObjectNode()
                .put("token", token)
                .put("execution_id", "exec-" + token)
                .put("workflow", "Wf")
                .put("workflow_version", "1.0.0")
                .put("step_id", "step")
                .put("task_name", task)
                .put("contract_version", "1.0.0")
                .put("idempotency_key", "exec-" + token + "/step")
                .put("attempt", 1)
                .put("redelivery", false);
        t.set("input", JSON.valueToTree(input));
        if (deadlineMs != null) {
            t.put("deadline_ms", deadlineMs);
            t.put("timeout_ms", Math.max(0, deadlineMs - System.currentTimeMillis()));
        }
        tasks.add(t);
        return token;
    }

    Request nextResult(Duration timeout) throws InterruptedException {
        Request r = results.poll(timeout.toMillis(), TimeUnit.MILLISECONDS);
        if (r == null) {
            throw new AssertionError("no result within " + timeout);
        }
        return r;
    }

    List<String> paths() {
        List<String> out = new ArrayList<>();
        for (Request r : requests) {
            out.add(r.path());
        }
        return out;
    }

    private void handle(HttpExchange exchange) throws IOException {
        try (exchange) {
            String path = exchange.getRequestURI().getPath();
            JsonNode body = JSON.readTree(exchange.getRequestBody().readAllBytes());
            Request request = new Request(path, body, exchange.getRequestHeaders().getFirst("authorization"));
            requests.add(request);
            switch (path) {
                case "/v1/workers/register" -> {
                    currentSession = "session-" + sessions.incrementAndGet();
                    ObjectNode answer = JSON.createObjectNode()
                            .put("accepted", true)
                            .put("worker_session_id", currentSession)
                            .put("heartbeat_interval_ms", heartbeatIntervalMs)
                            .put("session_timeout_ms", 30000);
                    answer.set("warnings", JSON.createArrayNode().add("a test warning"));
                    if (body.has("extensions")) {
                        var offered = answer.putArray("extensions");
                        for (JsonNode name : body.path("extensions")) {
                            if (offerResultThenPoll && "result-then-poll".equals(name.asText())) {
                                offered.add(name.asText());
                            }
                        }
                    }
                    send(exchange, 200, answer);
                }
                case "/v1/workers/poll" -> {
                    if (scriptedFailure(exchange, outage())) {
                        return;
                    }
                    if (!body.path("worker_session_id").asText().equals(currentSession)
                            || forgetSessionOnPoll.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
                        unknownSession(exchange);
                        return;
                    }
                    ObjectNode task = tasks.poll(body.path("wait_ms").asLong(), TimeUnit.MILLISECONDS);
                    if (down) { // a runtime that goes away drops the long polls it held too
                        if (task != null) {
                            tasks.addFirst(task);
                        }
                        scriptedFailure(exchange, 0);
                        return;
                    }
                    if (task == null) {
                        exchange.sendResponseHeaders(204, -1);
                    } else {
                        send(exchange, 200, task);
                    }
                }
                case "/v1/workers/heartbeat" -> {
                    if (scriptedFailure(exchange, outage())) {
                        return;
                    }
                    if (!body.path("worker_session_id").asText().equals(currentSession)) {
                        unknownSession(exchange);
                        return;
                    }
                    ObjectNode answer = JSON.createObjectNode().put("accepted", true);
                    var cancel = answer.putArray("cancel");
                    String token;
                    while ((token = cancels.poll()) != null) {
                        cancel.add(token);
                    }
                    send(exchange, 200, answer);
                }
                case "/v1/tasks/complete", "/v1/tasks/fail" -> {
                    if (scriptedFailure(exchange, resultFailures.poll())) {
                        return;
                    }
                    results.add(request);
                    ObjectNode answer = JSON.createObjectNode().put("accepted", true);
                    JsonNode poll = body.path("poll");
                    if (offerResultThenPoll && poll.isObject()) {
                        if (!poll.path("worker_session_id").asText().equals(currentSession)) {
                            answer.putObject("poll_error").put("code", "UNKNOWN_SESSION").put("message", "unknown");
                        } else {
                            answer.set("task", tasks.poll(poll.path("wait_ms").asLong(), TimeUnit.MILLISECONDS));
                        }
                    }
                    send(exchange, 200, answer);
                }
                case "/v1/workers/unregister" -> send(exchange, 200, JSON.createObjectNode().put("accepted", true));
                default -> exchange.sendResponseHeaders(404, -1);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private Integer outage() {
        if (down) {
            return downAnswers.getAndIncrement() % 2 == 0 ? 503 : 0;
        }
        return pollFailures.poll();
    }

    /** Answers {@code failure} when there is one (0 closes without an answer); true if it did. */
    private static boolean scriptedFailure(HttpExchange exchange, Integer failure) throws IOException {
        if (failure == null) {
            return false;
        }
        if (failure != 0) {
            ObjectNode error = JSON.createObjectNode();
            error.putObject("error").put("code", "UNAVAILABLE").put("message", "scripted failure");
            send(exchange, failure, error);
        }
        return true;
    }

    private static void unknownSession(HttpExchange exchange) throws IOException {
        ObjectNode error = JSON.createObjectNode();
        error.putObject("error").put("code", "UNKNOWN_SESSION").put("message", "unknown or expired worker session");
        send(exchange, 404, error);
    }

    private static void send(HttpExchange exchange, int status, JsonNode body) throws IOException {
        byte[] data = JSON.writeValueAsBytes(body);
        exchange.getResponseHeaders().add("content-type", "application/json");
        exchange.sendResponseHeaders(status, data.length);
        exchange.getResponseBody().write(data);
    }

    @Override
    public void close() {
        server.stop(0);
        pool.shutdownNow();
    }
}
