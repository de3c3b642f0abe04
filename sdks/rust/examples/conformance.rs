//! The Rust program of the protocol conformance suite
//! (tests/sdk_conformance/README.md describes the interface it follows).

use std::time::{Duration, Instant};

use orbit_worker::{Context, TaskError, Worker};
use serde::Deserialize;
use serde_json::{json, Value};

fn event(name: &str, ctx: &Context) {
    eprintln!("CONF {name} {} {}", ctx.execution_id(), ctx.step_id());
}

fn env_number(name: &str, fallback: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(fallback)
}

#[derive(Deserialize)]
struct Echo {
    text: String,
}

#[derive(Deserialize)]
struct Flaky {
    succeed_on: u32,
}

#[derive(Deserialize)]
struct Sleep {
    ms: u64,
}

#[derive(Deserialize)]
struct Wait {
    seconds: u64,
}

fn main() {
    let id = std::env::var("CONF_WORKER_ID").unwrap_or_else(|_| "conf-rust".to_owned());
    let mut worker = Worker::builder(&id)
        .concurrency(env_number("CONF_CONCURRENCY", 1) as usize)
        .poll_wait(Duration::from_millis(env_number("CONF_POLL_WAIT_MS", 5000)))
        .build();
    worker
        .task("conf.echo", "1.0.0", |input: Echo, ctx| {
            event("start", ctx);
            Ok(json!({ "text": input.text }))
        })
        .task("conf.flaky", "1.0.0", |input: Flaky, ctx| {
            event("start", ctx);
            if ctx.attempt() < input.succeed_on {
                let message = format!("attempt {} fails", ctx.attempt());
                return Err(TaskError::retryable("CONF_RETRYABLE", message));
            }
            Ok(json!({ "attempt": ctx.attempt() }))
        })
        .task(
            "conf.fail_permanent",
            "1.0.0",
            |_: Value, ctx| -> Result<(), TaskError> {
                event("start", ctx);
                Err(TaskError::permanent("CONF_PERMANENT", "permanent failure")
                    .with_details(json!({ "source": "conformance" })))
            },
        )
        .task("conf.bad_output", "1.0.0", |_: Value, ctx| {
            event("start", ctx);
            Ok(json!({ "wrong": true }))
        })
        .task("conf.sleep", "1.0.0", |input: Sleep, ctx| {
            event("start", ctx);
            std::thread::sleep(Duration::from_millis(input.ms));
            event("done", ctx);
            Ok(json!({ "slept": input.ms }))
        })
        .task("conf.sleep_until_cancelled", "1.0.0", |input: Wait, ctx| {
            event("start", ctx);
            let until = Instant::now() + Duration::from_secs(input.seconds);
            while Instant::now() < until {
                if ctx.is_cancelled() {
                    event("cancelled", ctx);
                    return Err(TaskError::permanent(
                        "CANCELLED",
                        "cancelled by the runtime",
                    ));
                }
                if ctx.remaining_ms() == Some(0) {
                    event("deadline", ctx);
                    return Err(TaskError::permanent(
                        "CONF_DEADLINE",
                        "the attempt's deadline passed",
                    ));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(json!({ "waited": true }))
        });

    let stopper = worker.clone();
    ctrlc::set_handler(move || stopper.stop()).expect("cannot install the signal handler");
    if let Err(e) = worker.run() {
        eprintln!("[orbit] worker failed: {e}");
        std::process::exit(1);
    }
}
