package service

import oncebox "github.com/oncebox/watermill-oncebox"

// WithClock drives every component's time from clock: the tests' fake
// clock. It is not part of the public API.
func WithClock(clock oncebox.Clock) Option { return func(o *options) { o.clock = clock } }

// GoStopped is closed once the i-th function given to Go (from 0) has
// returned and Run has counted it.
func GoStopped(s *Service, i int) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.goStopped[i]
}
