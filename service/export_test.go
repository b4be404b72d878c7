package service

import "github.com/jonboulle/clockwork"

// WithClock drives every component's time from clock: the tests' fake
// clock. It is not part of the public API.
func WithClock(clock clockwork.Clock) Option { return func(o *options) { o.clock = clock } }
