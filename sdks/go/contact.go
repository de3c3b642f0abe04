package orbit

import (
	"fmt"
	"log"
	"sync"
	"time"
)

// What a worker logs while the runtime is away: one line, then fewer and
// fewer, then one line when it answers again.
//
// Every poll goroutine, the heartbeat loop, registration and each result
// being delivered retry on their own while the runtime (or its database)
// cannot answer. Logged one line per retry, a worker with four poll
// goroutines wrote dozens of lines a minute through an outage, burying the
// rest of its log. The polls, the heartbeat and registration share one
// contact instead, and each result being delivered has one of its own (a
// runtime that answers polls may still fail to store one execution's result,
// and that must not read as the runtime coming and going):
//
//   - the first failure after the runtime last answered is logged as it is;
//   - the failures after it are not logged, except one reminder when the next
//     one is due: reminderFirst after the loss, then at intervals doubling up
//     to reminderMax, each saying how long the runtime has been away and how
//     many lines were left out;
//   - the first answer after that is logged once ("runtime reachable again
//     after 12.3s", or the owner's back line).
//
// A *log.Logger has no levels, so the lines left out are only counted, as in
// the TypeScript SDK. Only failures that mean "the runtime is away" (no
// answer, 5xx, 408, 429) come here; a refusal is about the request and is
// logged where it happens.
const (
	reminderFirst = 10 * time.Second
	reminderMax   = 10 * time.Minute
)

type contact struct {
	logger *log.Logger
	clock  func() time.Time
	// back is the line logged when the runtime answers after away.
	back func(away time.Duration) string

	mu           sync.Mutex
	lost         bool
	lostAt       time.Time
	gap          time.Duration
	nextReminder time.Time
	leftOut      int
}

func newContact(logger *log.Logger, back func(time.Duration) string) *contact {
	if back == nil {
		back = func(away time.Duration) string {
			return fmt.Sprintf("runtime reachable again after %.1fs", away.Seconds())
		}
	}
	return &contact{logger: logger, clock: time.Now, back: back}
}

// failed logs line, about a call the runtime did not answer, if it is due.
func (c *contact) failed(line string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock()
	if !c.lost {
		c.lost, c.lostAt = true, now
		c.gap = reminderFirst
		c.nextReminder = now.Add(c.gap)
		c.leftOut = 0
		c.logger.Print(line)
		return
	}
	if now.Before(c.nextReminder) {
		c.leftOut++
		return
	}
	c.logger.Printf("%s (runtime unreachable for %.0fs; %d similar lines not logged)",
		line, now.Sub(c.lostAt).Seconds(), c.leftOut)
	c.gap = min(c.gap*2, reminderMax)
	c.nextReminder = now.Add(c.gap)
	c.leftOut = 0
}

// answered notes an answer from the runtime; it logs the end of an outage once.
func (c *contact) answered() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.lost {
		return
	}
	c.lost = false
	c.logger.Print(c.back(c.clock().Sub(c.lostAt)))
}
