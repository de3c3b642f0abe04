package orbit_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	orbit "github.com/AjmalX0/Orbit/sdks/go"
)

func callBank(ctx context.Context) error { return ctx.Err() }

// Task errors: permanent, retryable, and one with details.
func ExamplePermanent() {
	charge := func(ctx context.Context, t *orbit.Task) (any, error) {
		var in struct {
			Amount int `json:"amount"`
		}
		if err := t.Decode(&in); err != nil {
			return nil, orbit.Permanent("INVALID_INPUT", err.Error())
		}
		if in.Amount > 5000 {
			return nil, orbit.Permanent("CARD_DECLINED", "limit exceeded")
		}
		if err := callBank(ctx); err != nil {
			return nil, orbit.Retryable("BANK_UNAVAILABLE", err.Error())
		}
		if in.Amount < 0 {
			return nil, &orbit.TaskError{
				Code:      "CARD_DECLINED",
				Message:   "negative amount",
				Retryable: false,
				Details:   map[string]any{"limit": 5000},
			}
		}
		return map[string]any{"charged": in.Amount}, nil
	}
	_, err := charge(context.Background(), &orbit.Task{Input: []byte(`{"amount": 9000}`)})
	fmt.Println(err)
	// Output: CARD_DECLINED: limit exceeded
}

// Passing the handler's context to outbound calls stops them when the
// attempt is cancelled, times out, or the worker shuts down.
func ExampleHandler_http() {
	fetch := func(ctx context.Context, t *orbit.Task) (any, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1:1/quote", strings.NewReader("{}"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, orbit.Retryable("UPSTREAM", err.Error())
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return map[string]any{"quote": string(body)}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := fetch(ctx, &orbit.Task{})
	var te *orbit.TaskError
	fmt.Println(errors.As(err, &te), te.Code, te.Retryable)
	// Output: true UPSTREAM true
}

// A typed handler: the SDK decodes the input, and refuses input that does
// not decode with the permanent INVALID_INPUT.
func ExampleTyped() {
	type in struct {
		Name string `json:"name"`
	}
	type out struct {
		Message string `json:"message"`
	}
	w := orbit.NewWorker(orbit.Options{WorkerID: "greeter-go"})
	w.Task("greeting.compose", "1.0.0", orbit.Typed(func(ctx context.Context, t *orbit.Task, i in) (out, error) {
		orbit.Logf(ctx, "greeting %s", i.Name)
		return out{Message: "Hello, " + i.Name}, nil
	}))
	fmt.Println("registered")
	// Output: registered
}

// Mutual TLS with a per-worker identity.
func ExampleNewWorker_tls() {
	w := orbit.NewWorker(orbit.Options{
		WorkerID:       "payments-1",
		Server:         "https://orbit.internal:7233",
		CACertFile:     "/etc/orbit/ca.pem",
		ClientCertFile: "/etc/orbit/payments-1.pem",
		ClientKeyFile:  "/etc/orbit/payments-1.key",
	})
	_ = w
}
