//! The Rust step of the polyglot example: serves `text.fingerprint`.
//!
//! Run it beside a runtime (`orbit server`) with
//! `cargo run --example text_worker`; Ctrl-C or SIGTERM stops it gracefully.

use orbit_worker::{TaskError, Worker};
use serde::{Deserialize, Serialize};

#[derive(Deserialize)]
struct Input {
    text: String,
}

#[derive(Serialize)]
struct Output {
    hash: String,
    bytes: usize,
}

/// FNV-1a over 64 bits: cheap and stable, not meant to resist attackers.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The business logic, kept apart from the SDK so it can be tested alone.
fn fingerprint(text: &str) -> Output {
    Output {
        hash: format!("{:016x}", fnv1a(text.as_bytes())),
        bytes: text.len(),
    }
}

fn main() {
    let id = std::env::var("ORBIT_WORKER_ID").unwrap_or_else(|_| "text-rust".to_owned());
    let mut worker = Worker::builder(&id).build();
    worker.task("text.fingerprint", "1.0.0", |input: Input, ctx| {
        if input.text.is_empty() {
            return Err(TaskError::permanent("EMPTY_TEXT", "text must not be empty"));
        }
        ctx.log("fingerprinting");
        Ok(fingerprint(&input.text))
    });
    let stopper = worker.clone();
    ctrlc::set_handler(move || stopper.stop()).expect("cannot install the signal handler");
    worker.run().expect("worker failed");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_are_stable_and_count_bytes() {
        assert_eq!(fingerprint("abc").hash, fingerprint("abc").hash);
        assert_ne!(fingerprint("abc").hash, fingerprint("abd").hash);
        assert_eq!(fingerprint("héllo").bytes, 6);
        // The published FNV-1a test vector for the empty string.
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
