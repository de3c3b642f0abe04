package orbit

import (
	"math/rand"
	"time"
)

// Retry delays: a ceiling that starts at 200 ms and doubles up to 5 s, each
// delay drawn uniformly below it (full jitter), as in the other SDKs. Without
// the jitter, every worker that lost the runtime at the same moment would
// come back in step and meet it as one burst, again and again.
const (
	initialDelay = 200 * time.Millisecond
	maxDelay     = 5 * time.Second
)

// randomSource returns a float in [0, 1); tests replace it to fix delays.
type randomSource func() float64

type backoff struct {
	ceiling time.Duration
	random  randomSource
}

func newBackoff(random randomSource) *backoff {
	if random == nil {
		random = rand.Float64
	}
	return &backoff{ceiling: initialDelay, random: random}
}

func (b *backoff) next() time.Duration {
	ceiling := b.ceiling
	b.ceiling *= 2
	if b.ceiling > maxDelay {
		b.ceiling = maxDelay
	}
	f := b.random()
	if f < 0 {
		f = 0
	} else if f > 1 {
		f = 1
	}
	return time.Duration(float64(ceiling) * f)
}

func (b *backoff) reset() { b.ceiling = initialDelay }
