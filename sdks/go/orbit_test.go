package orbit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestRegistersRunsAndUnregisters(t *testing.T) {
	f := newFakeRuntime(t)
	w, logs := newTestWorker(f, 2)
	type in struct {
		Name string `json:"name"`
	}
	w.Task("greet", "1.0.0", Typed(func(ctx context.Context, tk *Task, i in) (map[string]string, error) {
		return map[string]string{"message": "Hello, " + i.Name}, nil
	})).Task("other", "2.0.0", func(ctx context.Context, tk *Task) (any, error) { return nil, nil })
	s := start(t, w, logs)
	f.queue(task("tok-1", "greet", `{"name":"Ada"}`))
	r := f.result()
	if r.Path != pathComplete || r.Body["token"] != "tok-1" {
		t.Fatalf("result = %+v", r)
	}
	if got := r.Body["output"].(map[string]any)["message"]; got != "Hello, Ada" {
		t.Fatalf("output = %v", got)
	}
	if err := s.shutdown(t); err != nil {
		t.Fatal(err)
	}
	reg := f.seen(pathRegister)[0]
	if reg["worker_id"] != "go-test" || reg["runtime"] != "go" || reg["sdk"] != "orbit-go/"+Version {
		t.Fatalf("registration = %v", reg)
	}
	contracts, _ := json.Marshal(reg["contracts"])
	if string(contracts) != `[{"contract_version":"1.0.0","task_name":"greet"},{"contract_version":"2.0.0","task_name":"other"}]` {
		t.Fatalf("contracts = %s", contracts)
	}
	if got := <-f.unregistd; got != "session-1" {
		t.Fatalf("unregistered %q", got)
	}
	for _, line := range []string{"worker go-test registered (2 tasks)", "runtime: no workflow uses x@1", "worker go-test unregistered"} {
		if !strings.Contains(logs.String(), line) {
			t.Errorf("log lacks %q:\n%s", line, logs)
		}
	}
	poll := f.seen(pathPoll)[0]
	if poll["worker_session_id"] != "session-1" || poll["wait_ms"] != float64(200) {
		t.Fatalf("poll = %v", poll)
	}
}

func TestOutcomes(t *testing.T) {
	details := map[string]any{"limit": 5000}
	cases := []struct {
		name      string
		handler   Handler
		path      string
		code      string
		retryable bool
		output    string
	}{
		{"nil output is {}", func(context.Context, *Task) (any, error) { return nil, nil }, pathComplete, "", false, `{}`},
		{"raw object", func(context.Context, *Task) (any, error) { return json.RawMessage(` {"a":1}`), nil }, pathComplete, "", false, `{"a":1}`},
		{"permanent", func(context.Context, *Task) (any, error) { return nil, Permanent("CARD_DECLINED", "limit exceeded") }, pathFail, "CARD_DECLINED", false, ""},
		{"retryable", func(context.Context, *Task) (any, error) { return nil, Retryable("BANK_UNAVAILABLE", "down") }, pathFail, "BANK_UNAVAILABLE", true, ""},
		{"wrapped", func(context.Context, *Task) (any, error) {
			return nil, fmt.Errorf("charge: %w", &TaskError{Code: "X", Message: "m", Details: details})
		}, pathFail, "X", false, ""},
		{"plain error", func(context.Context, *Task) (any, error) { return nil, errors.New("boom") }, pathFail, "UNHANDLED_EXCEPTION", true, ""},
		{"panic", func(context.Context, *Task) (any, error) { panic("oops") }, pathFail, "PANIC", true, ""},
		{"typed nil map", func(context.Context, *Task) (any, error) { var m map[string]any; return m, nil }, pathFail, "INVALID_RESULT", false, ""},
		{"not an object", func(context.Context, *Task) (any, error) { return []int{1}, nil }, pathFail, "INVALID_RESULT", false, ""},
		{"not JSON", func(context.Context, *Task) (any, error) { return map[string]any{"f": func() {}}, nil }, pathFail, "INVALID_RESULT", false, ""},
		{"bad input", Typed(func(ctx context.Context, t *Task, in struct{ N int }) (any, error) { return nil, nil }), pathFail, "INVALID_INPUT", false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := runHandler(context.Background(), c.handler, &Task{Token: "t", TaskName: "x", Input: json.RawMessage(`{"N":"no"}`)})
			if o.path != c.path {
				t.Fatalf("path = %s body = %v", o.path, o.body)
			}
			if c.path == pathComplete {
				if got := string(o.body["output"].(json.RawMessage)); got != c.output {
					t.Fatalf("output = %s", got)
				}
				return
			}
			if o.body["error_code"] != c.code || o.body["retryable"] != c.retryable {
				t.Fatalf("body = %v", o.body)
			}
		})
	}
	o := runHandler(context.Background(), cases[4].handler, &Task{Token: "t"})
	if string(o.body["details"].(json.RawMessage)) != `{"limit":5000}` || o.body["error_message"] != "m" {
		t.Fatalf("wrapped task error lost its fields: %v", o.body)
	}
}

func TestHeartbeatCancelListCancelsTheHandler(t *testing.T) {
	f := newFakeRuntime(t)
	w, logs := newTestWorker(f, 1)
	causes := make(chan error, 1)
	w.Task("wait", "1.0.0", func(ctx context.Context, tk *Task) (any, error) {
		f.cancelNext(tk.Token)
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return nil, Permanent("CANCELLED", "stopped")
	})
	start(t, w, logs)
	f.queue(task("tok-c", "wait", `{}`))
	if cause := <-causes; !errors.Is(cause, ErrCancelledByRuntime) {
		t.Fatalf("cause = %v", cause)
	}
	if r := f.result(); r.Body["error_code"] != "CANCELLED" {
		t.Fatalf("result = %v", r)
	}
}

func TestDeadlineBecomesTheContextDeadline(t *testing.T) {
	f := newFakeRuntime(t)
	w, logs := newTestWorker(f, 1)
	w.Task("slow", "1.0.0", func(ctx context.Context, tk *Task) (any, error) {
		if _, ok := ctx.Deadline(); !ok {
			return nil, Permanent("NO_DEADLINE", "")
		}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	start(t, w, logs)
	tk := task("tok-d", "slow", `{}`)
	tk["deadline_ms"] = time.Now().Add(100 * time.Millisecond).UnixMilli()
	tk["timeout_ms"] = 100
	f.queue(tk)
	r := f.result()
	if r.Body["error_code"] != "UNHANDLED_EXCEPTION" || r.Body["error_message"] != "context deadline exceeded" {
		t.Fatalf("result = %v", r.Body)
	}
}

func TestShutdownCancelsHandlersDeliversAndThenUnregisters(t *testing.T) {
	f := newFakeRuntime(t)
	w, logs := newTestWorker(f, 1)
	running := make(chan struct{})
	w.Task("long", "1.0.0", func(ctx context.Context, tk *Task) (any, error) {
		close(running)
		<-ctx.Done()
		if !errors.Is(context.Cause(ctx), ErrShutdown) {
			return nil, Permanent("WRONG_CAUSE", fmt.Sprint(context.Cause(ctx)))
		}
		return map[string]any{"finished": true}, nil
	})
	// The result arrives during an outage that ends after shutdown began.
	outage := 3
	f.on(pathComplete, func(map[string]any) (int, any, bool) {
		outage--
		return 503, map[string]any{"error": map[string]any{"code": "UNAVAILABLE", "message": "restarting"}}, outage >= 0
	})
	s := start(t, w, logs)
	f.queue(task("tok-s", "long", `{}`))
	<-running
	if err := s.shutdown(t); err != nil {
		t.Fatal(err)
	}
	if r := f.result(); r.Path != pathComplete || r.Body["output"].(map[string]any)["finished"] != true {
		t.Fatalf("result = %+v", r)
	}
	<-f.unregistd
	var order []string
	f.mu.Lock()
	for _, r := range f.requests {
		if r.Path == pathComplete || r.Path == pathUnregister {
			order = append(order, r.Path)
		}
	}
	f.mu.Unlock()
	want := []string{pathComplete, pathComplete, pathComplete, pathComplete, pathUnregister}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Fatalf("order = %v", order)
	}
}

func TestRefusedResultIsReplacedByAFailure(t *testing.T) {
	f := newFakeRuntime(t)
	w, logs := newTestWorker(f, 1)
	w.Task("x", "1.0.0", func(context.Context, *Task) (any, error) { return map[string]any{"a": 1}, nil })
	f.on(pathComplete, func(map[string]any) (int, any, bool) {
		return 400, map[string]any{"error": map[string]any{"code": "INVALID_REQUEST", "message": "bad output"}}, true
	})
	start(t, w, logs)
	f.queue(task("tok-r", "x", `{}`))
	r := f.result()
	if r.Path != pathFail || r.Body["error_code"] != "INVALID_RESULT" || r.Body["retryable"] != false {
		t.Fatalf("result = %+v", r)
	}
	if d := r.Body["details"].(map[string]any); d["refused"] != "complete" || d["status"] != float64(400) {
		t.Fatalf("details = %v", d)
	}
}

// A storage outage of a few seconds answers every report 500 until the
// database is back; giving up would leave the attempt to a worker that keeps
// heartbeating, so the runtime would never redeliver it.
func TestServerErrorsAreRetriedUntilTheRuntimeTakesTheResult(t *testing.T) {
	for _, path := range []string{pathComplete, pathFail} {
		t.Run(path, func(t *testing.T) {
			f := newFakeRuntime(t)
			w, logs := newTestWorker(f, 1)
			w.Task("x", "1.0.0", func(context.Context, *Task) (any, error) {
				if path == pathFail {
					return nil, Retryable("E", "m")
				}
				return map[string]any{"n": 2}, nil
			})
			var mu sync.Mutex
			calls := 0
			f.on(path, func(map[string]any) (int, any, bool) {
				mu.Lock()
				defer mu.Unlock()
				calls++
				status := []int{500, 500, 500, 500, 500, 501, 500}
				if calls > len(status) {
					return 0, nil, false
				}
				return status[calls-1], map[string]any{"error": map[string]any{"code": "STORAGE_ERROR", "message": "db down"}}, true
			})
			start(t, w, logs)
			f.queue(task("tok-u", "x", `{}`))
			r := f.result()
			mu.Lock()
			defer mu.Unlock()
			if r.Path != path || calls != 8 {
				t.Fatalf("result = %+v after %d calls", r, calls)
			}
			if path == pathFail && r.Body["error_code"] != "E" {
				t.Fatalf("result = %+v", r)
			}
		})
	}
}

func TestARefusalIsSentOnce(t *testing.T) {
	f := newFakeRuntime(t)
	w, logs := newTestWorker(f, 1)
	w.Task("x", "1.0.0", func(context.Context, *Task) (any, error) { return nil, nil })
	var mu sync.Mutex
	calls := 0
	f.on(pathComplete, func(map[string]any) (int, any, bool) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		return 422, "token is missing", true
	})
	start(t, w, logs)
	f.queue(task("tok-r", "x", `{}`))
	if r := f.result(); r.Path != pathFail || r.Body["error_code"] != "INVALID_RESULT" {
		t.Fatalf("result = %+v", r)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 1 {
		t.Fatalf("the refused result was sent %d times", calls)
	}
}

func TestResultOutlivesAConnectionOutageWithinTheWindow(t *testing.T) {
	f := newFakeRuntime(t)
	w, logs := newTestWorker(f, 1)
	w.Task("x", "1.0.0", func(context.Context, *Task) (any, error) { return nil, nil })
	var calls atomic.Int32
	f.on(pathComplete, func(map[string]any) (int, any, bool) {
		return 502, "bad gateway", calls.Add(1) <= 4
	})
	start(t, w, logs)
	f.queue(task("tok-o", "x", `{}`))
	if r := f.result(); r.Path != pathComplete {
		t.Fatalf("result = %+v", r)
	}
}

func TestResultGivesUpAfterTheWindow(t *testing.T) {
	saved := resultRetryWindow
	resultRetryWindow = 50 * time.Millisecond
	t.Cleanup(func() { resultRetryWindow = saved })
	f := newFakeRuntime(t)
	w, logs := newTestWorker(f, 1)
	w.random = func() float64 { return 0.99 }
	w.Task("x", "1.0.0", func(context.Context, *Task) (any, error) { return nil, nil })
	f.on(pathComplete, func(map[string]any) (int, any, bool) { return 503, "down", true })
	s := start(t, w, logs)
	f.queue(task("tok-g", "x", `{}`))
	waitFor(t, "giving up", logged(s, "not delivered after 50ms of retries"))
}

func TestUnknownSessionRegistersAgain(t *testing.T) {
	f := newFakeRuntime(t)
	w, logs := newTestWorker(f, 3)
	w.Task("x", "1.0.0", func(context.Context, *Task) (any, error) { return nil, nil })
	f.on(pathPoll, func(body map[string]any) (int, any, bool) {
		lost := body["worker_session_id"] == "session-1"
		return 404, map[string]any{"error": map[string]any{"code": "UNKNOWN_SESSION", "message": "register again"}}, lost
	})
	s := start(t, w, logs)
	f.queue(task("tok-n", "x", `{}`))
	if r := f.result(); r.Path != pathComplete {
		t.Fatalf("result = %+v", r)
	}
	waitFor(t, "a heartbeat on the new session", func() bool {
		beats := f.seen(pathHeartbeat)
		return len(beats) > 0 && beats[len(beats)-1]["worker_session_id"] == "session-2"
	})
	// Three poll goroutines lost the session together; one registration.
	if n := len(f.seen(pathRegister)); n != 2 {
		t.Fatalf("%d registrations", n)
	}
	if !strings.Contains(s.logs.String(), "registering again") {
		t.Fatal(s.logs.String())
	}
}

func TestRegistrationRefusedOrNeverAnswered(t *testing.T) {
	f := newFakeRuntime(t)
	w, _ := newTestWorker(f, 1)
	w.Task("orbit.x", "1.0.0", func(context.Context, *Task) (any, error) { return nil, nil })
	f.on(pathRegister, func(map[string]any) (int, any, bool) {
		return 400, map[string]any{"error": map[string]any{"code": "RESERVED_TASK", "message": "built-in"}}, true
	})
	var apiErr *APIError
	if err := w.Run(context.Background()); !errors.As(err, &apiErr) || apiErr.Code != "RESERVED_TASK" || apiErr.Status != 400 {
		t.Fatalf("err = %v", err)
	}

	down, _ := newTestWorker(f, 1)
	down.settings.server = "http://127.0.0.1:1"
	down.Task("x", "1.0.0", func(context.Context, *Task) (any, error) { return nil, nil })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := down.Run(ctx); !errors.As(err, &apiErr) || apiErr.Code != "CONNECTION" {
		t.Fatalf("err = %v", err)
	}

	if err := NewWorker(Options{}).Run(context.Background()); err == nil || !strings.Contains(err.Error(), "no task") {
		t.Fatalf("err = %v", err)
	}
}

func TestTaskPanicsOnADuplicate(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	h := func(context.Context, *Task) (any, error) { return nil, nil }
	NewWorker(Options{}).Task("a", "1", h).Task("a", "2", h)
}

func TestLogfNamesTheAttempt(t *testing.T) {
	f := newFakeRuntime(t)
	w, logs := newTestWorker(f, 1)
	w.Task("x", "1.0.0", func(ctx context.Context, tk *Task) (any, error) {
		Logf(ctx, "charging %d", 42)
		if got, ok := TaskFrom(ctx); !ok || got != tk {
			return nil, Permanent("NO_TASK", "")
		}
		return nil, nil
	})
	start(t, w, logs)
	f.queue(task("tok-l", "x", `{}`))
	if r := f.result(); r.Path != pathComplete {
		t.Fatalf("result = %+v", r)
	}
	if !strings.Contains(logs.String(), "charging 42 execution=ex-1 step=s attempt=1 task=x") {
		t.Fatal(logs.String())
	}
}

func TestSettingsComeFromTheEnvironment(t *testing.T) {
	t.Setenv("ORBIT_SERVER", "http://example.test:9/")
	t.Setenv("ORBIT_WORKER_TOKEN", "")
	t.Setenv("ORBIT_TOKEN", "admin")
	s := resolve(Options{})
	if s.server != "http://example.test:9" || s.token != "admin" || s.concurrency != 4 || s.runtime != "go" || s.pollWait != 20*time.Second || !strings.HasPrefix(s.workerID, "go-") {
		t.Fatalf("settings = %+v", s)
	}
	if s := resolve(Options{Server: "http://x", Token: "w"}); s.server != "http://x" || s.token != "w" {
		t.Fatalf("fields must win: %+v", s)
	}
}

func TestBackoffStaysUnderItsCeiling(t *testing.T) {
	b := newBackoff(func() float64 { return 1 })
	var got []time.Duration
	for i := 0; i < 7; i++ {
		got = append(got, b.next())
	}
	want := "[200ms 400ms 800ms 1.6s 3.2s 5s 5s]"
	if fmt.Sprint(got) != want {
		t.Fatalf("delays = %v", got)
	}
	b.reset()
	if d := b.next(); d != initialDelay {
		t.Fatalf("after reset: %v", d)
	}
}

// A generated contract (orbit codegen --lang go) converts to ContractRef.
type generatedContract struct {
	Name         string
	Version      string
	ContractHash string
	Contract     string
}

func TestAContractAnnouncesItsHash(t *testing.T) {
	f := newFakeRuntime(t)
	w, logs := newTestWorker(f, 1)
	generated := generatedContract{
		Name: "greet", Version: "1.0.0",
		ContractHash: "sha256:" + strings.Repeat("ab", 32),
		Contract:     `{"name":"greet","version":"1.0.0"}`,
	}
	type in struct {
		Name string `json:"name"`
	}
	w.Contract(ContractRef(generated), Typed(func(ctx context.Context, tk *Task, i in) (map[string]string, error) {
		return map[string]string{"message": "Hello, " + i.Name}, nil
	})).Task("other", "2.0.0", func(ctx context.Context, tk *Task) (any, error) { return nil, nil })
	s := start(t, w, logs)
	f.queue(task("tok-1", "greet", `{"name":"Ada"}`))
	if r := f.result(); r.Path != pathComplete {
		t.Fatalf("result = %+v", r)
	}
	if err := s.shutdown(t); err != nil {
		t.Fatal(err)
	}
	contracts, _ := json.Marshal(f.seen(pathRegister)[0]["contracts"])
	want := `[{"contract":{"name":"greet","version":"1.0.0"},"contract_hash":"sha256:` + strings.Repeat("ab", 32) +
		`","contract_version":"1.0.0","task_name":"greet"},{"contract_version":"2.0.0","task_name":"other"}]`
	if string(contracts) != want {
		t.Fatalf("contracts = %s", contracts)
	}
}
