package poller

import (
	"time"

	"github.com/oncebox/watermill-oncebox"
)

// strategy computes the delay before the next poll from the outcome of the
// last one.
//
// Adaptive: after a full batch the delay is min; after a partial or empty one
// it is the current delay, which then grows by multiplier up to max. From an
// idle start the waits are min, min×m, min×m², … — with the defaults 250ms,
// 375ms, 562.5ms, …, reaching the 1m cap after about 3.4 minutes of idleness.
// Fixed: always min.
type strategy struct {
	fixed      bool
	min, max   time.Duration
	multiplier float64
	current    time.Duration
}

func newStrategy(p oncebox.PollingSettings) *strategy {
	return &strategy{
		fixed:      p.Type == oncebox.PollingFixed,
		min:        p.MinFixedDelay,
		max:        p.MaxFixedDelay,
		multiplier: p.Multiplier,
		current:    p.MinFixedDelay,
	}
}

// next returns the delay after a poll; busy reports a full batch (or, for a
// job, a run that found work).
func (s *strategy) next(busy bool) time.Duration {
	if s.fixed {
		return s.min
	}
	if busy {
		s.current = s.min
		return s.min
	}
	d := s.current
	grown := time.Duration(float64(s.current) * s.multiplier)
	if grown > s.max || grown < s.current { // the second test catches overflow
		grown = s.max
	}
	s.current = grown
	return min(d, s.max)
}
