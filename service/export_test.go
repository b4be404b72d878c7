package service

import oncebox "github.com/oncebox/watermill-oncebox"

// WithClock drives every component's time from clock: the tests' fake
// clock. It is not part of the public API.
func WithClock(clock oncebox.Clock) Option { return func(o *options) { o.clock = clock } }
