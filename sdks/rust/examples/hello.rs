//! The quick start's two tasks (`greeting.compose`, `greeting.decorate`)
//! served by one Rust worker, for the Hello workflow with both steps routed
//! `using rust`. Run it with `cargo run --example hello`.

use orbit_worker::{TaskError, Worker};
use serde::{Deserialize, Serialize};

#[derive(Deserialize)]
struct Compose {
    name: String,
}

#[derive(Deserialize)]
struct Decorate {
    message: String,
    excitement: i64,
}

#[derive(Serialize)]
struct Greeting {
    message: String,
}

fn main() {
    let id = std::env::var("ORBIT_WORKER_ID").unwrap_or_else(|_| "hello-rust".to_owned());
    let mut worker = Worker::builder(&id).build();
    worker
        .task("greeting.compose", "1.0.0", |input: Compose, ctx| {
            ctx.log(&format!("composing a greeting for {}", input.name));
            Ok(Greeting {
                message: format!("Hello, {}", input.name),
            })
        })
        .task("greeting.decorate", "1.0.0", |input: Decorate, _ctx| {
            let Ok(count) = usize::try_from(input.excitement) else {
                return Err(TaskError::permanent(
                    "INVALID_EXCITEMENT",
                    "excitement must not be negative",
                ));
            };
            Ok(Greeting {
                message: input.message + &"!".repeat(count),
            })
        });
    let handle = worker.clone();
    ctrlc::set_handler(move || handle.stop()).expect("cannot install the signal handler");
    worker.run().expect("the worker stopped with an error");
}
