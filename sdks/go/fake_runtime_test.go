package orbit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeRuntime is a scripted runtime: it queues tasks for polls, records every
// request, and lets a test answer any path its own way first.
type fakeRuntime struct {
	t      *testing.T
	server *httptest.Server

	mu        sync.Mutex
	sessions  int
	requests  []request
	tasks     chan map[string]any
	cancel    []string
	override  map[string]func(body map[string]any) (int, any, bool)
	results   chan request
	unregistd chan string
	// Worker protocol extensions offered to a worker that asks (none: the
	// book's protocol).
	extensions []string
}

type request struct {
	Path string
	Body map[string]any
}

func newFakeRuntime(t *testing.T) *fakeRuntime {
	f := unstartedFakeRuntime(t)
	f.server.Start()
	return f
}

// unstartedFakeRuntime lets a test configure TLS before starting it.
func unstartedFakeRuntime(t *testing.T) *fakeRuntime {
	f := &fakeRuntime{
		t:         t,
		tasks:     make(chan map[string]any, 16),
		override:  map[string]func(map[string]any) (int, any, bool){},
		results:   make(chan request, 16),
		unregistd: make(chan string, 4),
	}
	f.server = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.server.Close)
	return f
}

func (f *fakeRuntime) on(path string, fn func(body map[string]any) (int, any, bool)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.override[path] = fn
}

func (f *fakeRuntime) queue(task map[string]any) { f.tasks <- task }

func (f *fakeRuntime) cancelNext(token string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancel = append(f.cancel, token)
}

func (f *fakeRuntime) seen(path string) []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	var bodies []map[string]any
	for _, r := range f.requests {
		if r.Path == path {
			bodies = append(bodies, r.Body)
		}
	}
	return bodies
}

func (f *fakeRuntime) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		http.Error(w, "not JSON", http.StatusBadRequest)
		return
	}
	if r.Header.Get("content-type") != "application/json" {
		http.Error(w, "content type", http.StatusUnsupportedMediaType)
		return
	}
	f.mu.Lock()
	f.requests = append(f.requests, request{r.URL.Path, body})
	override := f.override[r.URL.Path]
	f.mu.Unlock()
	if override != nil {
		if status, answer, ok := override(body); ok {
			reply(w, status, answer)
			return
		}
	}
	switch r.URL.Path {
	case pathRegister:
		f.mu.Lock()
		f.sessions++
		id := fmt.Sprintf("session-%d", f.sessions)
		f.mu.Unlock()
		answer := map[string]any{"accepted": true, "worker_session_id": id, "heartbeat_interval_ms": 50, "session_timeout_ms": 300, "warnings": []string{"no workflow uses x@1"}}
		if asked, ok := body["extensions"].([]any); ok {
			offered := []string{}
			for _, name := range f.offered() {
				for _, a := range asked {
					if a == name {
						offered = append(offered, name)
					}
				}
			}
			answer["extensions"] = offered
		}
		reply(w, 200, answer)
	case pathPoll:
		if task, ok := f.waitTask(r.Context(), body); ok {
			reply(w, 200, task)
		} else if r.Context().Err() == nil {
			w.WriteHeader(http.StatusNoContent)
		}
	case pathHeartbeat:
		f.mu.Lock()
		cancel := f.cancel
		f.cancel = nil
		f.mu.Unlock()
		if cancel == nil {
			cancel = []string{}
		}
		reply(w, 200, map[string]any{"accepted": true, "cancel": cancel})
	case pathComplete, pathFail:
		f.results <- request{r.URL.Path, body}
		poll, ok := body["poll"].(map[string]any)
		if !ok || !f.offers(extResultThenPoll) {
			reply(w, 200, map[string]any{"accepted": true})
			return
		}
		task, found := f.waitTask(r.Context(), poll)
		if r.Context().Err() != nil {
			return
		}
		answer := map[string]any{"accepted": true, "task": nil}
		if found {
			answer["task"] = task
		}
		reply(w, 200, answer)
	case pathUnregister:
		reply(w, 200, map[string]any{"accepted": true})
		f.unregistd <- body["worker_session_id"].(string)
	default:
		reply(w, 404, map[string]any{"error": map[string]any{"code": "NOT_FOUND", "message": r.URL.Path}})
	}
}

func (f *fakeRuntime) offered() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.extensions
}

func (f *fakeRuntime) offers(name string) bool {
	for _, offered := range f.offered() {
		if offered == name {
			return true
		}
	}
	return false
}

// waitTask is a poll: the next queued task, waiting up to the body's wait_ms.
func (f *fakeRuntime) waitTask(ctx context.Context, body map[string]any) (map[string]any, bool) {
	wait := time.Duration(body["wait_ms"].(float64)) * time.Millisecond
	select {
	case task := <-f.tasks:
		return task, true
	case <-time.After(wait):
	case <-ctx.Done():
	}
	return nil, false
}

func reply(w http.ResponseWriter, status int, body any) {
	w.Header().Set("content-type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// result waits for the next complete or fail the worker sent.
func (f *fakeRuntime) result() request {
	f.t.Helper()
	select {
	case r := <-f.results:
		return r
	case <-time.After(10 * time.Second):
		f.t.Fatal("no result was reported")
		return request{}
	}
}

func task(token, name string, input string) map[string]any {
	return map[string]any{
		"token": token, "execution_id": "ex-1", "workflow": "W", "workflow_version": "1.0.0",
		"step_id": "s", "task_name": name, "contract_version": "1.0.0",
		"input": json.RawMessage(input), "idempotency_key": "ex-1/s", "attempt": 1, "redelivery": false,
	}
}

// safeBuffer is a log destination the worker's goroutines and the test share.
type safeBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *safeBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *safeBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// started is a running worker under test.
type started struct {
	worker *Worker
	logs   *safeBuffer
	stop   context.CancelFunc
	done   chan struct{} // closed when Run returned, with err set
	err    error
}

func (s *started) shutdown(t *testing.T) error {
	t.Helper()
	s.stop()
	select {
	case <-s.done:
		return s.err
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
		return nil
	}
}

func newTestWorker(f *fakeRuntime, concurrency int) (*Worker, *safeBuffer) {
	logs := &safeBuffer{}
	w := NewWorker(Options{
		WorkerID:    "go-test",
		Server:      f.server.URL,
		Token:       "secret",
		Concurrency: concurrency,
		PollWait:    200 * time.Millisecond,
		Logger:      log.New(logs, "[orbit] ", 0),
	})
	w.random = func() float64 { return 0.01 }
	return w, logs
}

func start(t *testing.T, w *Worker, logs *safeBuffer) *started {
	ctx, cancel := context.WithCancel(context.Background())
	s := &started{worker: w, logs: logs, stop: cancel, done: make(chan struct{})}
	go func() {
		s.err = w.Run(ctx)
		close(s.done)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
		}
	})
	return s
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func logged(s *started, text string) func() bool {
	return func() bool { return strings.Contains(s.logs.String(), text) }
}

func newLogger(w io.Writer) *log.Logger { return log.New(w, "[orbit] ", 0) }
