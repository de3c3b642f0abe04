package orbit

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

type registered struct {
	version string
	handler Handler
}

// Worker runs task handlers for an ORBIT runtime. Create it with NewWorker,
// register tasks with Task, then call Run.
type Worker struct {
	settings settings
	handlers map[string]registered
	running  atomic.Bool
	// random draws the jitter of retry delays; tests fix it.
	random randomSource
}

// NewWorker returns a worker with opts' settings, defaults and environment
// applied. Problems with TLS files are logged, not returned: see Options.
func NewWorker(opts Options) *Worker {
	return &Worker{settings: resolve(opts), handlers: map[string]registered{}}
}

// Task registers handler for name@version and returns the worker. It panics
// when name is already registered, or when called while Run runs.
func (w *Worker) Task(name, version string, handler Handler) *Worker {
	if w.running.Load() {
		panic("orbit: register every task before calling Run")
	}
	if handler == nil {
		panic(fmt.Sprintf("orbit: the handler for %q is nil", name))
	}
	if _, dup := w.handlers[name]; dup {
		panic(fmt.Sprintf("orbit: task %q is already registered", name))
	}
	w.handlers[name] = registered{version: version, handler: handler}
	return w
}

// Run registers, polls and runs tasks until ctx ends. Then it aborts the open
// long polls, cancels the running handlers' contexts, waits for them to
// return, delivers their results, unregisters and returns nil.
//
// It returns an error when no task is registered, and an *APIError when the
// runtime refuses the registration or ctx ends before registration succeeds
// (connection errors and 5xx answers are retried meanwhile).
func (w *Worker) Run(ctx context.Context) error {
	if len(w.handlers) == 0 {
		return errors.New("orbit: no task is registered; call Task before Run")
	}
	if !w.running.CompareAndSwap(false, true) {
		return errors.New("orbit: this worker is already running")
	}
	defer w.running.Store(false)
	run := &runState{
		worker:   w,
		client:   newClient(w.settings),
		logger:   w.settings.logger,
		random:   w.random,
		inflight: map[string]held{},
	}
	run.session = &session{run: run, announcement: w.announcement()}
	if err := run.session.open(ctx); err != nil {
		return err
	}
	run.serve(ctx)
	return nil
}

func (w *Worker) announcement() map[string]any {
	names := make([]string, 0, len(w.handlers))
	for name := range w.handlers {
		names = append(names, name)
	}
	sort.Strings(names)
	contracts := make([]map[string]string, 0, len(names))
	for _, name := range names {
		contracts = append(contracts, map[string]string{"task_name": name, "contract_version": w.handlers[name].version})
	}
	return map[string]any{
		"worker_id": w.settings.workerID,
		"runtime":   w.settings.runtime,
		"sdk":       "orbit-go/" + Version,
		"contracts": contracts,
	}
}

// runState is one call of Run: its session, and the attempts it holds.
type runState struct {
	worker  *Worker
	client  *client
	logger  *log.Logger
	random  randomSource
	session *session

	mu       sync.Mutex
	inflight map[string]held
}

// held is an attempt a handler is running, and how to cancel it.
type held struct {
	task   *Task
	cancel context.CancelCauseFunc
}

func (r *runState) serve(ctx context.Context) {
	rep := &reporter{client: r.client, run: r}
	var polls sync.WaitGroup
	for i := 0; i < r.worker.settings.concurrency; i++ {
		polls.Add(1)
		go func() {
			defer polls.Done()
			r.pollLoop(ctx, rep)
		}()
	}
	beats := make(chan struct{})
	go func() {
		defer close(beats)
		r.heartbeatLoop(ctx)
	}()
	<-ctx.Done()
	r.mu.Lock()
	running := len(r.inflight)
	r.mu.Unlock()
	r.logger.Printf("shutting down: stopped polling; %d running task(s) cancelled, waiting for them to return", running)
	polls.Wait()
	<-beats
	r.unregister()
}

func (r *runState) pollLoop(ctx context.Context, rep *reporter) {
	b := newBackoff(r.random)
	wait := r.worker.settings.pollWait
	lostSession := false
	for ctx.Err() == nil {
		id := r.session.current()
		var task Task
		status, err := r.client.post(ctx, pathPoll,
			map[string]any{"worker_session_id": id, "wait_ms": wait.Milliseconds()},
			wait+callTimeout, &task)
		if err != nil {
			if ctx.Err() != nil {
				return // the poll was aborted by shutdown
			}
			apiErr := err.(*APIError)
			if apiErr.unknownSession() {
				r.session.renew(ctx, id)
				// A runtime that forgets every new session must not be
				// hammered: only the first loss in a row is retried at once.
				if lostSession {
					sleep(ctx, b.next())
				}
				lostSession = true
				continue
			}
			delay := b.next()
			r.logger.Printf("poll failed: %v; retrying in %v", apiErr, delay.Round(time.Millisecond))
			sleep(ctx, delay)
			continue
		}
		b.reset()
		lostSession = false
		if status == 204 {
			continue
		}
		if ctx.Err() != nil {
			// Unregistering hands the attempt back, and the runtime
			// redelivers it at once.
			r.logger.Printf("shutting down: not starting %s; unregistering hands it back", describe(&task))
			return
		}
		r.execute(ctx, rep, &task)
	}
}

func (r *runState) execute(runCtx context.Context, rep *reporter, t *Task) {
	// Detached from Run's cancellation (its values are kept) so that Run's
	// context ending cancels the handler with ErrShutdown as the cause.
	handlerCtx, cancel := context.WithCancelCause(context.WithoutCancel(runCtx))
	defer cancel(nil)
	stop := context.AfterFunc(runCtx, func() { cancel(ErrShutdown) })
	defer stop()
	ctx := context.Context(handlerCtx)
	if t.DeadlineMs != nil {
		var cancelDeadline context.CancelFunc
		ctx, cancelDeadline = context.WithDeadline(ctx, time.UnixMilli(*t.DeadlineMs))
		defer cancelDeadline()
	}
	ctx = context.WithValue(ctx, attemptKey{}, &attemptInfo{task: t, logger: r.logger})

	r.mu.Lock()
	r.inflight[t.Token] = held{task: t, cancel: cancel}
	r.mu.Unlock()
	var o outcome
	if reg, ok := r.worker.handlers[t.TaskName]; ok && reg.version == t.ContractVersion {
		o = runHandler(ctx, reg.handler, t)
	} else {
		message := fmt.Sprintf("this worker does not serve %s@%s", t.TaskName, t.ContractVersion)
		o = failed(t.Token, "UNKNOWN_TASK", message, true, nil)
	}
	r.mu.Lock()
	delete(r.inflight, t.Token)
	r.mu.Unlock()
	rep.deliver(t, o)
}

func (r *runState) heartbeatLoop(ctx context.Context) {
	for {
		if !sleep(ctx, r.session.heartbeatInterval()) {
			return
		}
		id := r.session.current()
		var answer struct {
			Cancel []string `json:"cancel"`
		}
		_, err := r.client.post(ctx, pathHeartbeat, map[string]any{"worker_session_id": id}, callTimeout, &answer)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if apiErr := err.(*APIError); apiErr.unknownSession() {
				r.session.renew(ctx, id)
			} else {
				r.logger.Printf("heartbeat failed: %v", apiErr)
			}
			continue
		}
		for _, token := range answer.Cancel {
			r.cancel(token)
		}
	}
}

func (r *runState) cancel(token string) {
	r.mu.Lock()
	h, ok := r.inflight[token]
	r.mu.Unlock()
	if ok && h.task != nil {
		r.logger.Printf("the runtime cancelled %s", describe(h.task))
		h.cancel(ErrCancelledByRuntime)
	}
}

func (r *runState) unregister() {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	var answer ack
	_, err := r.client.post(ctx, pathUnregister, map[string]any{"worker_session_id": r.session.current()}, callTimeout, &answer)
	// An unknown session holds no attempts, so there is nothing to hand back.
	if err != nil && !err.(*APIError).unknownSession() {
		r.logger.Printf("unregister failed: %v", err)
		return
	}
	r.logger.Printf("worker %s unregistered", r.worker.settings.workerID)
}

// sleep waits d or until ctx ends; it reports whether the full wait passed.
func sleep(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}
