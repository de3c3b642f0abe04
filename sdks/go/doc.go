// Package orbit runs ORBIT task handlers written in Go.
//
// A Worker announces the tasks it serves, long-polls the runtime for
// attempts, runs each on one of its poll goroutines and reports the outcome
// over the HTTP/JSON worker protocol. It uses the standard library only.
//
// How the pieces fit:
//
//	Run          registers, starts the heartbeat and poll goroutines, and on
//	             cancellation of its context drains them and unregisters
//	session      the current worker session; the first goroutine to see
//	             UNKNOWN_SESSION registers again, the others reuse its answer
//	poll loop    one per unit of Concurrency: poll, run the handler, report
//	heartbeat    keeps the session alive and cancels the attempts the
//	             runtime lists in its cancel answer
//	reporter     delivers results: waits out outages with jittered backoff
//	             for up to ten minutes, shutdown included, and reports a
//	             failure in place of a result the runtime refused
//
// A handler's context is cancelled when the runtime cancels the attempt
// (its cause is ErrCancelledByRuntime), when the attempt's deadline passes,
// or when Run's context ends. Results are delivered on a context detached
// from Run's, so work finished during shutdown is still reported.
package orbit

// Version is the SDK's version, announced at registration as orbit-go/<Version>.
const Version = "0.1.0"
