//! The worker of `benchmarks/bench_http.py --worker-kind rust`: serves the
//! benchmark's one task, `bench.step`, which adds 1 to its input. Configured
//! by the benchmark through ORBIT_SERVER, ORBIT_WORKER_TOKEN,
//! ORBIT_BENCH_WORKER_ID and ORBIT_BENCH_CONCURRENCY.

use std::time::Duration;

use orbit_worker::Worker;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, Serialize)]
struct Step {
    i: i64,
}

fn main() {
    let id = std::env::var("ORBIT_BENCH_WORKER_ID").unwrap_or_else(|_| "bench-rust".to_owned());
    let concurrency = std::env::var("ORBIT_BENCH_CONCURRENCY")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    let mut worker = Worker::builder(&id)
        .concurrency(concurrency)
        .poll_wait(Duration::from_secs(1))
        .build();
    worker.task("bench.step", "1.0.0", |input: Step, _ctx| {
        Ok(Step { i: input.i + 1 })
    });
    let handle = worker.clone();
    ctrlc::set_handler(move || handle.stop()).expect("cannot install the signal handler");
    worker.run().expect("the worker stopped with an error");
}
