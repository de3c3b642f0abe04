package orbit

import (
	"context"
	"testing"
	"time"
)

func echoTask(w *Worker) {
	w.Task("echo", "1.0.0", func(ctx context.Context, tk *Task) (any, error) {
		return map[string]any{"ok": true}, nil
	})
}

func TestResultsCarryTheNextPollWhenOffered(t *testing.T) {
	f := newFakeRuntime(t)
	f.extensions = []string{extResultThenPoll}
	w, logs := newTestWorker(f, 1)
	echoTask(w)
	for _, token := range []string{"tok-1", "tok-2", "tok-3"} {
		f.queue(task(token, "echo", `{}`))
	}
	s := start(t, w, logs)
	for _, want := range []string{"tok-1", "tok-2", "tok-3"} {
		r := f.result()
		if r.Body["token"] != want {
			t.Fatalf("result for %v, want %s", r.Body["token"], want)
		}
		poll, ok := r.Body["poll"].(map[string]any)
		if !ok || poll["worker_session_id"] != "session-1" || poll["wait_ms"] != float64(200) {
			t.Fatalf("poll = %v", r.Body["poll"])
		}
	}
	if err := s.shutdown(t); err != nil {
		t.Fatal(err)
	}
	// One poll found the first task; each result's answer brought the next.
	if n := len(f.seen(pathPoll)); n != 1 {
		t.Fatalf("%d polls, want 1", n)
	}
	asked := f.seen(pathRegister)[0]["extensions"].([]any)
	if len(asked) != 1 || asked[0] != extResultThenPoll {
		t.Fatalf("registration asked for %v", asked)
	}
}

func TestResultsAreTheBooksWhenNotOffered(t *testing.T) {
	f := newFakeRuntime(t)
	w, logs := newTestWorker(f, 1)
	echoTask(w)
	f.queue(task("tok-1", "echo", `{}`))
	f.queue(task("tok-2", "echo", `{}`))
	s := start(t, w, logs)
	for i := 0; i < 2; i++ {
		if r := f.result(); r.Body["poll"] != nil {
			t.Fatalf("result carries a poll: %v", r.Body)
		}
	}
	if err := s.shutdown(t); err != nil {
		t.Fatal(err)
	}
	if n := len(f.seen(pathPoll)); n < 2 {
		t.Fatalf("%d polls, want at least 2", n)
	}
}

func TestARefusedResultLosesNoTask(t *testing.T) {
	f := newFakeRuntime(t)
	f.extensions = []string{extResultThenPoll}
	refusals := 1
	f.on(pathComplete, func(body map[string]any) (int, any, bool) {
		if refusals == 0 {
			return 0, nil, false
		}
		refusals--
		return 400, map[string]any{"error": map[string]any{"code": "INVALID_INPUT", "message": "too deep"}}, true
	})
	w, logs := newTestWorker(f, 1)
	echoTask(w)
	f.queue(task("tok-1", "echo", `{}`))
	f.queue(task("tok-2", "echo", `{}`))
	s := start(t, w, logs)
	// The refused report took no task; the failure sent in its place
	// carries the poll, which brings the second task.
	first := f.result()
	if first.Path != pathFail || first.Body["token"] != "tok-1" || first.Body["poll"] == nil {
		t.Fatalf("first = %+v", first)
	}
	if second := f.result(); second.Path != pathComplete || second.Body["token"] != "tok-2" {
		t.Fatalf("second = %+v", second)
	}
	if err := s.shutdown(t); err != nil {
		t.Fatal(err)
	}
}

func TestShutdownDoesNotWaitForAResultsPoll(t *testing.T) {
	f := newFakeRuntime(t)
	f.extensions = []string{extResultThenPoll}
	w, logs := newTestWorker(f, 1)
	w.settings.pollWait = 20 * time.Second
	echoTask(w)
	f.queue(task("tok-1", "echo", `{}`))
	s := start(t, w, logs)
	if r := f.result(); r.Body["poll"] == nil {
		t.Fatalf("result = %v", r.Body)
	}
	began := time.Now()
	if err := s.shutdown(t); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > 3*time.Second {
		t.Fatalf("shutdown took %v", took)
	}
	// Sent again without the poll once shutdown had begun.
	if again := f.result(); again.Body["poll"] != nil || again.Body["token"] != "tok-1" {
		t.Fatalf("again = %v", again.Body)
	}
}
