//! The two error types: [`TaskError`], which a handler returns to fail its
//! attempt, and [`ApiError`], which describes a call the runtime refused or
//! could not answer.

use std::fmt;

use serde_json::Value;

/// A structured failure of one task attempt, returned by a handler.
///
/// Whether the runtime tries the step again depends on `retryable`: a
/// permanent error fails the step whatever its retry policy says, a
/// retryable one is retried while the policy allows.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskError {
    /// A stable, machine-readable code such as `CARD_DECLINED`.
    pub code: String,
    /// A human-readable explanation.
    pub message: String,
    /// Whether the runtime may try the attempt again.
    pub retryable: bool,
    /// Extra JSON stored with the error in the execution history.
    pub details: Option<Box<Value>>,
}

impl TaskError {
    /// An error the runtime retries according to the step's retry policy.
    pub fn retryable(code: &str, message: impl Into<String>) -> Self {
        TaskError {
            code: code.to_owned(),
            message: message.into(),
            retryable: true,
            details: None,
        }
    }

    /// An error that fails the step at once, whatever its retry policy.
    pub fn permanent(code: &str, message: impl Into<String>) -> Self {
        TaskError {
            code: code.to_owned(),
            message: message.into(),
            retryable: false,
            details: None,
        }
    }

    /// Attaches a JSON value that is recorded with the error.
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(Box::new(details));
        self
    }
}

impl fmt::Display for TaskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for TaskError {}

/// A failed call to the runtime's HTTP API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status; 0 when the runtime could not be reached at all.
    pub status: u16,
    /// The runtime's error code, `CONNECTION` when there was no answer, or
    /// `HTTP_ERROR` when the answer carried no code.
    pub code: String,
    /// A human-readable explanation.
    pub message: String,
}

impl ApiError {
    pub(crate) fn new(status: u16, code: &str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code: code.to_owned(),
            message: message.into(),
        }
    }

    /// No answer, or a 5xx: worth waiting out.
    pub(crate) fn transient(&self) -> bool {
        self.status == 0 || self.status >= 500
    }

    /// The runtime restarted or forgot this worker's session.
    pub(crate) fn unknown_session(&self) -> bool {
        self.status == 404 && self.code == "UNKNOWN_SESSION"
    }

    /// The runtime, its database or a proxy before it is restarting,
    /// failing or overloaded: a result is worth sending again.
    pub(crate) fn unavailable(&self) -> bool {
        self.transient() || matches!(self.status, 408 | 429)
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.status == 0 {
            write!(f, "{}: {}", self.code, self.message)
        } else {
            write!(f, "{} ({}): {}", self.code, self.status, self.message)
        }
    }
}

impl std::error::Error for ApiError {}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn constructors_set_retryability_and_details() {
        let e = TaskError::permanent("CARD_DECLINED", "limit exceeded")
            .with_details(json!({"limit": 5000}));
        assert!(!e.retryable);
        assert_eq!(e.details.as_deref(), Some(&json!({"limit": 5000})));
        assert_eq!(e.to_string(), "CARD_DECLINED: limit exceeded");
        assert!(TaskError::retryable("BUSY", String::from("later")).retryable);
    }

    #[test]
    fn api_errors_classify_statuses() {
        assert!(ApiError::new(0, "CONNECTION", "x").unavailable());
        assert!(ApiError::new(503, "HTTP_ERROR", "x").unavailable());
        assert!(ApiError::new(500, "STORAGE_ERROR", "x").unavailable());
        assert!(ApiError::new(429, "HTTP_ERROR", "x").unavailable());
        assert!(!ApiError::new(422, "HTTP_ERROR", "x").unavailable());
        assert!(ApiError::new(500, "HTTP_ERROR", "x").transient());
        assert!(ApiError::new(404, "UNKNOWN_SESSION", "x").unknown_session());
        assert_eq!(
            ApiError::new(409, "CONFLICT", "no").to_string(),
            "CONFLICT (409): no"
        );
    }
}
