// Command typed is the Go SDK's typed conformance program
// (../../README.md, "Typed workers"): conf.echo served through the package
// `orbit codegen --lang go` generated from conformance.orbit, which the
// suite writes beside this file. It answers the text in upper case.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	orbit "github.com/AjmalX0/Orbit/sdks/go"

	"example.com/typed/conformance"
)

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
	w.Contract(orbit.ContractRef(conformance.ConfEchoContract),
		orbit.Typed(func(ctx context.Context, t *orbit.Task, in conformance.ConfEchoInput) (conformance.ConfEchoOutput, error) {
			fmt.Fprintf(os.Stderr, "CONF start %s %s\n", t.ExecutionID, t.StepID)
			return conformance.ConfEchoOutput{Text: strings.ToUpper(in.Text)}, nil
		}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
