package orbit

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type fakeClock struct{ now time.Time }

func (c *fakeClock) read() time.Time { return c.now }

func quietContact(buf *bytes.Buffer) (*contact, *fakeClock) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	c := newContact(newLogger(buf), nil)
	c.clock = clock.read
	return c, clock
}

func lines(text string) []string {
	return strings.Split(strings.TrimSuffix(text, "\n"), "\n")
}

func TestOneLineOnLossRemindersBackOffAndOneLineOnReturn(t *testing.T) {
	var buf bytes.Buffer
	c, clock := quietContact(&buf)
	c.answered()              // nothing was lost: nothing to say
	for i := 0; i < 70; i++ { // seventy seconds of retries, one a second
		c.failed("poll failed: down; retrying in 1s")
		clock.now = clock.now.Add(time.Second)
	}
	c.answered()
	c.answered()
	want := []string{
		"[orbit] poll failed: down; retrying in 1s",
		"[orbit] poll failed: down; retrying in 1s (runtime unreachable for 10s; 9 similar lines not logged)",
		"[orbit] poll failed: down; retrying in 1s (runtime unreachable for 30s; 19 similar lines not logged)",
		"[orbit] runtime reachable again after 70.0s",
	}
	if got := lines(buf.String()); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("logged:\n%s", buf.String())
	}
	buf.Reset()
	c.failed("heartbeat failed: down again")
	if buf.String() != "[orbit] heartbeat failed: down again\n" {
		t.Fatalf("logged:\n%s", buf.String())
	}
}

func TestRemindersAreAtMostTenMinutesApart(t *testing.T) {
	var buf bytes.Buffer
	c, clock := quietContact(&buf)
	for i := 0; i < 3*3600/5; i++ { // three hours, a retry every 5 s
		c.failed("poll failed")
		clock.now = clock.now.Add(5 * time.Second)
	}
	var away []int
	for _, line := range lines(buf.String())[1:] {
		n, err := strconv.Atoi(strings.SplitN(strings.SplitN(line, "for ", 2)[1], "s;", 2)[0])
		if err != nil {
			t.Fatal(line)
		}
		away = append(away, n)
	}
	// 10 s after the loss, then twice as far apart each time, up to 600 s.
	want := []int{10, 30, 70, 150, 310, 630, 1230, 1830}
	for i, n := range want {
		if away[i] != n {
			t.Fatalf("reminders at %v", away)
		}
	}
	for i := 7; i < len(away); i++ {
		if away[i]-away[i-1] != 600 {
			t.Fatalf("reminders at %v", away)
		}
	}
}

func TestAWorkerLogsAnOutageOnceAndItsEndOnce(t *testing.T) {
	f := newFakeRuntime(t)
	w, logs := newTestWorker(f, 4)
	w.Task("x", "1.0.0", func(context.Context, *Task) (any, error) { return nil, nil })
	var down atomic.Bool
	var refused atomic.Int32
	unavailable := func(map[string]any) (int, any, bool) {
		if !down.Load() {
			return 0, nil, false
		}
		refused.Add(1)
		return 503, map[string]any{"error": map[string]any{"code": "UNAVAILABLE", "message": "down"}}, true
	}
	f.on(pathPoll, unavailable)
	f.on(pathHeartbeat, unavailable)
	// Down from the first poll on: a long poll made before would be answered
	// in the middle of the outage.
	down.Store(true)
	s := start(t, w, logs)
	// Four poll goroutines and the heartbeat retry many times meanwhile.
	waitFor(t, "retries", func() bool { return refused.Load() >= 30 })
	down.Store(false)
	waitFor(t, "the runtime's return", logged(s, "runtime reachable again after "))
	f.queue(task("tok-q", "x", `{}`))
	f.result()
	text := logs.String()
	if n := strings.Count(text, "poll failed: ") + strings.Count(text, "heartbeat failed: "); n != 1 {
		t.Fatalf("%d failure lines:\n%s", n, text)
	}
	if n := strings.Count(text, "runtime reachable again"); n != 1 {
		t.Fatalf("%d return lines:\n%s", n, text)
	}
}

// Polls are answered while this one result is not: the worker's contact with
// the runtime is fine, and only the result's own lines are quiet.
func TestAResultTheRuntimeKeepsFailingIsLoggedOnceAndOnceDelivered(t *testing.T) {
	f := newFakeRuntime(t)
	w, logs := newTestWorker(f, 1)
	w.Task("x", "1.0.0", func(context.Context, *Task) (any, error) { return nil, nil })
	var mu sync.Mutex
	calls := 0
	f.on(pathComplete, func(map[string]any) (int, any, bool) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		return 500, map[string]any{"error": map[string]any{"code": "STORAGE_ERROR", "message": "not loaded"}}, calls <= 6
	})
	s := start(t, w, logs)
	f.queue(task("tok-s", "x", `{}`))
	f.result()
	waitFor(t, "delivery", logged(s, "delivered after"))
	text := logs.String()
	if n := strings.Count(text, "cannot deliver the result for execution=ex-1 step=s attempt=1 task=x: STORAGE_ERROR (500): not loaded"); n != 1 {
		t.Fatalf("%d failure lines:\n%s", n, text)
	}
	if !strings.Contains(text, "[orbit] result for execution=ex-1 step=s attempt=1 task=x delivered after ") ||
		!strings.Contains(text, "s of retries\n") || strings.Contains(text, "runtime reachable again") {
		t.Fatalf("logged:\n%s", text)
	}
}
