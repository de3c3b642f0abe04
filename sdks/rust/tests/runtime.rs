//! The worker against a scripted runtime: a small HTTP/1.1 server on a
//! loopback port whose answers each test chooses, and which records every
//! call. Covers the protocol paths the unit tests cannot: registration,
//! polling, cancellation through heartbeats, delivery through an outage,
//! session loss, refused results and shutdown.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use orbit_worker::{TaskError, Worker};
use serde_json::{json, Value};

type Script = dyn Fn(&str, &Value, usize) -> (u16, Value) + Send + Sync;

/// A scripted runtime: `script(path, body, n)` answers the n-th call (from
/// 0) to `path`; a `Value::Null` answer is sent as 204.
struct Runtime {
    url: String,
    calls: Arc<Mutex<Vec<(String, Value)>>>,
}

impl Runtime {
    fn start(
        script: impl Fn(&str, &Value, usize) -> (u16, Value) + Send + Sync + 'static,
    ) -> Runtime {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let calls = Arc::new(Mutex::new(Vec::new()));
        let script: Arc<Script> = Arc::new(script);
        let recorded = calls.clone();
        thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (script, recorded) = (script.clone(), recorded.clone());
                thread::spawn(move || serve(stream, &*script, &recorded));
            }
        });
        Runtime { url, calls }
    }

    fn calls(&self, path: &str) -> Vec<Value> {
        let calls = self.calls.lock().unwrap();
        calls
            .iter()
            .filter(|(p, _)| p == path)
            .map(|(_, b)| b.clone())
            .collect()
    }

    fn wait_for(&self, path: &str, count: usize) -> Vec<Value> {
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let calls = self.calls(path);
            if calls.len() >= count {
                return calls;
            }
            assert!(
                Instant::now() < until,
                "no {count} calls to {path}: {calls:?}"
            );
            thread::sleep(Duration::from_millis(5));
        }
    }
}

fn serve(stream: TcpStream, script: &Script, recorded: &Mutex<Vec<(String, Value)>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut out = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let path = request_line
            .split_whitespace()
            .nth(1)
            .unwrap_or("")
            .to_owned();
        let mut length = 0;
        loop {
            let mut header = String::new();
            reader.read_line(&mut header).unwrap();
            if header.trim().is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap();
                }
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let n = {
            let mut calls = recorded.lock().unwrap();
            let n = calls.iter().filter(|(p, _)| *p == path).count();
            calls.push((path.clone(), body.clone()));
            n
        };
        let (status, answer) = script(&path, &body, n);
        let text = if answer.is_null() {
            String::new()
        } else {
            answer.to_string()
        };
        let status = if answer.is_null() && status == 200 {
            204
        } else {
            status
        };
        let head = format!(
            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            text.len()
        );
        if out
            .write_all(head.as_bytes())
            .and_then(|_| out.write_all(text.as_bytes()))
            .is_err()
        {
            return;
        }
    }
}

fn task(token: &str, name: &str) -> Value {
    json!({
        "token": token, "execution_id": "e1", "workflow": "W", "workflow_version": "1.0.0",
        "step_id": "s1", "task_name": name, "contract_version": "1.0.0",
        "input": {"n": 2}, "idempotency_key": "k", "attempt": 1, "redelivery": false,
    })
}

/// Answers shared by every script: registration, heartbeats, unregister,
/// and an idle long poll that waits a little, as a real one would.
fn basics(path: &str) -> (u16, Value) {
    match path {
        "/v1/workers/register" => (
            200,
            json!({"worker_session_id": "S1", "heartbeat_interval_ms": 20, "warnings": []}),
        ),
        "/v1/workers/poll" => {
            thread::sleep(Duration::from_millis(20));
            (200, Value::Null)
        }
        _ => (200, json!({"accepted": true, "cancel": []})),
    }
}

fn worker(runtime: &Runtime) -> Worker {
    let mut worker = Worker::builder("w1")
        .server(&runtime.url)
        .concurrency(1)
        .poll_wait(Duration::from_millis(50))
        .build();
    worker
        .task("double", "1.0.0", |input: Value, _ctx| {
            Ok(json!({"n": input["n"].as_i64().unwrap() * 2}))
        })
        .task("wait", "1.0.0", |_: Value, ctx| {
            let until = Instant::now() + Duration::from_secs(10);
            while !ctx.is_cancelled() && Instant::now() < until {
                thread::sleep(Duration::from_millis(5));
            }
            Err::<(), _>(TaskError::permanent("CANCELLED", "stopped"))
        })
        .task("slow", "1.0.0", |_: Value, ctx| {
            SLOW_STARTED.store(true, Ordering::SeqCst);
            while !ctx.is_cancelled() {
                thread::sleep(Duration::from_millis(5));
            }
            Ok(json!({"finished": true}))
        });
    worker
}

/// Set by the `slow` handler once it runs (only one test uses it).
static SLOW_STARTED: AtomicBool = AtomicBool::new(false);

fn running(worker: &Worker) -> thread::JoinHandle<Result<(), orbit_worker::ApiError>> {
    let w = worker.clone();
    thread::spawn(move || w.run())
}

#[test]
fn a_task_is_run_and_its_result_reported_then_stop_unregisters() {
    let runtime = Runtime::start(|path, _, n| match path {
        "/v1/workers/poll" if n == 0 => (200, task("T1", "double")),
        _ => basics(path),
    });
    let worker = worker(&runtime);
    let run = running(&worker);
    let complete = runtime.wait_for("/v1/tasks/complete", 1);
    assert_eq!(complete[0], json!({"token": "T1", "output": {"n": 4}}));
    let register = &runtime.calls("/v1/workers/register")[0];
    assert_eq!(register["worker_id"], "w1");
    assert_eq!(register["runtime"], "rust");
    assert_eq!(register["contracts"].as_array().unwrap().len(), 3);
    assert_eq!(
        runtime.wait_for("/v1/workers/poll", 2)[1]["worker_session_id"],
        "S1"
    );
    worker.stop();
    assert_eq!(run.join().unwrap(), Ok(()));
    assert_eq!(
        runtime.calls("/v1/workers/unregister"),
        [json!({"worker_session_id": "S1"})]
    );
}

#[test]
fn a_cancellation_in_a_heartbeat_answer_reaches_the_handler() {
    let runtime = Runtime::start(|path, _, n| match path {
        "/v1/workers/poll" if n == 0 => (200, task("T1", "wait")),
        "/v1/workers/heartbeat" if n >= 2 => (200, json!({"cancel": ["T1"]})),
        _ => basics(path),
    });
    let worker = worker(&runtime);
    let run = running(&worker);
    let fail = runtime.wait_for("/v1/tasks/fail", 1);
    assert_eq!(fail[0]["error_code"], "CANCELLED");
    worker.stop();
    run.join().unwrap().unwrap();
}

#[test]
fn a_result_is_delivered_through_an_outage_once() {
    let runtime = Runtime::start(|path, _, n| match path {
        "/v1/workers/poll" if n == 0 => (200, task("T1", "double")),
        "/v1/tasks/complete" if n < 3 => (
            503,
            json!({"error": {"code": "UNAVAILABLE", "message": "restarting"}}),
        ),
        _ => basics(path),
    });
    let worker = worker(&runtime);
    let run = running(&worker);
    let complete = runtime.wait_for("/v1/tasks/complete", 4);
    assert!(complete.iter().all(|c| c["token"] == "T1"));
    worker.stop();
    run.join().unwrap().unwrap();
    assert_eq!(
        runtime.calls("/v1/tasks/complete").len(),
        4,
        "sent again after success"
    );
    assert!(runtime.calls("/v1/tasks/fail").is_empty());
}

/// A storage outage of a few seconds answers every report 500 until the
/// database is back; giving up would leave the attempt to a worker that keeps
/// heartbeating, so the runtime would never redeliver it.
#[test]
fn a_result_answered_500_is_sent_until_the_runtime_takes_it() {
    let runtime = Runtime::start(|path, _, n| match path {
        "/v1/workers/poll" if n == 0 => (200, task("T1", "double")),
        "/v1/tasks/complete" if n < 4 => (
            500 + u16::from(n == 3),
            json!({"error": {"code": "STORAGE_ERROR", "message": "the store is down"}}),
        ),
        _ => basics(path),
    });
    let worker = worker(&runtime);
    let run = running(&worker);
    let complete = runtime.wait_for("/v1/tasks/complete", 5);
    assert_eq!(complete[4], json!({"token": "T1", "output": {"n": 4}}));
    worker.stop();
    run.join().unwrap().unwrap();
    assert_eq!(runtime.calls("/v1/tasks/complete").len(), 5);
    assert!(runtime.calls("/v1/tasks/fail").is_empty());
}

#[test]
fn a_refused_result_is_sent_once() {
    let runtime = Runtime::start(|path, _, n| match path {
        "/v1/workers/poll" if n == 0 => (200, task("T1", "double")),
        "/v1/tasks/complete" => (409, json!({"error": {"code": "CONFLICT", "message": "no"}})),
        _ => basics(path),
    });
    let worker = worker(&runtime);
    let run = running(&worker);
    runtime.wait_for("/v1/tasks/fail", 1);
    worker.stop();
    run.join().unwrap().unwrap();
    assert_eq!(runtime.calls("/v1/tasks/complete").len(), 1);
}

#[test]
fn a_refused_result_is_replaced_by_a_failure() {
    let runtime = Runtime::start(|path, _, n| match path {
        "/v1/workers/poll" if n == 0 => (200, task("T1", "double")),
        "/v1/tasks/complete" => (
            422,
            json!({"error": {"code": "INVALID_OUTPUT", "message": "no"}}),
        ),
        _ => basics(path),
    });
    let worker = worker(&runtime);
    let run = running(&worker);
    let fail = runtime.wait_for("/v1/tasks/fail", 1);
    assert_eq!(fail[0]["error_code"], "INVALID_RESULT");
    assert_eq!(fail[0]["retryable"], false);
    assert_eq!(fail[0]["details"]["code"], "INVALID_OUTPUT");
    worker.stop();
    run.join().unwrap().unwrap();
}

#[test]
fn a_lost_session_is_registered_again() {
    let runtime = Runtime::start(|path, _, n| match path {
        "/v1/workers/poll" if n == 1 => (
            404,
            json!({"error": {"code": "UNKNOWN_SESSION", "message": "gone"}}),
        ),
        _ => basics(path),
    });
    let worker = worker(&runtime);
    let run = running(&worker);
    runtime.wait_for("/v1/workers/register", 2);
    runtime.wait_for("/v1/workers/poll", 3);
    worker.stop();
    run.join().unwrap().unwrap();
}

#[test]
fn a_refused_registration_is_returned_and_an_outage_waited_out() {
    let refused = Runtime::start(|path, _, _| match path {
        "/v1/workers/register" => (
            403,
            json!({"error": {"code": "FORBIDDEN", "message": "not you"}}),
        ),
        _ => basics(path),
    });
    let err = worker(&refused).run().unwrap_err();
    assert_eq!((err.status, err.code.as_str()), (403, "FORBIDDEN"));

    let flaky = Runtime::start(|path, _, n| match path {
        "/v1/workers/register" if n < 2 => (502, Value::String("bad gateway".into())),
        _ => basics(path),
    });
    let worker = worker(&flaky);
    let run = running(&worker);
    flaky.wait_for("/v1/workers/poll", 1);
    assert_eq!(flaky.calls("/v1/workers/register").len(), 3);
    worker.stop();
    run.join().unwrap().unwrap();
}

#[test]
fn stop_lets_a_running_handler_finish_and_report() {
    let runtime = Runtime::start(|path, _, n| match path {
        "/v1/workers/poll" if n == 0 => (200, task("T1", "slow")),
        "/v1/workers/heartbeat" if n >= 5 => (200, json!({"cancel": ["T1"]})),
        _ => basics(path),
    });
    let worker = worker(&runtime);
    let run = running(&worker);
    let until = Instant::now() + Duration::from_secs(10);
    while !SLOW_STARTED.load(Ordering::SeqCst) {
        assert!(Instant::now() < until, "the handler never started");
        thread::sleep(Duration::from_millis(5));
    }
    worker.stop();
    run.join().unwrap().unwrap();
    // The handler ran on until the runtime cancelled it, and its outcome was
    // reported before the worker unregistered.
    assert_eq!(runtime.calls("/v1/tasks/complete").len(), 1);
    let order: Vec<String> = runtime
        .calls
        .lock()
        .unwrap()
        .iter()
        .map(|(p, _)| p.clone())
        .collect();
    let complete = order
        .iter()
        .position(|p| p == "/v1/tasks/complete")
        .unwrap();
    let unregister = order
        .iter()
        .position(|p| p == "/v1/workers/unregister")
        .unwrap();
    assert!(complete < unregister, "{order:?}");
}

/// Registration answers offering the result-then-poll extension.
fn offering(path: &str) -> (u16, Value) {
    match path {
        "/v1/workers/register" => (
            200,
            json!({"worker_session_id": "S1", "heartbeat_interval_ms": 20, "warnings": [],
                   "extensions": ["result-then-poll"]}),
        ),
        _ => basics(path),
    }
}

fn paths(runtime: &Runtime) -> Vec<String> {
    let calls = runtime.calls.lock().unwrap();
    calls
        .iter()
        .map(|(p, _)| p.clone())
        .filter(|p| p != "/v1/workers/heartbeat")
        .collect()
}

#[test]
fn results_carry_the_next_poll_when_the_runtime_offers_it() {
    let runtime = Runtime::start(|path, _, n| match path {
        "/v1/workers/poll" if n == 0 => (200, task("T1", "double")),
        "/v1/tasks/complete" if n == 0 => {
            (200, json!({"accepted": true, "task": task("T2", "double")}))
        }
        "/v1/tasks/complete" => (200, json!({"accepted": true, "task": null})),
        _ => offering(path),
    });
    let worker = worker(&runtime);
    let run = running(&worker);
    let complete = runtime.wait_for("/v1/tasks/complete", 2);
    let poll = json!({"worker_session_id": "S1", "wait_ms": 50});
    assert_eq!(
        complete[0],
        json!({"token": "T1", "output": {"n": 4}, "poll": poll})
    );
    assert_eq!(complete[1]["token"], "T2");
    assert_eq!(
        runtime.calls("/v1/workers/register")[0]["extensions"],
        json!(["result-then-poll"])
    );
    worker.stop();
    assert_eq!(run.join().unwrap(), Ok(()));
    // The second task came with the first result's answer, not from a poll.
    let order = paths(&runtime);
    assert_eq!(
        order[..4],
        [
            "/v1/workers/register",
            "/v1/workers/poll",
            "/v1/tasks/complete",
            "/v1/tasks/complete"
        ]
    );
}

#[test]
fn results_are_the_books_when_the_runtime_does_not_offer_it() {
    let runtime = Runtime::start(|path, _, n| match path {
        "/v1/workers/poll" if n == 0 => (200, task("T1", "double")),
        _ => basics(path),
    });
    let worker = worker(&runtime);
    let run = running(&worker);
    let complete = runtime.wait_for("/v1/tasks/complete", 1);
    assert_eq!(complete[0], json!({"token": "T1", "output": {"n": 4}}));
    worker.stop();
    assert_eq!(run.join().unwrap(), Ok(()));
}

#[test]
fn a_refused_result_loses_no_task() {
    let runtime = Runtime::start(|path, _, n| match path {
        "/v1/workers/poll" if n == 0 => (200, task("T1", "double")),
        "/v1/tasks/complete" if n == 0 => (
            400,
            json!({"error": {"code": "INVALID_INPUT", "message": "too deep"}}),
        ),
        "/v1/tasks/fail" => (200, json!({"accepted": true, "task": task("T2", "double")})),
        "/v1/tasks/complete" => (200, json!({"accepted": true, "task": null})),
        _ => offering(path),
    });
    let worker = worker(&runtime);
    let run = running(&worker);
    // The refused report took no task; the failure sent in its place carries
    // the poll, which brings the second task.
    let complete = runtime.wait_for("/v1/tasks/complete", 2);
    let fail = runtime.calls("/v1/tasks/fail");
    assert_eq!(fail[0]["token"], "T1");
    assert!(fail[0]["poll"].is_object());
    assert_eq!(complete[1]["token"], "T2");
    worker.stop();
    assert_eq!(run.join().unwrap(), Ok(()));
}
