//! The worker: registration, one poll loop per OS thread, the heartbeat
//! thread that carries cancellations, result delivery, and shutdown.
//!
//! A run is scoped (`std::thread::scope`): `run()` registers, starts
//! `concurrency` poll threads and one heartbeat thread, and waits. `stop()`
//! sets a flag the poll loops check between polls; a handler that is running
//! finishes and its result is delivered, and the heartbeat thread keeps the
//! session alive until the last poll thread is done, then the worker
//! unregisters (which hands back tasks it was given but did not start).
//!
//! Delivery follows the same rules as the Python and Go SDKs: no answer, any
//! 5xx, 408 and 429 are waited out with jittered backoff until the runtime
//! answers, for up to ten minutes (the runtime reconciles results by token,
//! so a result held through an outage or a restart still counts). Tries are
//! not counted: a worker that gave up while it kept heartbeating would keep
//! the attempt to itself and the runtime would never redeliver it. Another
//! 4xx is a refusal: the result is replaced, once, by a non-retryable
//! `INVALID_RESULT` failure so the attempt does not hang until its timeout;
//! 401 and 403 get no such fallback, since it would be refused the same way.
//!
//! When the runtime offers the `result-then-poll` extension at registration
//! (docs/worker-protocol.md in the ORBIT repository), a report carries the
//! poll thread's next poll and its answer may bring the next task: one
//! request per task instead of two. The report's rules stay: a refused
//! report took no task, an answer without a task sends the thread back to
//! its own poll (which meets a lost session as usual), and a report made
//! once `stop()` was called carries no poll.

use std::collections::{BTreeMap, HashMap};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

use crate::backoff::Backoff;
use crate::contact::Contact;
use crate::context::{Assignment, Context};
use crate::error::{ApiError, TaskError};
use crate::transport::{self, clip, Client, TlsMaterial, CALL_TIMEOUT};

const DEFAULT_SERVER: &str = "http://127.0.0.1:7233";
const DEFAULT_CONCURRENCY: usize = 4;
const DEFAULT_POLL_WAIT: Duration = Duration::from_secs(20);
const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(5);
const RESULT_RETRY_WINDOW: Duration = Duration::from_secs(600);

macro_rules! say {
    ($($arg:tt)*) => { eprintln!("[orbit] {}", format!($($arg)*)) };
}

type Handler = Arc<dyn Fn(&Assignment, &Context) -> Result<Value, TaskError> + Send + Sync>;

struct Registered {
    version: String,
    handler: Handler,
    /// Set by [`Worker::contract_hash`]: the hash (and document) of the
    /// contract the handler's types were generated from.
    contract: Option<(String, Option<Value>)>,
}

struct Settings {
    worker_id: String,
    server: String,
    token: Option<String>,
    tls: TlsMaterial,
    concurrency: usize,
    runtime: String,
    poll_wait: Duration,
}

/// A flag with a condition variable, so sleepers wake as soon as it is set.
#[derive(Default)]
struct Signal {
    set: Mutex<bool>,
    changed: Condvar,
}

impl Signal {
    fn raise(&self) {
        *self.set.lock().unwrap() = true;
        self.changed.notify_all();
    }

    fn lower(&self) {
        *self.set.lock().unwrap() = false;
    }

    fn is_raised(&self) -> bool {
        *self.set.lock().unwrap()
    }

    /// Sleeps for `d` unless the flag is or gets raised; true if it was.
    fn wait(&self, d: Duration) -> bool {
        let guard = self.set.lock().unwrap();
        let (guard, _) = self
            .changed
            .wait_timeout_while(guard, d, |raised| !*raised)
            .unwrap();
        *guard
    }
}

struct Shared {
    settings: Settings,
    handlers: RwLock<BTreeMap<String, Registered>>,
    stopping: Signal,
    running: AtomicBool,
}

/// A worker process's connection to the runtime, serving the tasks
/// registered with [`Worker::task`].
///
/// Clones share one worker, so a clone can call [`Worker::stop`] from
/// another thread or a signal handler while [`Worker::run`] blocks.
#[derive(Clone)]
pub struct Worker {
    shared: Arc<Shared>,
}

/// Settings for a [`Worker`], read from the environment by
/// [`Worker::builder`] and overridden by its methods.
pub struct WorkerBuilder {
    settings: Settings,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

impl WorkerBuilder {
    /// The runtime's URL (default: `ORBIT_SERVER`, then
    /// `http://127.0.0.1:7233`).
    pub fn server(mut self, url: &str) -> Self {
        self.settings.server = url.to_owned();
        self
    }

    /// The bearer token sent with every call (default: `ORBIT_WORKER_TOKEN`,
    /// then `ORBIT_TOKEN`).
    pub fn token(mut self, token: &str) -> Self {
        self.settings.token = Some(token.to_owned());
        self
    }

    /// PEM CA certificates; when set they are the only roots trusted
    /// (default: the file named by `ORBIT_CA_CERT`, else the system roots).
    pub fn ca_pem(mut self, pem: Vec<u8>) -> Self {
        self.settings.tls.ca_pem = Some(pem);
        self
    }

    /// The certificate chain and private key (both PEM) presented for mutual
    /// TLS (default: the files named by `ORBIT_CLIENT_CERT` and
    /// `ORBIT_CLIENT_KEY`, when both are set).
    pub fn client_identity(mut self, cert_pem: Vec<u8>, key_pem: Vec<u8>) -> Self {
        self.settings.tls.identity = Some((cert_pem, key_pem));
        self
    }

    /// The number of poll threads, which bounds how many tasks run at once
    /// (default 4; 0 becomes 1).
    pub fn concurrency(mut self, n: usize) -> Self {
        self.settings.concurrency = n.max(1);
        self
    }

    /// The runtime name announced at registration, matched against a step's
    /// `using <language>` (default `"rust"`).
    pub fn runtime(mut self, runtime: &str) -> Self {
        self.settings.runtime = runtime.to_owned();
        self
    }

    /// How long each long poll waits for a task (default 20 seconds; the
    /// runtime caps it at 60). It also bounds how long [`Worker::stop`] can
    /// take to return from [`Worker::run`].
    pub fn poll_wait(mut self, d: Duration) -> Self {
        self.settings.poll_wait = d;
        self
    }

    /// Builds the worker.
    pub fn build(self) -> Worker {
        Worker {
            shared: Arc::new(Shared {
                settings: self.settings,
                handlers: RwLock::new(BTreeMap::new()),
                stopping: Signal::default(),
                running: AtomicBool::new(false),
            }),
        }
    }
}

impl Worker {
    /// Starts a builder for a worker registering as `worker_id`, with
    /// defaults taken from the environment (`ORBIT_SERVER`,
    /// `ORBIT_WORKER_TOKEN` or `ORBIT_TOKEN`, `ORBIT_CA_CERT`,
    /// `ORBIT_CLIENT_CERT` and `ORBIT_CLIENT_KEY`). TLS files that cannot be
    /// read are ignored; read them yourself to see the error.
    pub fn builder(worker_id: &str) -> WorkerBuilder {
        let read = |name: &str| env(name).and_then(|path| std::fs::read(path).ok());
        let identity = match (read("ORBIT_CLIENT_CERT"), read("ORBIT_CLIENT_KEY")) {
            (Some(cert), Some(key)) => Some((cert, key)),
            _ => None,
        };
        WorkerBuilder {
            settings: Settings {
                worker_id: worker_id.to_owned(),
                server: env("ORBIT_SERVER").unwrap_or_else(|| DEFAULT_SERVER.to_owned()),
                token: env("ORBIT_WORKER_TOKEN").or_else(|| env("ORBIT_TOKEN")),
                tls: TlsMaterial {
                    ca_pem: read("ORBIT_CA_CERT"),
                    identity,
                },
                concurrency: DEFAULT_CONCURRENCY,
                runtime: "rust".to_owned(),
                poll_wait: DEFAULT_POLL_WAIT,
            },
        }
    }

    /// Registers `handler` for the task `name` at contract version
    /// `version`, which must match the task's declaration exactly.
    ///
    /// The input is deserialized into `I` (use `serde_json::Value` for the
    /// raw input); input that does not fit fails the attempt with the
    /// permanent error `INVALID_INPUT`. The output must serialize to a JSON
    /// object (`null`, as from `()`, reports `{}`); anything else fails the
    /// attempt with the permanent error `INVALID_RESULT`. Several poll
    /// threads may call the handler at once.
    ///
    /// # Panics
    ///
    /// When `name` is already registered.
    pub fn task<I, O, F>(&mut self, name: &str, version: &str, handler: F) -> &mut Self
    where
        I: DeserializeOwned,
        O: Serialize,
        F: Fn(I, &Context) -> Result<O, TaskError> + Send + Sync + 'static,
    {
        let wrapped = move |assignment: &Assignment, ctx: &Context| {
            let input: I = serde_json::from_value(assignment.input.clone()).map_err(|e| {
                TaskError::permanent(
                    "INVALID_INPUT",
                    format!("cannot decode the input of {}: {e}", assignment.task_name),
                )
            })?;
            let output = handler(input, ctx)?;
            match serde_json::to_value(output) {
                Ok(Value::Null) => Ok(json!({})),
                Ok(object @ Value::Object(_)) => Ok(object),
                Ok(other) => Err(TaskError::permanent(
                    "INVALID_RESULT",
                    format!(
                        "a task's output must be a JSON object; the handler returned {}",
                        clip(&other.to_string())
                    ),
                )),
                Err(e) => Err(TaskError::permanent(
                    "INVALID_RESULT",
                    format!("the handler's output cannot be serialized: {e}"),
                )),
            }
        };
        let mut handlers = self.shared.handlers.write().unwrap();
        if handlers.contains_key(name) {
            drop(handlers); // so the panic does not poison the lock
            panic!("orbit: task {name:?} is already registered");
        }
        handlers.insert(
            name.to_owned(),
            Registered {
                version: version.to_owned(),
                handler: Arc::new(wrapped),
                contract: None,
            },
        );
        drop(handlers);
        self
    }

    /// Announces, for the task `name` registered with [`Worker::task`], the
    /// hash of the contract its types were generated from by `orbit codegen`
    /// (`<T as Task>::CONTRACT_HASH`) and that contract's JSON document
    /// (`<T as Task>::CONTRACT`). A runtime whose deployed contract of that
    /// task and version differs refuses the registration with
    /// `CONTRACT_MISMATCH`, naming the first field that differs.
    ///
    /// # Panics
    ///
    /// When `name` is not registered.
    pub fn contract_hash(&mut self, name: &str, contract_hash: &str, contract: &str) -> &mut Self {
        let mut handlers = self.shared.handlers.write().unwrap();
        let Some(registered) = handlers.get_mut(name) else {
            drop(handlers); // so the panic does not poison the lock
            panic!("orbit: task {name:?} is not registered");
        };
        let document = serde_json::from_str(contract).ok();
        registered.contract = Some((contract_hash.to_owned(), document));
        drop(handlers);
        self
    }

    /// Registers, polls and blocks until [`Worker::stop`] is called, then
    /// lets running handlers finish and deliver, unregisters and returns
    /// `Ok(())`.
    ///
    /// Returns an error with code `NO_TASKS` when no task is registered,
    /// `ALREADY_RUNNING` when this worker (or a clone) is already running,
    /// and the runtime's refusal when it refuses the registration. An
    /// unreachable runtime and 5xx answers are retried.
    pub fn run(&self) -> Result<(), ApiError> {
        if self.shared.handlers.read().unwrap().is_empty() {
            return Err(ApiError::new(
                0,
                "NO_TASKS",
                "no task is registered; call task() before run()",
            ));
        }
        if self.shared.running.swap(true, Ordering::SeqCst) {
            return Err(ApiError::new(
                0,
                "ALREADY_RUNNING",
                "this worker is already running",
            ));
        }
        let result = self.run_registered();
        self.shared.stopping.lower();
        self.shared.running.store(false, Ordering::SeqCst);
        result
    }

    /// Asks [`Worker::run`] to return: polling stops, running handlers
    /// finish and deliver their results, and the worker unregisters. A long
    /// poll already waiting is not interrupted.
    pub fn stop(&self) {
        self.shared.stopping.raise();
    }

    fn run_registered(&self) -> Result<(), ApiError> {
        let s = &self.shared.settings;
        let client = Client::new(&s.server, s.token.as_deref(), &s.tls, s.concurrency + 2)?;
        let run = Run {
            shared: &self.shared,
            client,
            announcement: self.announcement(),
            session: Mutex::new(Session::default()),
            inflight: Mutex::new(HashMap::new()),
            polls_done: Signal::default(),
            contact: Contact::new(),
        };
        if !run.register_first()? {
            return Ok(()); // stopped before the runtime could be reached
        }
        std::thread::scope(|scope| {
            let beats = std::thread::Builder::new()
                .name("orbit-heartbeat".to_owned())
                .spawn_scoped(scope, || run.heartbeat_loop())
                .expect("cannot start the heartbeat thread");
            let polls: Vec<_> = (0..s.concurrency)
                .map(|i| {
                    std::thread::Builder::new()
                        .name(format!("orbit-poll-{i}"))
                        .spawn_scoped(scope, || run.poll_loop())
                        .expect("cannot start a poll thread")
                })
                .collect();
            for poll in polls {
                let _ = poll.join();
            }
            run.polls_done.raise();
            let _ = beats.join();
        });
        run.unregister();
        Ok(())
    }

    fn announcement(&self) -> Value {
        let handlers = self.shared.handlers.read().unwrap();
        let contracts: Vec<Value> = handlers
            .iter()
            .map(|(name, r)| {
                let mut entry = json!({"task_name": name, "contract_version": r.version});
                if let Some((hash, document)) = &r.contract {
                    entry["contract_hash"] = json!(hash);
                    if let Some(document) = document {
                        entry["contract"] = document.clone();
                    }
                }
                entry
            })
            .collect();
        json!({
            "worker_id": self.shared.settings.worker_id,
            "runtime": self.shared.settings.runtime,
            "sdk": format!("orbit-rust/{}", crate::VERSION),
            "contracts": contracts,
            // The extensions this SDK can use; a runtime that knows none
            // ignores the field.
            "extensions": [RESULT_THEN_POLL],
        })
    }
}

/// The runtime's worker protocol extension that lets a result carry the next poll.
const RESULT_THEN_POLL: &str = "result-then-poll";

#[derive(Default)]
struct Session {
    id: String,
    heartbeat: Option<Duration>,
    /// Whether the runtime offered result-then-poll at the last registration.
    result_then_poll: bool,
}

struct Run<'a> {
    shared: &'a Shared,
    client: Client,
    announcement: Value,
    /// Held while registering, so that after a runtime restart one thread
    /// registers again and the others pick up its session.
    session: Mutex<Session>,
    inflight: Mutex<HashMap<String, Arc<AtomicBool>>>,
    polls_done: Signal,
    /// Quiets the polls', heartbeat's and registration's lines while the
    /// runtime is away (contact.rs).
    contact: Contact,
}

enum Register {
    Done,
    Refused(ApiError),
    Stopped,
}

impl Run<'_> {
    fn stopping(&self) -> bool {
        self.shared.stopping.is_raised()
    }

    fn session_id(&self) -> String {
        self.session.lock().unwrap().id.clone()
    }

    /// The first registration: a refusal is returned, an outage waited out.
    /// `Ok(false)` when stop() came first.
    fn register_first(&self) -> Result<bool, ApiError> {
        let mut session = self.session.lock().unwrap();
        match self.register(&mut session, true) {
            Register::Done => Ok(true),
            Register::Refused(e) => Err(e),
            Register::Stopped => Ok(false),
        }
    }

    /// Registers again unless another thread already replaced `lost`.
    fn renew(&self, lost: &str) {
        let mut session = self.session.lock().unwrap();
        if session.id != lost {
            return;
        }
        say!("worker session is unknown to the runtime; registering again");
        self.register(&mut session, false);
    }

    fn register(&self, session: &mut Session, refusals_are_fatal: bool) -> Register {
        let mut backoff = Backoff::new();
        loop {
            match self
                .client
                .post(transport::REGISTER, &self.announcement, CALL_TIMEOUT)
            {
                Ok(answer) => {
                    self.contact.answered();
                    let answer = answer.unwrap_or(Value::Null);
                    session.id = answer["worker_session_id"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned();
                    session.heartbeat = answer["heartbeat_interval_ms"]
                        .as_u64()
                        .filter(|ms| *ms > 0)
                        .map(Duration::from_millis);
                    // Read anew each time: a runtime restarted with other
                    // settings may offer less.
                    session.result_then_poll = answer["extensions"]
                        .as_array()
                        .is_some_and(|names| names.iter().any(|n| n == RESULT_THEN_POLL));
                    let tasks = self.announcement["contracts"]
                        .as_array()
                        .map_or(0, Vec::len);
                    say!(
                        "worker {} registered ({tasks} tasks)",
                        self.shared.settings.worker_id
                    );
                    for warning in answer["warnings"].as_array().into_iter().flatten() {
                        say!("runtime: {}", warning.as_str().unwrap_or_default());
                    }
                    return Register::Done;
                }
                // A refusal after a restart may be a configuration being
                // fixed on the runtime's side, so once running it is retried
                // like an outage.
                Err(e) if refusals_are_fatal && !e.transient() => return Register::Refused(e),
                Err(e) => {
                    let delay = backoff.next();
                    let line = format!("registration failed: {e}; retrying in {delay:?}");
                    if e.unavailable() {
                        self.contact.failed(&line);
                    } else {
                        self.contact.answered();
                        say!("{line}");
                    }
                    if self.shared.stopping.wait(delay) {
                        return Register::Stopped;
                    }
                }
            }
        }
    }

    fn poll_loop(&self) {
        let wait = self.shared.settings.poll_wait;
        let body_wait = wait.as_millis() as u64;
        let mut backoff = Backoff::new();
        let mut lost_session = false;
        // A task the last result's answer brought (result-then-poll).
        let mut next: Option<Value> = None;
        while !self.stopping() || next.is_some() {
            let message = match next.take() {
                Some(message) => message,
                None => {
                    let id = self.session_id();
                    let body = json!({"worker_session_id": id, "wait_ms": body_wait});
                    match self
                        .client
                        .post(transport::POLL, &body, wait + CALL_TIMEOUT)
                    {
                        Err(e) if e.unknown_session() => {
                            self.contact.answered();
                            self.renew(&id);
                            if lost_session && self.shared.stopping.wait(backoff.next()) {
                                break;
                            }
                            lost_session = true;
                            continue;
                        }
                        Err(e) => {
                            if self.stopping() {
                                break;
                            }
                            let delay = backoff.next();
                            let line = format!("poll failed: {e}; retrying in {delay:?}");
                            if e.unavailable() {
                                self.contact.failed(&line);
                            } else {
                                self.contact.answered();
                                say!("{line}");
                            }
                            self.shared.stopping.wait(delay);
                            continue;
                        }
                        Ok(None) => {
                            self.contact.answered();
                            backoff.reset();
                            lost_session = false;
                            continue;
                        }
                        Ok(Some(message)) => {
                            self.contact.answered();
                            backoff.reset();
                            lost_session = false;
                            message
                        }
                    }
                }
            };
            let assignment: Assignment = match serde_json::from_value(message) {
                Ok(a) => a,
                Err(e) => {
                    say!("ignoring a task message that cannot be read: {e}");
                    continue;
                }
            };
            if self.stopping() {
                say!(
                    "shutting down: not starting {}; unregistering hands it back",
                    describe(&assignment)
                );
                break;
            }
            next = self.execute(assignment);
        }
    }

    /// Runs and reports a task; the next task when the report's answer
    /// brought one (result-then-poll).
    fn execute(&self, assignment: Assignment) -> Option<Value> {
        let assignment = Arc::new(assignment);
        let cancelled = Arc::new(AtomicBool::new(false));
        self.inflight
            .lock()
            .unwrap()
            .insert(assignment.token.clone(), cancelled.clone());
        let handler = {
            let handlers = self.shared.handlers.read().unwrap();
            handlers
                .get(&assignment.task_name)
                .filter(|r| r.version == assignment.contract_version)
                .map(|r| r.handler.clone())
        };
        let ctx = Context::new(assignment.clone(), cancelled);
        let outcome = match handler {
            Some(handler) => call(&handler, &assignment, &ctx),
            None => Err(TaskError::retryable(
                "UNKNOWN_TASK",
                format!(
                    "this worker does not serve {}@{}",
                    assignment.task_name, assignment.contract_version
                ),
            )),
        };
        self.inflight.lock().unwrap().remove(&assignment.token);
        self.deliver(&assignment, outcome)
    }

    fn heartbeat_loop(&self) {
        loop {
            let interval = self
                .session
                .lock()
                .unwrap()
                .heartbeat
                .unwrap_or(DEFAULT_HEARTBEAT);
            if self.polls_done.wait(interval) {
                return;
            }
            let id = self.session_id();
            let body = json!({"worker_session_id": id});
            match self.client.post(transport::HEARTBEAT, &body, CALL_TIMEOUT) {
                Ok(answer) => {
                    self.contact.answered();
                    let answer = answer.unwrap_or(Value::Null);
                    for token in answer["cancel"].as_array().into_iter().flatten() {
                        if let Some(token) = token.as_str() {
                            self.cancel(token);
                        }
                    }
                }
                Err(e) if e.unavailable() => self.contact.failed(&format!("heartbeat failed: {e}")),
                Err(e) if e.unknown_session() => {
                    self.contact.answered();
                    self.renew(&id);
                }
                Err(e) => {
                    self.contact.answered();
                    say!("heartbeat failed: {e}");
                }
            }
        }
    }

    fn cancel(&self, token: &str) {
        if let Some(flag) = self.inflight.lock().unwrap().get(token) {
            if !flag.swap(true, Ordering::SeqCst) {
                say!("the runtime cancelled the attempt of token {token}");
            }
        }
    }

    fn unregister(&self) {
        let body = json!({"worker_session_id": self.session_id()});
        match self.client.post(transport::UNREGISTER, &body, CALL_TIMEOUT) {
            Ok(_) => {}
            Err(e) if e.unknown_session() => {}
            Err(e) => {
                say!("unregister failed: {e}");
                return;
            }
        }
        say!("worker {} unregistered", self.shared.settings.worker_id);
    }

    /// Reports `outcome`; if the runtime refuses it, reports a failure
    /// instead (see the module documentation). Returns the next task when
    /// an answer brought one.
    fn deliver(&self, a: &Assignment, outcome: Result<Value, TaskError>) -> Option<Value> {
        let report = Report::of(&a.token, outcome);
        let refusal = match self.send(a, &report) {
            Ok(next) => return next,
            Err(refusal) => refusal,
        };
        let refusal = match fallback(&a.token, &report, &refusal) {
            Some(fb) => {
                say!(
                    "result for {} refused: {refusal}; reporting the attempt as failed",
                    describe(a)
                );
                match self.send(a, &fb) {
                    Ok(next) => return next,
                    Err(refusal) => refusal,
                }
            }
            None => refusal,
        };
        say!("result for {} refused: {refusal}", describe(a));
        None
    }

    /// The report's body with the next poll, when the runtime offers
    /// result-then-poll and the worker is not stopping.
    fn with_poll(&self, report: &Report) -> Option<Value> {
        let session = self.session.lock().unwrap();
        if !session.result_then_poll || self.stopping() {
            return None;
        }
        let mut body = report.body.clone();
        let wait = self.shared.settings.poll_wait.as_millis() as u64;
        body["poll"] = json!({"worker_session_id": session.id, "wait_ms": wait});
        Some(body)
    }

    /// Posts until answered: the next task the answer brought (once
    /// answered or given up), or the refusal.
    fn send(&self, a: &Assignment, report: &Report) -> Result<Option<Value>, ApiError> {
        let mut backoff = Backoff::new();
        let give_up_at = Instant::now() + RESULT_RETRY_WINDOW;
        // Its own contact: one execution's result failing to store must not
        // read as the runtime coming and going for the polls.
        let what = describe(a);
        let quiet = Contact::with_back(move |away| {
            format!(
                "result for {what} delivered after {:.1}s of retries",
                away.as_secs_f64()
            )
        });
        loop {
            let sent = match self.with_poll(report) {
                Some(body) => {
                    let timeout = self.shared.settings.poll_wait + CALL_TIMEOUT;
                    self.client.post(report.path, &body, timeout)
                }
                None => self.client.post(report.path, &report.body, CALL_TIMEOUT),
            };
            let e = match sent {
                Ok(answer) => {
                    quiet.answered();
                    let mut answer = answer.unwrap_or(Value::Null);
                    if answer["accepted"] == Value::Bool(false) {
                        say!(
                            "result for {} not accepted: {}",
                            describe(a),
                            answer["reason"].as_str().unwrap_or("no reason given")
                        );
                    }
                    let next = answer.get_mut("task").map(Value::take);
                    return Ok(next.filter(Value::is_object));
                }
                Err(e) => e,
            };
            if !e.unavailable() {
                quiet.answered();
                return Err(e);
            }
            let delay = backoff.next();
            if Instant::now() + delay > give_up_at {
                say!(
                    "result for {} not delivered after {RESULT_RETRY_WINDOW:?} of retries: {e}",
                    describe(a)
                );
                return Ok(None);
            }
            quiet.failed(&format!(
                "cannot deliver the result for {}: {e}; retrying in {delay:?}",
                describe(a)
            ));
            std::thread::sleep(delay);
        }
    }
}

/// Calls a handler, turning a panic into a retryable `PANIC` error.
fn call(handler: &Handler, a: &Assignment, ctx: &Context) -> Result<Value, TaskError> {
    catch_unwind(AssertUnwindSafe(|| handler(a, ctx))).unwrap_or_else(|payload| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "the handler panicked".to_owned());
        Err(TaskError::retryable("PANIC", message))
    })
}

fn describe(a: &Assignment) -> String {
    format!(
        "execution={} step={} attempt={} task={}",
        a.execution_id, a.step_id, a.attempt, a.task_name
    )
}

/// One result report: the path it goes to and its body.
struct Report {
    path: &'static str,
    body: Value,
    fallback: bool,
}

impl Report {
    fn of(token: &str, outcome: Result<Value, TaskError>) -> Report {
        match outcome {
            Ok(output) => Report {
                path: transport::COMPLETE,
                body: json!({"token": token, "output": output}),
                fallback: false,
            },
            Err(e) => Report::failed(token, &e),
        }
    }

    fn failed(token: &str, e: &TaskError) -> Report {
        let mut body = json!({
            "token": token,
            "error_code": e.code,
            "error_message": e.message,
            "retryable": e.retryable,
        });
        if let Some(details) = &e.details {
            body["details"] = (**details).clone();
        }
        Report {
            path: transport::FAIL,
            body,
            fallback: false,
        }
    }
}

fn fallback(token: &str, refused: &Report, e: &ApiError) -> Option<Report> {
    if e.status == 401 || e.status == 403 || refused.fallback {
        return None;
    }
    let mut details = json!({
        "refused": "complete", "status": e.status, "code": e.code, "message": clip(&e.message),
    });
    if refused.path == transport::FAIL {
        details["refused"] = json!("fail");
        details["error_code"] = refused.body["error_code"].clone();
    }
    let error = TaskError::permanent(
        "INVALID_RESULT",
        format!(
            "the runtime refused the task's result: {}",
            clip(&e.to_string())
        ),
    );
    let mut report = Report::failed(token, &error.with_details(details));
    report.fallback = true;
    Some(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::tests::assignment;

    fn handler_of(worker: &Worker, name: &str) -> Handler {
        worker.shared.handlers.read().unwrap()[name].handler.clone()
    }

    fn invoke(worker: &Worker, name: &str, input: Value) -> Result<Value, TaskError> {
        let a = Arc::new(assignment(input));
        let ctx = Context::new(a.clone(), Arc::default());
        call(&handler_of(worker, name), &a, &ctx)
    }

    #[derive(serde::Deserialize)]
    struct In {
        n: i64,
    }

    fn worker() -> Worker {
        let mut w = Worker::builder("w").server("http://127.0.0.1:1").build();
        w.task("double", "1.0.0", |i: In, _ctx| Ok(json!({"n": i.n * 2})))
            .task("unit", "1.0.0", |_: Value, _ctx| Ok(()))
            .task("scalar", "1.0.0", |_: Value, _ctx| Ok(5))
            .task("boom", "1.0.0", |_: Value, _ctx| -> Result<(), TaskError> {
                panic!("kaput")
            })
            .task("attempt", "1.0.0", |_: Value, ctx| {
                Ok(json!({"attempt": ctx.attempt(), "step": ctx.step_id()}))
            });
        w
    }

    #[test]
    fn typed_handlers_decode_and_encode() {
        let w = worker();
        assert_eq!(invoke(&w, "double", json!({"n": 21})), Ok(json!({"n": 42})));
        assert_eq!(
            invoke(&w, "attempt", json!({})),
            Ok(json!({"attempt": 2, "step": "s1"}))
        );
    }

    #[test]
    fn input_that_does_not_fit_is_a_permanent_invalid_input() {
        let err = invoke(&worker(), "double", json!({"n": "x"})).unwrap_err();
        assert_eq!(err.code, "INVALID_INPUT");
        assert!(!err.retryable);
    }

    #[test]
    fn null_output_reports_an_empty_object_and_scalars_are_refused() {
        let w = worker();
        assert_eq!(invoke(&w, "unit", json!({})), Ok(json!({})));
        let err = invoke(&w, "scalar", json!({})).unwrap_err();
        assert_eq!(
            (err.code.as_str(), err.retryable),
            ("INVALID_RESULT", false)
        );
    }

    #[test]
    fn a_panic_is_a_retryable_panic_error_with_its_payload() {
        let err = invoke(&worker(), "boom", json!({})).unwrap_err();
        assert_eq!(err, TaskError::retryable("PANIC", "kaput"));
    }

    #[test]
    #[should_panic(expected = "already registered")]
    fn registering_a_name_twice_panics() {
        let mut w = worker();
        w.task("double", "2.0.0", |_: Value, _ctx| Ok(()));
    }

    #[test]
    fn run_without_tasks_is_refused() {
        let w = Worker::builder("w").server("http://127.0.0.1:1").build();
        assert_eq!(w.run().unwrap_err().code, "NO_TASKS");
    }

    #[test]
    fn announcement_lists_contracts_in_order() {
        let a = worker().announcement();
        assert_eq!(a["runtime"], "rust");
        assert_eq!(
            a["contracts"][0],
            json!({"task_name": "attempt", "contract_version": "1.0.0"})
        );
        assert!(a["sdk"].as_str().unwrap().starts_with("orbit-rust/"));
    }

    #[test]
    fn a_contract_hash_is_announced_with_its_task() {
        let mut w = worker();
        let hash = format!("sha256:{}", "ab".repeat(32));
        w.contract_hash("attempt", &hash, r#"{"name":"attempt"}"#);
        let a = w.announcement();
        assert_eq!(
            a["contracts"][0],
            json!({"task_name": "attempt", "contract_version": "1.0.0",
                   "contract_hash": hash, "contract": {"name": "attempt"}})
        );
    }

    #[test]
    fn concurrency_below_one_becomes_one() {
        let w = Worker::builder("w").concurrency(0).build();
        assert_eq!(w.shared.settings.concurrency, 1);
    }

    #[test]
    fn fallbacks_follow_the_refusal() {
        let done = Report::of("t", Ok(json!({})));
        let fb = fallback("t", &done, &ApiError::new(422, "BAD", "no")).unwrap();
        assert_eq!(fb.body["error_code"], "INVALID_RESULT");
        assert_eq!(fb.body["retryable"], false);
        assert!(fallback("t", &fb, &ApiError::new(422, "BAD", "no")).is_none());
        assert!(fallback("t", &done, &ApiError::new(403, "FORBIDDEN", "no")).is_none());
    }
}
