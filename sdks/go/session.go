package orbit

import (
	"context"
	"fmt"
	"sync"
	"time"
)

const defaultHeartbeatInterval = 5 * time.Second

// extResultThenPoll is the runtime's worker protocol extension that lets a
// result carry the next poll (docs/worker-protocol.md in the ORBIT repository).
const extResultThenPoll = "result-then-poll"

// session holds the worker session every goroutine of a run uses. After a
// runtime restart they all get UNKNOWN_SESSION at about the same time; renew
// lets the first register again and the others pick up its session.
type session struct {
	run          *runState
	announcement map[string]any

	mu       sync.Mutex // held while registering
	id       string
	interval time.Duration
	// Whether the runtime offered result-then-poll at the last registration.
	resultThenPoll bool
}

type registration struct {
	WorkerSessionID     string   `json:"worker_session_id"`
	HeartbeatIntervalMs int64    `json:"heartbeat_interval_ms"`
	Warnings            []string `json:"warnings"`
	Extensions          []string `json:"extensions"`
}

// nextPoll is the poll a result may carry: the session and the wait, or
// false when the runtime does not offer result-then-poll.
func (s *session) nextPoll() (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id, s.resultThenPoll
}

func (s *session) current() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

func (s *session) heartbeatInterval() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.interval <= 0 {
		return defaultHeartbeatInterval
	}
	return s.interval
}

// open registers for the first time: outages are waited out, refusals
// returned, and ctx ending first is an *APIError too.
func (s *session) open(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.register(ctx, true)
}

// renew registers again unless another goroutine already replaced lostID.
func (s *session) renew(ctx context.Context, lostID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.id != lostID {
		return
	}
	s.run.logger.Printf("worker session is unknown to the runtime; registering again")
	_ = s.register(ctx, false)
}

func (s *session) register(ctx context.Context, refusalsAreFatal bool) error {
	b := newBackoff(s.run.random)
	var last *APIError
	for {
		if ctx.Err() != nil {
			message := "the context ended before the worker registered"
			if last != nil {
				message += ": " + last.Error()
			}
			return &APIError{Code: "CONNECTION", Message: message}
		}
		var answer registration
		_, err := s.run.client.post(ctx, pathRegister, s.announcement, callTimeout, &answer)
		if err == nil {
			s.run.contact.answered()
			s.id = answer.WorkerSessionID
			s.interval = time.Duration(answer.HeartbeatIntervalMs) * time.Millisecond
			// Read anew each time: a runtime restarted with other settings may offer less.
			s.resultThenPoll = false
			for _, name := range answer.Extensions {
				s.resultThenPoll = s.resultThenPoll || name == extResultThenPoll
			}
			contracts := s.announcement["contracts"].([]map[string]any)
			s.run.logger.Printf("worker %s registered (%d tasks)", s.announcement["worker_id"], len(contracts))
			for _, warning := range answer.Warnings {
				s.run.logger.Printf("runtime: %s", warning)
			}
			return nil
		}
		last = err.(*APIError)
		if refusalsAreFatal && !last.transient() && ctx.Err() == nil {
			return last
		}
		// A refusal after a restart may be a configuration being fixed on
		// the runtime's side, so once running it is retried like an outage.
		delay := b.next()
		if ctx.Err() == nil {
			line := fmt.Sprintf("registration failed: %v; retrying in %v", last, delay.Round(time.Millisecond))
			if unavailable(last.Status) {
				s.run.contact.failed(line)
			} else {
				s.run.contact.answered()
				s.run.logger.Print(line)
			}
		}
		sleep(ctx, delay)
	}
}
