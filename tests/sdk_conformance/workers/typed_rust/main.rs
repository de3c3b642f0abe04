//! The Rust SDK's typed conformance program (../../README.md, "Typed
//! workers"): `conf.echo` served through the module `orbit codegen --lang
//! rust` generated from conformance.orbit, which the suite writes beside
//! this file as `conformance.rs`. It answers the text in upper case.

#[allow(dead_code)]
mod conformance;

use std::time::Duration;

use conformance::{ConfEcho, ConfEchoInput, ConfEchoOutput, Task};
use orbit_worker::Worker;

fn main() {
    let id = std::env::var("CONF_WORKER_ID").unwrap_or_else(|_| "typed-rust".to_owned());
    let poll_ms = std::env::var("CONF_POLL_WAIT_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5000);
    let mut worker = Worker::builder(&id)
        .poll_wait(Duration::from_millis(poll_ms))
        .build();
    worker
        .task(ConfEcho::NAME, ConfEcho::VERSION, |input: ConfEchoInput, ctx| {
            eprintln!("CONF start {} {}", ctx.execution_id(), ctx.step_id());
            Ok(ConfEchoOutput {
                text: input.text.to_uppercase(),
            })
        })
        .contract_hash(ConfEcho::NAME, ConfEcho::CONTRACT_HASH, ConfEcho::CONTRACT);
    if let Err(e) = worker.run() {
        eprintln!("[orbit] worker failed: {e}");
        std::process::exit(1);
    }
}
