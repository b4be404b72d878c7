// Package pacing decides how long the relay's loops and the clean-up jobs
// wait between two runs, and waits on an injectable clock.
package pacing

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/internal/clock"
)

// Strategy computes the delay before the next poll from the outcome of the
// last one.
//
// Adaptive: after a full batch the delay is min; after a partial or empty one
// it is the current delay, which then grows by multiplier up to max. From an
// idle start the waits are min, min×m, min×m², … — with the defaults 250ms,
// 375ms, 562.5ms, …, reaching the 1m cap after about 3.4 minutes of idleness.
// Fixed: always min.
type Strategy struct {
	fixed      bool
	min, max   time.Duration
	multiplier float64
	current    time.Duration
}

// New returns the strategy of the resolved polling settings p.
func New(p oncebox.PollingSettings) *Strategy {
	return &Strategy{
		fixed:      p.Type == oncebox.PollingFixed,
		min:        p.MinFixedDelay,
		max:        p.MaxFixedDelay,
		multiplier: p.Multiplier,
		current:    p.MinFixedDelay,
	}
}

// Next returns the delay after a poll; busy reports a full batch (or, for a
// job, a run that found work).
func (s *Strategy) Next(busy bool) time.Duration {
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

// Schedule is the adaptive pace of a background job: after a run that found
// work it waits Min, otherwise its delay grows by Multiplier up to Max.
type Schedule struct {
	Min        time.Duration
	Max        time.Duration
	Multiplier float64
}

// WithDefaults fills the zero fields of s from def.
func (s Schedule) WithDefaults(def Schedule) Schedule {
	if s.Min == 0 {
		s.Min = def.Min
	}
	if s.Max == 0 {
		s.Max = def.Max
	}
	if s.Multiplier == 0 {
		s.Multiplier = def.Multiplier
	}
	return s
}

// Validate checks s; the error names field.
func (s Schedule) Validate(field string) error {
	// !(m >= 1) also refuses NaN, which every comparison answers false.
	if s.Min <= 0 || s.Max < s.Min || !(s.Multiplier >= 1) || math.IsInf(s.Multiplier, 0) {
		return fmt.Errorf("%w: %s: want 0 < Min <= Max and a finite Multiplier >= 1, got %+v", oncebox.ErrInvalidConfig, field, s)
	}
	return nil
}

// Strategy returns the adaptive strategy of s.
func (s Schedule) Strategy() *Strategy {
	return New(oncebox.PollingSettings{Type: oncebox.PollingAdaptive,
		MinFixedDelay: s.Min, MaxFixedDelay: s.Max, Multiplier: s.Multiplier})
}

// Sleep waits d on c, or until wake fires; it returns false when ctx
// ended first. A zero d does not wait. The timer is stopped on return, so a
// fake clock never counts an abandoned waiter (clock.NewTimer).
func Sleep(ctx context.Context, c oncebox.Clock, d time.Duration, wake <-chan struct{}) bool {
	if ctx.Err() != nil {
		return false
	}
	if d <= 0 {
		return true
	}
	t := clock.NewTimer(c, d)
	defer t.Stop()
	select {
	case <-t.Chan():
		return true
	case <-wake:
		return true
	case <-ctx.Done():
		return false
	}
}

// JobResult is the outcome of one run of a job.
type JobResult struct {
	// Rows is the number of rows the run touched.
	Rows int
	// Skipped reports that another instance held the job's lease.
	Skipped bool
	Err     error
}

// RunJob runs run on sched until ctx ends, the first run after sched.Min,
// and calls done after each run with its result, duration and next delay. A
// run that touched rows resets the delay to sched.Min. wake, if not nil,
// starts a run at once.
func RunJob(ctx context.Context, c oncebox.Clock, sched Schedule, wake <-chan struct{},
	run func(ctx context.Context) JobResult, done func(r JobResult, took, next time.Duration)) {
	s := sched.Strategy()
	delay := s.Next(false) // Min, and the next idle run waits Min × Multiplier
	c = clock.Or(c)
	for Sleep(ctx, c, delay, wake) {
		start := c.Now()
		r := run(ctx)
		delay = s.Next(r.Rows > 0)
		done(r, c.Since(start), delay)
	}
}
