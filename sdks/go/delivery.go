package orbit

import (
	"context"
	"fmt"
	"time"
)

// Result delivery. The runtime reconciles results by token, so a report sent
// twice is harmless and one held through an outage or a restart is still
// accepted afterwards. So:
//
//   - no answer, any 5xx, 408 and 429 mean the runtime, its database or a
//     proxy in front of it is restarting, failing or overloaded: retried
//     with backoff until the runtime answers, for up to resultRetryWindow,
//     shutdown included (Run's context is not the delivery's). Tries are not
//     counted: a worker that gave up while it kept heartbeating would keep
//     the attempt to itself, the runtime would never redeliver it, and a
//     step without a timeout would wait forever after a storage outage of a
//     few seconds;
//   - any other 4xx is the runtime refusing the report, which sending it
//     again cannot change.
//
// A refused report would leave the attempt in flight until its timeout
// (forever without one), so the attempt is reported as failed instead, once,
// with INVALID_RESULT (not retryable). A refusal of the credentials (401,
// 403) gets no fallback: it would be refused the same way. The Python and
// TypeScript SDKs follow the same rules.
//
// When the runtime offers result-then-poll, a report carries the poll loop's
// next poll and its answer may bring the next task: one request per task
// instead of two. The report's rules stay: a refused report took no task, an
// answer without a task sends the loop back to its own poll (which meets a
// lost session as usual), and once Run's context ends a report carries no
// poll; one whose poll is waiting then is ended and sent again without it.

// resultRetryWindow matches the other SDKs: the runtime redelivers an attempt
// whose worker went silent for a session timeout (30 s by default), so a
// result held for much longer is rarely the one that counts. Tests shorten it.
var resultRetryWindow = 10 * time.Minute

const maxMessageChars = 2000

func unavailable(status int) bool {
	return status == 0 || status == 408 || status == 429 || status >= 500
}

type reporter struct {
	client *client
	run    *runState
}

type ack struct {
	Accepted bool   `json:"accepted"`
	Reason   string `json:"reason"`
	// With result-then-poll: the next task; nil when none came or no poll was made.
	Task *Task `json:"task"`
}

// deliver reports o; if the runtime refuses it, it reports a failure instead.
// It returns the next task when an answer brought one (result-then-poll).
func (r *reporter) deliver(runCtx context.Context, t *Task, o outcome) *Task {
	next, refusal := r.send(runCtx, t, o)
	if refusal == nil {
		return next
	}
	if fb, ok := fallbackFor(t, o, refusal); ok {
		r.run.logger.Printf("result for %s refused: %v; reporting the attempt as failed", describe(t), refusal)
		next, refusal = r.send(runCtx, t, fb)
	}
	if refusal != nil {
		r.run.logger.Printf("result for %s refused: %v", describe(t), refusal)
	}
	return next
}

// withPoll is o's body carrying the next poll, when the runtime offers
// result-then-poll and Run's context has not ended; else nil.
func (r *reporter) withPoll(runCtx context.Context, o outcome) map[string]any {
	id, offered := r.run.session.nextPoll()
	if !offered || runCtx.Err() != nil {
		return nil
	}
	body := make(map[string]any, len(o.body)+1)
	for key, value := range o.body {
		body[key] = value
	}
	wait := r.run.worker.settings.pollWait
	body["poll"] = map[string]any{"worker_session_id": id, "wait_ms": wait.Milliseconds()}
	return body
}

// send posts until answered: the next task the answer brought, and the
// refusal, or nil once answered or given up.
func (r *reporter) send(runCtx context.Context, t *Task, o outcome) (*Task, *APIError) {
	b := newBackoff(r.run.random)
	giveUpAt := time.Now().Add(resultRetryWindow)
	// Its own contact: one execution's result failing to store must not read
	// as the runtime coming and going for the polls.
	quiet := newContact(r.run.logger, func(away time.Duration) string {
		return fmt.Sprintf("result for %s delivered after %.1fs of retries", describe(t), away.Seconds())
	})
	for {
		var answer ack
		var err error
		if body := r.withPoll(runCtx, o); body != nil {
			// The wait for a next task ends with Run's context.
			wait := r.run.worker.settings.pollWait
			_, err = r.client.post(runCtx, o.path, body, wait+callTimeout, &answer)
			if err != nil && runCtx.Err() != nil {
				continue // sent again without the poll: a result twice is harmless
			}
		} else {
			// Detached from Run's context: a result finished during shutdown
			// is still worth delivering.
			_, err = r.client.post(context.Background(), o.path, o.body, callTimeout, &answer)
		}
		if err == nil {
			quiet.answered()
			if !answer.Accepted {
				r.run.logger.Printf("result for %s not accepted: %s", describe(t), answer.Reason)
			}
			return answer.Task, nil
		}
		apiErr := err.(*APIError)
		if !unavailable(apiErr.Status) {
			quiet.answered()
			return nil, apiErr
		}
		delay := b.next()
		if time.Now().Add(delay).After(giveUpAt) {
			r.run.logger.Printf("result for %s not delivered after %v of retries: %v", describe(t), resultRetryWindow, apiErr)
			return nil, nil
		}
		quiet.failed(fmt.Sprintf("cannot deliver the result for %s: %v; retrying in %v", describe(t), apiErr, delay.Round(time.Millisecond)))
		time.Sleep(delay)
	}
}

func fallbackFor(t *Task, refused outcome, err *APIError) (outcome, bool) {
	if err.Status == 401 || err.Status == 403 || refused.fallback {
		return outcome{}, false
	}
	details := map[string]any{"refused": "complete"}
	if refused.path == pathFail {
		details["refused"] = "fail"
		details["error_code"] = refused.body["error_code"]
	}
	details["status"] = err.Status
	details["code"] = err.Code
	details["message"] = clip(err.Message)
	message := "the runtime refused the task's result: " + clip(err.Error())
	fb := failed(t.Token, "INVALID_RESULT", message, false, details)
	fb.fallback = true
	return fb, true
}

func clip(text string) string {
	runes := []rune(text)
	if len(runes) <= maxMessageChars {
		return text
	}
	return string(runes[:maxMessageChars-1]) + "…"
}
