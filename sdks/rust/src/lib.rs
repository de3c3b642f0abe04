//! # orbit-worker
//!
//! Runs ORBIT task handlers written in Rust. A handler is a closure from a
//! serde-deserializable input and a [`Context`] to a serializable output or
//! a [`TaskError`]:
//!
//! ```no_run
//! use orbit_worker::{TaskError, Worker};
//! use serde_json::{json, Value};
//!
//! let mut worker = Worker::builder("greeter-1").build();
//! worker.task("greet", "1.0.0", |input: Value, ctx| {
//!     let name = input["name"].as_str().ok_or_else(|| {
//!         TaskError::permanent("NO_NAME", "the input has no name")
//!     })?;
//!     ctx.log("greeting");
//!     Ok(json!({ "message": format!("Hello, {name}!") }))
//! });
//! worker.run().expect("worker failed");
//! ```
//!
//! The SDK is blocking and needs no async runtime: [`Worker::run`] starts
//! one OS thread per poll loop ([`WorkerBuilder::concurrency`]) plus a
//! heartbeat thread, and handlers run on the poll threads. Cancellation is
//! cooperative: the heartbeat thread sets a flag that
//! [`Context::is_cancelled`] reads, and [`Context::remaining_ms`] tells how
//! long the attempt has before its deadline. Results are delivered through
//! runtime outages, retried with jittered backoff for up to ten minutes.
//! Diagnostics go to standard error with the prefix `[orbit]`.
#![deny(missing_docs)]

mod backoff;
mod contact;
mod context;
mod error;
mod transport;
mod worker;

pub use context::{Assignment, Context};
pub use error::{ApiError, TaskError};
pub use worker::{Worker, WorkerBuilder};

/// The crate's version, announced to the runtime as `orbit-rust/<VERSION>`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
