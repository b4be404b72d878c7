package poller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
)

// The pace of a type's loop is one pure function of its state and of the
// last poll's outcome (pace.next). Each case runs its outcomes in turn
// from a fresh pace and checks every delay: the later ones show what an
// outcome left of the adaptive strategy's step.
func TestPaceNext(t *testing.T) {
	t.Parallel()
	const ms = time.Millisecond
	adaptive := oncebox.PollingSettings{Type: oncebox.PollingAdaptive, MinFixedDelay: 250 * ms, MaxFixedDelay: time.Second, Multiplier: 2}
	fixed := oncebox.PollingSettings{Type: oncebox.PollingFixed, MinFixedDelay: 250 * ms, MaxFixedDelay: time.Second, Multiplier: 2}
	empty := pollOutcome{}
	busy := pollOutcome{settled: true, busy: true}
	partial := pollOutcome{settled: true}
	for name, c := range map[string]struct {
		polling  oncebox.PollingSettings
		outcomes []pollOutcome
		want     []time.Duration
	}{
		"empty claims ramp up to max-fixed-delay": {adaptive, []pollOutcome{empty, empty, empty, empty, empty},
			[]time.Duration{250 * ms, 500 * ms, time.Second, time.Second, time.Second}},
		"a partial batch ramps up as an empty claim does": {adaptive, []pollOutcome{partial, partial, empty},
			[]time.Duration{250 * ms, 500 * ms, time.Second}},
		"a busy batch: at once, and the ramp starts again": {adaptive, []pollOutcome{empty, empty, busy, empty},
			[]time.Duration{250 * ms, 500 * ms, 0, 250 * ms}},
		"heads: an ordered type's empty claim after a busy batch, at once, the ramp untouched": {adaptive,
			[]pollOutcome{empty, {heads: true}, empty}, []time.Duration{250 * ms, 0, 500 * ms}},
		"heads counts for an empty claim only": {adaptive, []pollOutcome{{settled: true, heads: true}},
			[]time.Duration{250 * ms}},
		"woken: at most min-fixed-delay, the ramp still grows": {adaptive,
			[]pollOutcome{empty, empty, {woken: true}, empty}, []time.Duration{250 * ms, 500 * ms, 250 * ms, time.Second}},
		"woken after a busy batch: at once": {adaptive, []pollOutcome{{settled: true, busy: true, woken: true}},
			[]time.Duration{0}},
		"the broker unavailable: at least the outage's backoff": {adaptive,
			[]pollOutcome{{settled: true, backoff: 3 * time.Second}, {settled: true, backoff: 100 * ms}},
			[]time.Duration{3 * time.Second, 500 * ms}},
		"the outage's backoff wins over a wake-up": {adaptive, []pollOutcome{{settled: true, woken: true, backoff: 2 * time.Second}},
			[]time.Duration{2 * time.Second}},
		"a failed probe: the backoff, the ramp untouched": {adaptive,
			[]pollOutcome{empty, {probed: true, backoff: 5 * time.Second}, {probed: true, backoff: 10 * ms}, empty},
			[]time.Duration{250 * ms, 5 * time.Second, 10 * ms, 500 * ms}},
		"fixed: always min-fixed-delay, at once after a busy batch": {fixed, []pollOutcome{empty, empty, busy, partial, {heads: true}},
			[]time.Duration{250 * ms, 250 * ms, 0, 250 * ms, 0}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := newPace(c.polling)
			var got []time.Duration
			for _, o := range c.outcomes {
				var d time.Duration
				before := p
				d, p = p.next(o)
				got = append(got, d)
				again, _ := before.next(o)
				require.Equal(t, d, again, "next is a pure function: the same pace and outcome give the same delay")
			}
			require.Equal(t, c.want, got)
		})
	}
}
