// The quick start's two tasks served by one Go worker, for the Hello
// workflow with both steps routed `using go` (tests/e2e/test_e2e_go_workers.py).
package main

import (
	"context"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"

	orbit "github.com/AjmalX0/Orbit/sdks/go"
)

type composeIn struct {
	Name string `json:"name"`
}

type decorateIn struct {
	Message    string `json:"message"`
	Excitement int    `json:"excitement"`
}

type greeting struct {
	Message string `json:"message"`
}

func main() {
	w := orbit.NewWorker(orbit.Options{WorkerID: "hello-go"})
	w.Task("greeting.compose", "1.0.0", orbit.Typed(func(ctx context.Context, t *orbit.Task, in composeIn) (greeting, error) {
		orbit.Logf(ctx, "composing a greeting for %s", in.Name)
		return greeting{Message: "Hello, " + in.Name}, nil
	}))
	w.Task("greeting.decorate", "1.0.0", orbit.Typed(func(ctx context.Context, t *orbit.Task, in decorateIn) (greeting, error) {
		if in.Excitement < 0 {
			return greeting{}, orbit.Permanent("INVALID_EXCITEMENT", "excitement must not be negative")
		}
		return greeting{Message: in.Message + strings.Repeat("!", in.Excitement)}, nil
	}))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
