// Command conformance is the Go SDK's worker program for the protocol
// conformance suite: it serves the conf.* tasks that
// tests/sdk_conformance/README.md describes, and shuts down gracefully on
// SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	orbit "github.com/AjmalX0/Orbit/sdks/go"
)

func event(name string, t *orbit.Task) {
	fmt.Fprintf(os.Stderr, "CONF %s %s %s\n", name, t.ExecutionID, t.StepID)
}

func envInt(name string, fallback int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return n
	}
	return fallback
}

func main() {
	w := orbit.NewWorker(orbit.Options{
		WorkerID:    os.Getenv("CONF_WORKER_ID"),
		Concurrency: envInt("CONF_CONCURRENCY", 1),
		PollWait:    time.Duration(envInt("CONF_POLL_WAIT_MS", 5000)) * time.Millisecond,
	})
	w.Task("conf.echo", "1.0.0", orbit.Typed(func(ctx context.Context, t *orbit.Task, in struct {
		Text string `json:"text"`
	}) (map[string]string, error) {
		event("start", t)
		return map[string]string{"text": in.Text}, nil
	}))
	w.Task("conf.flaky", "1.0.0", orbit.Typed(func(ctx context.Context, t *orbit.Task, in struct {
		SucceedOn int `json:"succeed_on"`
	}) (map[string]int, error) {
		event("start", t)
		if t.Attempt < in.SucceedOn {
			return nil, orbit.Retryable("CONF_RETRYABLE", fmt.Sprintf("attempt %d fails", t.Attempt))
		}
		return map[string]int{"attempt": t.Attempt}, nil
	}))
	w.Task("conf.fail_permanent", "1.0.0", func(ctx context.Context, t *orbit.Task) (any, error) {
		event("start", t)
		return nil, &orbit.TaskError{Code: "CONF_PERMANENT", Message: "permanent failure", Details: map[string]string{"source": "conformance"}}
	})
	w.Task("conf.bad_output", "1.0.0", func(ctx context.Context, t *orbit.Task) (any, error) {
		event("start", t)
		return map[string]bool{"wrong": true}, nil
	})
	// Ignores its context on purpose: a handler that finishes its work during
	// shutdown must still have its result delivered.
	w.Task("conf.sleep", "1.0.0", orbit.Typed(func(ctx context.Context, t *orbit.Task, in struct {
		Ms int `json:"ms"`
	}) (map[string]int, error) {
		event("start", t)
		time.Sleep(time.Duration(in.Ms) * time.Millisecond)
		event("done", t)
		return map[string]int{"slept": in.Ms}, nil
	}))
	w.Task("conf.sleep_until_cancelled", "1.0.0", orbit.Typed(func(ctx context.Context, t *orbit.Task, in struct {
		Seconds int `json:"seconds"`
	}) (map[string]bool, error) {
		event("start", t)
		select {
		case <-time.After(time.Duration(in.Seconds) * time.Second):
			return map[string]bool{"waited": true}, nil
		case <-ctx.Done():
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			event("deadline", t)
			return nil, orbit.Permanent("CONF_DEADLINE", "the attempt's deadline passed")
		}
		event("cancelled", t)
		return nil, orbit.Permanent("CANCELLED", "cancelled by the runtime")
	}))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
