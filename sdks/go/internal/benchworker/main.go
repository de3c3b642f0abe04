// Command benchworker is the Go worker of benchmarks/bench_http.py
// (--worker-kind go): it serves bench.step, adding one to its input, with
// ORBIT_BENCH_CONCURRENCY poll goroutines, until SIGTERM.
package main

import (
	"context"
	"io"
	"log"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	orbit "github.com/AjmalX0/Orbit/sdks/go"
)

type step struct {
	I int64 `json:"i"`
}

func main() {
	concurrency, _ := strconv.Atoi(os.Getenv("ORBIT_BENCH_CONCURRENCY"))
	logger := log.New(os.Stderr, "[orbit] ", 0)
	if os.Getenv("ORBIT_BENCH_QUIET") != "" {
		logger = log.New(io.Discard, "", 0)
	}
	w := orbit.NewWorker(orbit.Options{
		WorkerID:    os.Getenv("ORBIT_BENCH_WORKER_ID"),
		Concurrency: concurrency,
		PollWait:    time.Second,
		Logger:      logger,
	})
	w.Task("bench.step", "1.0.0", orbit.Typed(func(ctx context.Context, t *orbit.Task, in step) (step, error) {
		return step{I: in.I + 1}, nil
	}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
