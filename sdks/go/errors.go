package orbit

import (
	"errors"
	"fmt"
)

// TaskError fails an attempt with a code the workflow can branch on.
// Return it (or an error wrapping it) from a handler.
type TaskError struct {
	Code      string
	Message   string
	Retryable bool
	// Details is stored with the error in the execution's history; it must
	// marshal to JSON (otherwise its fmt.Sprint form is sent).
	Details any
}

func (e *TaskError) Error() string { return e.Code + ": " + e.Message }

// Retryable returns a task error the step's retry policy may retry.
func Retryable(code, message string) *TaskError {
	return &TaskError{Code: code, Message: message, Retryable: true}
}

// Permanent returns a task error that fails the step whatever its retry policy.
func Permanent(code, message string) *TaskError {
	return &TaskError{Code: code, Message: message, Retryable: false}
}

// ErrCancelledByRuntime is the cause (context.Cause) of a handler context
// cancelled because a heartbeat answer listed its attempt.
var ErrCancelledByRuntime = errors.New("orbit: the runtime cancelled this attempt")

// ErrShutdown is the cause of a handler context cancelled because the
// context passed to Run ended.
var ErrShutdown = errors.New("orbit: the worker is shutting down")

// APIError is a call to the runtime that did not succeed.
type APIError struct {
	// Status is the answer's HTTP status, or 0 when no answer arrived.
	Status int
	// Code is the code of the runtime's error body; CONNECTION without an
	// answer; HTTP_ERROR for an answer without an ORBIT error body.
	Code    string
	Message string
}

func (e *APIError) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("%s: %s", e.Code, e.Message)
	}
	return fmt.Sprintf("%s (%d): %s", e.Code, e.Status, e.Message)
}

// transient says whether waiting may cure the error: no answer, or a 5xx.
func (e *APIError) transient() bool { return e.Status == 0 || e.Status >= 500 }

func (e *APIError) unknownSession() bool {
	return e.Status == 404 && e.Code == "UNKNOWN_SESSION"
}
