package io.github.ajmalx0.orbit;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JavaType;
import com.fasterxml.jackson.databind.JsonMappingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.System.Logger.Level;
import java.net.InetAddress;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.DoubleSupplier;
import java.util.function.LongSupplier;
import javax.net.ssl.SSLContext;

/**
 * Runs task handlers for an ORBIT runtime.
 *
 * <p>Threads of a running worker:
 *
 * <pre>
 *   caller of run()   registers, waits for stop(), drains, unregisters
 *   orbit-poll-i      concurrency of them: long poll, run one task, report, repeat
 *   orbit-heartbeat   heartbeats at the runtime's interval; cancels listed attempts
 *   orbit-deadline    cancels attempts whose deadline_ms passed
 * </pre>
 *
 * <p>Cancellation interrupts the poll thread running the handler, so a poll
 * thread is in one of two states, guarded by {@code threadsLock}: polling
 * (shutdown may interrupt it to end the long poll) or executing (only the
 * attempt's cancellation may). A task that a poll returns once shutdown began
 * is not started: unregistering hands it back to the runtime at once.
 *
 * <p>Results are sent until the runtime answers, through outages, for up to
 * {@link Builder#resultRetryTimeout(Duration)}; see {@link Reporter}.
 */
public final class Worker {
    /** The SDK version. */
    public static final String VERSION = "0.1.0";
    /** The runtime URL used when neither the builder nor ORBIT_SERVER names one. */
    public static final String DEFAULT_SERVER = "http://127.0.0.1:7233";

    static final String USER_AGENT = "orbit-java/" + VERSION;
    static final String REGISTER = "/v1/workers/register";
    static final String POLL = "/v1/workers/poll";
    /** The runtime's extension that lets a result carry the next poll (docs/worker-protocol.md). */
    static final String RESULT_THEN_POLL = "result-then-poll";
    static final String HEARTBEAT = "/v1/workers/heartbeat";
    static final String UNREGISTER = "/v1/workers/unregister";
    static final String COMPLETE = "/v1/tasks/complete";
    static final String FAIL = "/v1/tasks/fail";
    private static final int DEFAULT_HEARTBEAT_MS = 5000;
    private static final int STACK_FRAMES = 20;

    private final String workerId;
    private final String server;
    private final String runtime;
    private final int concurrency;
    private final Duration pollWait;
    private final Duration resultRetryTimeout;
    private final ObjectMapper mapper;
    private final System.Logger logger;
    private final Http http;
    DoubleSupplier random = () -> ThreadLocalRandom.current().nextDouble();
    /** The clock of the outage lines; tests replace it. */
    LongSupplier nanos = System::nanoTime;
    /** Whether the runtime answers polls, heartbeats and registration; set when the worker starts. */
    private Contact contact;

    private final Map<String, Registration> handlers = new LinkedHashMap<>();
    private final Object stateLock = new Object();
    private boolean started;
    private volatile boolean stopping;
    private final CountDownLatch stopSignal = new CountDownLatch(1);
    private final CountDownLatch heartbeatStop = new CountDownLatch(1);
    private final CountDownLatch done = new CountDownLatch(1);

    private final Object threadsLock = new Object();
    private final List<Thread> polling = new ArrayList<>();

    private final Object busyLock = new Object();
    private int busy;
    private final Map<String, TaskContext> inflight = new ConcurrentHashMap<>();

    private Session session;

    private Worker(Builder b) {
        this.workerId = b.workerId != null ? b.workerId : defaultWorkerId();
        this.server = firstNonEmpty(b.server, env("ORBIT_SERVER"), DEFAULT_SERVER).replaceAll("/+$", "");
        this.runtime = b.runtime;
        this.concurrency = b.concurrency;
        this.pollWait = b.pollWait;
        this.resultRetryTimeout = b.resultRetryTimeout;
        this.mapper = b.mapper != null
                ? b.mapper
                : new ObjectMapper().configure(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, false);
        this.logger = b.logger != null ? b.logger : System.getLogger("orbit");
        String token = b.tokenSet ? emptyToNull(b.token) : firstNonEmpty(env("ORBIT_WORKER_TOKEN"), env("ORBIT_TOKEN"), null);
        SSLContext ssl = b.sslContext;
        if (ssl == null) {
            Path ca = b.caCertFile != null ? b.caCertFile : envPath("ORBIT_CA_CERT");
            Path cert = b.clientCert;
            Path key = b.clientKey;
            if (cert == null && key == null) {
                cert = envPath("ORBIT_CLIENT_CERT");
                key = envPath("ORBIT_CLIENT_KEY");
            }
            if ((cert == null) != (key == null)) {
                throw new IllegalArgumentException(
                        "mutual TLS needs both a client certificate and its key (ORBIT_CLIENT_CERT and ORBIT_CLIENT_KEY)");
            }
            if (ca != null || cert != null) {
                ssl = Tls.context(ca, cert, key);
            }
        }
        // The read timeout must outlast a long poll that finds no task.
        this.http = new Http(server, token, ssl, mapper, pollWait.plusSeconds(15));
    }

    /** A builder; every unset option falls back to the environment, then the default. */
    public static Builder builder() {
        return new Builder();
    }

    /** A worker configured entirely from the environment and the defaults. */
    public static Worker create() {
        return builder().build();
    }

    /** The resolved worker id. */
    public String workerId() {
        return workerId;
    }

    /** The resolved runtime URL. */
    public String server() {
        return server;
    }

    /** The mapper that decodes inputs and encodes results. */
    public ObjectMapper objectMapper() {
        return mapper;
    }

    /** Registers a handler whose input is decoded into {@code inputType}. */
    public <I, O> Worker task(String name, String version, Class<I> inputType, TaskHandler<I, O> handler) {
        return typed(name, version, mapper.getTypeFactory().constructType(inputType), handler);
    }

    /** Registers a handler whose input is decoded into a generic type. */
    public <I, O> Worker task(String name, String version, TypeReference<I> inputType, TaskHandler<I, O> handler) {
        return typed(name, version, mapper.getTypeFactory().constructType(inputType), handler);
    }

    /** Registers a handler that takes its input as a {@link JsonNode}. */
    public Worker rawTask(String name, String version, RawTaskHandler handler) {
        if (handler == null) {
            throw new IllegalArgumentException("the handler for `" + name + "` is null");
        }
        register(name, version, new Registration(version, handler, null, null));
        return this;
    }

    /**
     * Registers a handler of a generated contract: the input is decoded into
     * the contract's input record (input that does not decode fails the
     * attempt with INVALID_INPUT, not retried, {@code details.path} naming the
     * field, as in {@code input.items[0].quantity}), the returned record is
     * encoded as the output, and the contract's hash and document are
     * announced at registration.
     */
    public <I, O> Worker contract(ContractRef<I, O> contract, TaskHandler<I, ? extends O> handler) {
        if (contract == null) {
            throw new IllegalArgumentException("the contract is null");
        }
        if (handler == null) {
            throw new IllegalArgumentException("the handler for `" + contract.name() + "` is null");
        }
        JsonNode document = null;
        if (contract.contract() != null) {
            try {
                document = mapper.readTree(contract.contract());
            } catch (JsonProcessingException e) {
                // The hash alone still lets the runtime compare; only the diff's detail is lost.
                document = null;
            }
        }
        String label = contract.name() + "@" + contract.version();
        RawTaskHandler raw = (input, ctx) -> {
            I decoded;
            try {
                decoded = mapper.treeToValue(input, contract.inputType());
            } catch (JsonProcessingException | IllegalArgumentException e) {
                String path = e instanceof JsonMappingException m ? fieldPath(m) : "input";
                String reason = e instanceof JsonProcessingException p ? p.getOriginalMessage() : e.getMessage();
                throw new TaskException("INVALID_INPUT", "input does not match `" + label + "`: "
                        + String.valueOf(reason).lines().findFirst().orElse(""), false, Map.of("path", path));
            }
            return handler.handle(decoded, ctx);
        };
        register(contract.name(), contract.version(), new Registration(contract.version(), raw,
                contract.contractHash(), document));
        return this;
    }

    /** Where decoding failed, as {@code input.items[0].quantity}. */
    static String fieldPath(JsonMappingException e) {
        StringBuilder path = new StringBuilder("input");
        for (JsonMappingException.Reference ref : e.getPath()) {
            if (ref.getFieldName() != null) {
                path.append('.').append(ref.getFieldName());
            } else if (ref.getIndex() >= 0) {
                path.append('[').append(ref.getIndex()).append(']');
            }
        }
        return path.toString();
    }

    private <I, O> Worker typed(String name, String version, JavaType type, TaskHandler<I, O> handler) {
        if (handler == null) {
            throw new IllegalArgumentException("the handler for `" + name + "` is null");
        }
        register(name, version, new Registration(version, (input, ctx) -> {
            I decoded;
            try {
                decoded = mapper.treeToValue(input, type);
            } catch (Exception e) {
                throw new InvalidInput("cannot decode the input as " + type.toCanonical() + ": "
                        + e.getMessage().lines().findFirst().orElse(""));
            }
            return handler.handle(decoded, ctx);
        }, null, null));
        return this;
    }

    private void register(String name, String version, Registration registration) {
        if (name == null || name.isBlank() || version == null || version.isBlank()) {
            throw new IllegalArgumentException("a task needs a name and a contract version");
        }
        synchronized (stateLock) {
            if (started) {
                throw new IllegalStateException("register every task before the worker starts");
            }
            if (handlers.containsKey(name)) {
                throw new IllegalArgumentException("task `" + name + "` is already registered");
            }
            handlers.put(name, registration);
        }
    }

    /**
     * Registers, polls and blocks until {@link #stop()}; then lets running
     * handlers finish and report, and unregisters.
     *
     * @throws IllegalStateException when no task is registered or the worker already started
     * @throws ApiException when the runtime refuses the registration
     */
    public void run() {
        claimStart();
        runClaimed();
    }

    private void claimStart() {
        synchronized (stateLock) {
            if (handlers.isEmpty()) {
                throw new IllegalStateException("no task is registered: call task(...) before starting the worker");
            }
            if (started) {
                throw new IllegalStateException("this worker already started");
            }
            started = true;
        }
    }

    private void runClaimed() {
        try {
            contact = new Contact(logger, nanos);
            session = new Session();
            if (!session.open()) {
                return;
            }
            serve();
        } finally {
            done.countDown();
        }
    }

    /** Runs {@link #run()} on a new thread named {@code orbit-worker} and returns it. */
    public Thread start() {
        claimStart();
        Thread thread = new Thread(() -> {
            try {
                runClaimed();
            } catch (RuntimeException e) {
                logger.log(Level.ERROR, "worker " + workerId + " stopped: " + e.getMessage(), e);
            }
        }, "orbit-worker");
        thread.start();
        return thread;
    }

    /**
     * Stops gracefully: no new task, running handlers finish and report, the
     * session is unregistered. Blocks until all of that is done; safe to call
     * more than once and from a shutdown hook.
     */
    public void stop() {
        try {
            stop(null);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Like {@link #stop()}, waiting at most {@code timeout}; true if the worker stopped. */
    public boolean stop(Duration timeout) throws InterruptedException {
        boolean running;
        synchronized (stateLock) {
            running = started;
        }
        requestStop();
        if (!running) {
            return true;
        }
        if (timeout == null) {
            done.await();
            return true;
        }
        return done.await(timeout.toMillis(), TimeUnit.MILLISECONDS);
    }

    private void serve() {
        Thread heartbeat = daemon("orbit-heartbeat", this::heartbeatLoop);
        ScheduledExecutorService deadlines = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "orbit-deadline");
            t.setDaemon(true);
            return t;
        });
        Reporter reporter = new Reporter(this, http, logger, resultRetryTimeout);
        List<Thread> pollers = new ArrayList<>();
        for (int i = 1; i <= concurrency; i++) {
            pollers.add(daemon("orbit-poll-" + i, () -> pollLoop(reporter, deadlines)));
        }
        boolean interrupted = false;
        while (true) {
            try {
                stopSignal.await();
                break;
            } catch (InterruptedException e) {
                // Interrupting the thread in run() asks for a stop too.
                interrupted = true;
                requestStop();
            }
        }
        synchronized (busyLock) {
            if (busy > 0) {
                logger.log(Level.INFO, "shutting down: stopped polling; waiting for " + busy
                        + " running task(s) to finish");
            } else {
                logger.log(Level.INFO, "shutting down: stopped polling; no task is running");
            }
            while (busy > 0) {
                try {
                    busyLock.wait();
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
        }
        // Heartbeats went on while tasks finished; they end before the session does.
        heartbeatStop.countDown();
        heartbeat.interrupt();
        joinQuietly(heartbeat);
        unregister();
        deadlines.shutdownNow();
        for (Thread t : pollers) {
            joinQuietly(t);
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }

    /** Begins shutdown: no new poll, and the open long polls end now. */
    private void requestStop() {
        synchronized (stateLock) {
            stopping = true;
        }
        stopSignal.countDown();
        synchronized (threadsLock) {
            for (Thread poller : polling) {
                poller.interrupt();
            }
        }
    }

    private static void joinQuietly(Thread t) {
        try {
            t.join(2000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static Thread daemon(String name, Runnable body) {
        Thread t = new Thread(body, name);
        t.setDaemon(true);
        t.start();
        return t;
    }

    boolean isStopping() {
        return stopping;
    }

    /** Waits up to {@code ms}; true when shutdown began (at once, or meanwhile). */
    boolean awaitStop(long ms) {
        try {
            return stopSignal.await(ms, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return stopping;
        }
    }

    Session session() {
        return session;
    }

    long pollWaitMs() {
        return pollWait.toMillis();
    }

    /**
     * Marks the calling thread as waiting for a task outside a poll (a result
     * that carries the next poll), so that shutdown ends the wait as it ends
     * a long poll; false, and nothing marked, once shutdown has begun.
     */
    boolean enterWait() {
        synchronized (threadsLock) {
            if (stopping) {
                return false;
            }
            polling.add(Thread.currentThread());
            return true;
        }
    }

    /** Ends what {@link #enterWait} began; an interrupt meant for the wait is dropped. */
    void leaveWait() {
        synchronized (threadsLock) {
            polling.remove(Thread.currentThread());
        }
        Thread.interrupted();
    }

    private void pollLoop(Reporter reporter, ScheduledExecutorService deadlines) {
        Backoff backoff = new Backoff(random);
        boolean lostSession = false;
        // A task the last result's answer brought (result-then-poll).
        JsonNode next = null;
        while (next != null || !stopping) {
            JsonNode task = next;
            next = null;
            if (task == null) {
                String sessionId = session.id();
                synchronized (threadsLock) {
                    if (stopping) {
                        return;
                    }
                    polling.add(Thread.currentThread());
                }
                try {
                    ObjectNode body = mapper.createObjectNode()
                            .put("worker_session_id", sessionId)
                            .put("wait_ms", pollWait.toMillis());
                    task = http.post(POLL, body);
                } catch (InterruptedException e) {
                    continue; // shutdown ended the long poll; the loop condition sees it
                } catch (ApiException e) {
                    if (stopping) {
                        return;
                    }
                    if (!Contact.isAway(e)) {
                        contact.answered();
                    }
                    if (e.isUnknownSession()) {
                        session.renew(sessionId);
                        // A runtime that forgets every new session must not be hammered.
                        if (lostSession) {
                            awaitStop(backoff.nextDelayMs());
                        }
                        lostSession = true;
                        continue;
                    }
                    long delay = backoff.nextDelayMs();
                    String line = "poll failed: " + e.getMessage() + "; retrying in " + seconds(delay);
                    if (Contact.isAway(e)) {
                        contact.failed(line);
                    } else {
                        logger.log(Level.WARNING, line);
                    }
                    awaitStop(delay);
                    continue;
                } finally {
                    synchronized (threadsLock) {
                        polling.remove(Thread.currentThread());
                    }
                    // An interrupt meant for the poll must not reach the task.
                    Thread.interrupted();
                }
                contact.answered();
                backoff.reset();
                lostSession = false;
                if (task == null || !task.hasNonNull("token")) {
                    continue;
                }
            }
            synchronized (busyLock) {
                if (stopping) {
                    logger.log(Level.INFO, "shutting down: not starting task " + task.path("task_name").asText()
                            + " that arrived; unregistering hands it back");
                    return;
                }
                busy++;
            }
            try {
                next = execute(reporter, deadlines, task);
            } catch (RuntimeException e) {
                logger.log(Level.ERROR, "could not process a task assignment: " + task, e);
            } finally {
                synchronized (busyLock) {
                    busy--;
                    busyLock.notifyAll();
                }
            }
        }
    }

    /** Runs and reports a task; the next task when the report's answer brought one. */
    private JsonNode execute(Reporter reporter, ScheduledExecutorService deadlines, JsonNode task) {
        TaskContext ctx = new TaskContext(task, logger);
        Registration entry = handlers.get(ctx.taskName());
        if (logger.isLoggable(Level.DEBUG)) {
            logger.log(Level.DEBUG, "executing " + ctx.taskName() + " " + ctx.identity()
                    + (ctx.redelivery() ? " (redelivery)" : ""));
        }
        inflight.put(ctx.token(), ctx);
        ScheduledFuture<?> deadline = null;
        if (ctx.deadlineMs().isPresent()) {
            long delay = ctx.deadlineMs().getAsLong() - System.currentTimeMillis();
            Runnable expire = () -> {
                if (ctx.cancel(true)) {
                    logger.log(Level.INFO, "deadline passed; cancelling " + ctx.taskName() + " " + ctx.identity());
                }
            };
            try {
                deadline = deadlines.schedule(expire, Math.max(0, delay), TimeUnit.MILLISECONDS);
            } catch (java.util.concurrent.RejectedExecutionException ignored) {
                // The worker is shutting down; the runtime still enforces the deadline.
            }
        }
        Outcome outcome;
        try {
            outcome = runHandler(entry, ctx);
        } finally {
            inflight.remove(ctx.token());
            if (deadline != null) {
                deadline.cancel(false);
            }
        }
        return reporter.deliver(ctx, outcome);
    }

    Outcome runHandler(Registration entry, TaskContext ctx) {
        if (entry == null) {
            return failure(ctx, "UNKNOWN_TASK", "this worker has no handler for task `" + ctx.taskName() + "`", true, null);
        }
        Object result;
        ctx.handlerStarted();
        try {
            result = entry.handler.handle(ctx.input(), ctx);
        } catch (TaskException e) {
            return failure(ctx, e.code(), e.errorMessage(), e.retryable(), e.details());
        } catch (InvalidInput e) {
            return failure(ctx, "INVALID_INPUT", e.getMessage(), false, null);
        } catch (Throwable e) {
            if (ctx.isCancelled() && isInterruption(e)) {
                return failure(ctx, "CANCELLED", ctx.cancelReason(), true, null);
            }
            logger.log(Level.ERROR, "handler raised an exception " + ctx.identity(), e);
            Map<String, Object> details = new LinkedHashMap<>();
            details.put("exception", e.getClass().getName());
            details.put("stack_trace", stackTrace(e));
            return failure(ctx, "UNHANDLED_EXCEPTION", e.toString(), true, details);
        } finally {
            ctx.handlerFinished();
        }
        JsonNode output;
        try {
            output = result == null ? mapper.createObjectNode() : mapper.valueToTree(result);
        } catch (IllegalArgumentException e) {
            return failure(ctx, "INVALID_RESULT", "the handler's result cannot be serialized: " + e.getMessage(), false, null);
        }
        if (output == null || output.isNull()) {
            output = mapper.createObjectNode();
        }
        if (!output.isObject()) {
            return failure(ctx, "INVALID_RESULT", "the handler returned " + result.getClass().getName()
                    + ", which is not a JSON object; a task result must be one", false, null);
        }
        ObjectNode body = mapper.createObjectNode().put("token", ctx.token());
        body.set("output", output);
        return new Outcome(COMPLETE, body, false);
    }

    private static boolean isInterruption(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof InterruptedException || t instanceof java.nio.channels.ClosedByInterruptException
                    || t instanceof java.io.InterruptedIOException) {
                return true;
            }
        }
        return false;
    }

    private static String stackTrace(Throwable e) {
        StringWriter out = new StringWriter();
        e.printStackTrace(new PrintWriter(out));
        List<String> lines = out.toString().lines().limit(STACK_FRAMES + 1L).toList();
        return String.join("\n", lines);
    }

    private Outcome failure(TaskContext ctx, String code, String message, boolean retryable, Object details) {
        logger.log(Level.INFO, "task failed with " + code + " " + ctx.identity());
        ObjectNode body = mapper.createObjectNode()
                .put("token", ctx.token())
                .put("error_code", code)
                .put("error_message", message == null ? "" : message)
                .put("retryable", retryable);
        if (details != null) {
            try {
                body.set("details", mapper.valueToTree(details));
            } catch (IllegalArgumentException e) {
                // Keep the failure reportable even when its details are not JSON.
                body.put("details", String.valueOf(details));
            }
        }
        return new Outcome(FAIL, body, false);
    }

    private void heartbeatLoop() {
        while (true) {
            try {
                if (heartbeatStop.await(session.heartbeatIntervalMs(), TimeUnit.MILLISECONDS)) {
                    return;
                }
            } catch (InterruptedException e) {
                return;
            }
            String sessionId = session.id();
            JsonNode answer;
            try {
                answer = http.post(HEARTBEAT, mapper.createObjectNode().put("worker_session_id", sessionId));
            } catch (InterruptedException e) {
                return;
            } catch (ApiException e) {
                if (Contact.isAway(e)) {
                    contact.failed("heartbeat failed: " + e.getMessage());
                    continue;
                }
                contact.answered();
                if (e.isUnknownSession()) {
                    session.renew(sessionId);
                } else {
                    logger.log(Level.WARNING, "heartbeat failed: " + e.getMessage());
                }
                continue;
            }
            contact.answered();
            if (answer != null && answer.path("cancel").isArray()) {
                for (JsonNode token : answer.path("cancel")) {
                    TaskContext ctx = inflight.get(token.asText());
                    if (ctx != null && ctx.cancel(false)) {
                        logger.log(Level.INFO, "cancellation requested for " + ctx.taskName() + " " + ctx.identity());
                    }
                }
            }
        }
    }

    private void unregister() {
        try {
            http.post(UNREGISTER, mapper.createObjectNode().put("worker_session_id", session.id()));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return;
        } catch (ApiException e) {
            // An unknown session holds no task, so there is nothing to hand back.
            if (!e.isUnknownSession()) {
                logger.log(Level.WARNING, "unregister failed: " + e.getMessage());
                return;
            }
        }
        logger.log(Level.INFO, "worker " + workerId + " unregistered");
    }

    static String seconds(long ms) {
        return String.format(java.util.Locale.ROOT, "%.1fs", ms / 1000.0);
    }

    /**
     * The current worker_session_id for every thread of the worker. After a
     * runtime restart every thread meets UNKNOWN_SESSION at about the same
     * time; renew() lets the first register again and the others pick up the
     * new session.
     */
    final class Session {
        private volatile String id;
        private volatile int heartbeatIntervalMs = DEFAULT_HEARTBEAT_MS;
        /** Whether the runtime offered result-then-poll at the last registration. */
        private volatile boolean resultThenPoll;

        String id() {
            return id;
        }

        int heartbeatIntervalMs() {
            return heartbeatIntervalMs;
        }

        boolean resultThenPoll() {
            return resultThenPoll;
        }

        synchronized boolean open() {
            return register(true);
        }

        synchronized void renew(String lostId) {
            if (!java.util.Objects.equals(id, lostId)) {
                return;
            }
            logger.log(Level.INFO, "worker session is unknown to the runtime; registering again");
            register(false);
        }

        private boolean register(boolean refusalsAreFatal) {
            ObjectNode announcement = mapper.createObjectNode()
                    .put("worker_id", workerId)
                    .put("runtime", runtime)
                    .put("sdk", USER_AGENT);
            ArrayNode contracts = announcement.putArray("contracts");
            handlers.forEach((name, entry) -> {
                ObjectNode contract = contracts.addObject().put("task_name", name).put("contract_version", entry.version);
                if (entry.contractHash != null) {
                    contract.put("contract_hash", entry.contractHash);
                }
                if (entry.document != null) {
                    contract.set("contract", entry.document);
                }
            });
            // The extensions this SDK can use; a runtime that knows none ignores the field.
            announcement.putArray("extensions").add(RESULT_THEN_POLL);
            Backoff backoff = new Backoff(random);
            while (!stopping) {
                JsonNode answer;
                try {
                    answer = http.post(REGISTER, announcement);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return false;
                } catch (ApiException e) {
                    if (refusalsAreFatal && !e.isTransient()) {
                        throw e;
                    }
                    // A refusal after a restart may be a configuration being
                    // fixed on the runtime's side, so it is waited out too.
                    long delay = backoff.nextDelayMs();
                    String line = e.getMessage() + "; retrying in " + seconds(delay);
                    if (Contact.isAway(e)) {
                        contact.failed(line);
                    } else {
                        contact.answered();
                        logger.log(Level.WARNING, line);
                    }
                    awaitStop(delay);
                    continue;
                }
                contact.answered();
                if (answer == null || !answer.hasNonNull("worker_session_id")) {
                    throw new ApiException(200, ApiException.HTTP_ERROR, "registration answer without a session id");
                }
                id = answer.get("worker_session_id").asText();
                int interval = answer.path("heartbeat_interval_ms").asInt(0);
                heartbeatIntervalMs = interval > 0 ? interval : DEFAULT_HEARTBEAT_MS;
                // Read anew each time: a runtime restarted with other settings may offer less.
                boolean offered = false;
                for (JsonNode name : answer.path("extensions")) {
                    offered |= RESULT_THEN_POLL.equals(name.asText());
                }
                resultThenPoll = offered;
                logger.log(Level.INFO, "worker " + workerId + " registered (" + handlers.size() + " tasks)");
                for (JsonNode warning : answer.path("warnings")) {
                    logger.log(Level.WARNING, "runtime: " + warning.asText());
                }
                return true;
            }
            return false;
        }
    }

    /** A registered handler; a typed contract's hash and document are announced with it. */
    record Registration(String version, RawTaskHandler handler, String contractHash, JsonNode document) {}

    /** The call that reports an attempt; {@code fallback} marks the SDK's stand-in failure. */
    record Outcome(String path, ObjectNode body, boolean fallback) {}

    /** Thrown inside a typed handler's wrapper when the input does not decode. */
    static final class InvalidInput extends RuntimeException {
        private static final long serialVersionUID = 1L;

        InvalidInput(String message) {
            super(message);
        }
    }

    private static String env(String name) {
        String value = System.getenv(name);
        return value == null || value.isEmpty() ? null : value;
    }

    private static Path envPath(String name) {
        String value = env(name);
        return value == null ? null : Path.of(value);
    }

    private static String emptyToNull(String value) {
        return value == null || value.isEmpty() ? null : value;
    }

    private static String firstNonEmpty(String a, String b, String fallback) {
        if (a != null && !a.isEmpty()) {
            return a;
        }
        if (b != null && !b.isEmpty()) {
            return b;
        }
        return fallback;
    }

    private static String defaultWorkerId() {
        String host = env("HOSTNAME");
        if (host == null) {
            try {
                host = InetAddress.getLocalHost().getHostName();
            } catch (Exception e) {
                host = "localhost";
            }
        }
        return "java-" + host + "-" + ProcessHandle.current().pid();
    }

    /** Options of a {@link Worker}; each unset one falls back to the environment, then its default. */
    public static final class Builder {
        private String workerId;
        private String server;
        private String token;
        private boolean tokenSet;
        private Path caCertFile;
        private Path clientCert;
        private Path clientKey;
        private SSLContext sslContext;
        private int concurrency = 4;
        private String runtime = "java";
        private Duration pollWait = Duration.ofSeconds(20);
        private Duration resultRetryTimeout = Duration.ofMinutes(10);
        private ObjectMapper mapper;
        private System.Logger logger;

        private Builder() {}

        /** The stable identity sent at registration (default {@code java-<host>-<pid>}). */
        public Builder workerId(String workerId) {
            this.workerId = emptyToNull(workerId);
            return this;
        }

        /** The runtime URL (default ORBIT_SERVER, then {@value Worker#DEFAULT_SERVER}). */
        public Builder server(String server) {
            this.server = emptyToNull(server);
            return this;
        }

        /** The bearer token (default ORBIT_WORKER_TOKEN, then ORBIT_TOKEN); "" sends none. */
        public Builder token(String token) {
            this.token = token;
            this.tokenSet = true;
            return this;
        }

        /** PEM CA certificates trusted beside the system's (default ORBIT_CA_CERT). */
        public Builder caCertFile(Path caCertFile) {
            this.caCertFile = caCertFile;
            return this;
        }

        /** The client certificate chain (leaf first) and PKCS#8 key for mutual TLS. */
        public Builder clientCert(Path certPem, Path keyPem) {
            this.clientCert = certPem;
            this.clientKey = keyPem;
            if ((certPem == null) != (keyPem == null)) {
                throw new IllegalArgumentException("clientCert needs both the certificate and the key");
            }
            return this;
        }

        /** A TLS context of your own; replaces the CA and client certificate options. */
        public Builder sslContext(SSLContext sslContext) {
            this.sslContext = sslContext;
            return this;
        }

        /** The number of poll threads, so of tasks run at once (default 4). */
        public Builder concurrency(int concurrency) {
            if (concurrency < 1) {
                throw new IllegalArgumentException("concurrency must be at least 1");
            }
            this.concurrency = concurrency;
            return this;
        }

        /** The announced runtime, matched against {@code using <language>} (default "java"). */
        public Builder runtime(String runtime) {
            if (runtime == null || runtime.isBlank()) {
                throw new IllegalArgumentException("runtime must not be blank");
            }
            this.runtime = runtime;
            return this;
        }

        /** The long poll's wait_ms (default 20 seconds; the runtime caps it at 60). */
        public Builder pollWait(Duration pollWait) {
            if (pollWait == null || pollWait.isNegative()) {
                throw new IllegalArgumentException("pollWait must not be negative");
            }
            this.pollWait = pollWait;
            return this;
        }

        /** How long a result is retried through outages (default 10 minutes). */
        public Builder resultRetryTimeout(Duration resultRetryTimeout) {
            if (resultRetryTimeout == null || resultRetryTimeout.isNegative()) {
                throw new IllegalArgumentException("resultRetryTimeout must not be negative");
            }
            this.resultRetryTimeout = resultRetryTimeout;
            return this;
        }

        /** The mapper for inputs and results (default: one that ignores unknown properties). */
        public Builder objectMapper(ObjectMapper mapper) {
            this.mapper = mapper;
            return this;
        }

        /** Where the SDK logs (default {@code System.getLogger("orbit")}). */
        public Builder logger(System.Logger logger) {
            this.logger = logger;
            return this;
        }

        /** Builds the worker. */
        public Worker build() {
            return new Worker(this);
        }
    }
}
