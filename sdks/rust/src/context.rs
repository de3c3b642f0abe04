//! What a handler learns about its attempt: the [`Assignment`] (the task
//! message as the runtime sent it) and the [`Context`] around it, which adds
//! the cancellation flag the heartbeat thread sets.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Deserialize;
use serde_json::{json, Value};

/// The task message of one delivery, as the runtime sent it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Assignment {
    /// Identifies this delivery; results are reported against it.
    pub token: String,
    /// The workflow execution.
    pub execution_id: String,
    /// The workflow's name.
    #[serde(default)]
    pub workflow: String,
    /// The workflow's version.
    #[serde(default)]
    pub workflow_version: String,
    /// The step, `compensate:<step>` for a compensation, `step[i]` for a
    /// fan-out element.
    pub step_id: String,
    /// The task's name.
    pub task_name: String,
    /// The task's contract version.
    pub contract_version: String,
    /// The input, undecoded.
    #[serde(default)]
    pub input: Value,
    /// Stays the same across retries and redeliveries of the step.
    #[serde(default)]
    pub idempotency_key: String,
    /// The 1-based attempt number.
    #[serde(default = "first_attempt")]
    pub attempt: u32,
    /// Whether an earlier delivery of this attempt has an unknown outcome.
    #[serde(default)]
    pub redelivery: bool,
    /// The attempt's deadline in Unix epoch milliseconds, if it has one.
    #[serde(default)]
    pub deadline_ms: Option<u64>,
}

fn first_attempt() -> u32 {
    1
}

/// The handler's view of the attempt it runs.
///
/// Only the SDK constructs a `Context`; keep business logic in plain
/// functions to test it without one.
#[derive(Debug)]
pub struct Context {
    /// The full task message.
    pub assignment: Arc<Assignment>,
    cancelled: Arc<AtomicBool>,
}

impl Context {
    pub(crate) fn new(assignment: Arc<Assignment>, cancelled: Arc<AtomicBool>) -> Self {
        Context {
            assignment,
            cancelled,
        }
    }

    /// The workflow execution.
    pub fn execution_id(&self) -> &str {
        &self.assignment.execution_id
    }

    /// The step this attempt belongs to.
    pub fn step_id(&self) -> &str {
        &self.assignment.step_id
    }

    /// The 1-based attempt number; a redelivery keeps it.
    pub fn attempt(&self) -> u32 {
        self.assignment.attempt
    }

    /// A key that is stable across retries and redeliveries; use it to make
    /// side effects idempotent.
    pub fn idempotency_key(&self) -> &str {
        &self.assignment.idempotency_key
    }

    /// Whether the outcome of an earlier delivery of this attempt is unknown.
    pub fn redelivery(&self) -> bool {
        self.assignment.redelivery
    }

    /// True once the runtime has asked this attempt to stop (a timeout, or
    /// the workflow being cancelled or failed). Nothing interrupts the
    /// handler: check this between units of work.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }

    /// Milliseconds left before the attempt's deadline (0 once it has
    /// passed), or `None` when the attempt has no deadline.
    pub fn remaining_ms(&self) -> Option<u64> {
        let deadline = self.assignment.deadline_ms?;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        Some(deadline.saturating_sub(now))
    }

    /// Writes `message` to standard error as one JSON line carrying the
    /// execution, step and attempt.
    pub fn log(&self, message: &str) {
        let line = json!({
            "message": message,
            "execution_id": self.assignment.execution_id,
            "step_id": self.assignment.step_id,
            "attempt": self.assignment.attempt,
            "task": self.assignment.task_name,
        });
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "{line}");
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn assignment(input: Value) -> Assignment {
        serde_json::from_value(json!({
            "token": "t1", "execution_id": "e1", "step_id": "s1",
            "task_name": "x", "contract_version": "1.0.0", "input": input,
            "attempt": 2,
        }))
        .unwrap()
    }

    #[test]
    fn missing_optional_fields_take_defaults() {
        let a = assignment(json!({}));
        assert_eq!(a.attempt, 2);
        assert_eq!(a.deadline_ms, None);
        assert!(!a.redelivery);
        let ctx = Context::new(Arc::new(a), Arc::default());
        assert_eq!(ctx.remaining_ms(), None);
        assert!(!ctx.is_cancelled());
    }

    #[test]
    fn remaining_time_counts_down_to_zero() {
        let mut a = assignment(json!({}));
        a.deadline_ms = Some(1);
        let ctx = Context::new(Arc::new(a.clone()), Arc::default());
        assert_eq!(ctx.remaining_ms(), Some(0));
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        a.deadline_ms = Some(now + 60_000);
        let ctx = Context::new(Arc::new(a), Arc::default());
        let left = ctx.remaining_ms().unwrap();
        assert!(left > 50_000 && left <= 60_000, "{left}");
    }
}
