package conformance_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/internal/dbtest"
	"github.com/oncebox/watermill-oncebox/poller"
)

// More busy discovered types than loops: every type gets a turn while the
// others still have work ("one type never blocks another"). Five types
// with a backlog of 1,000 events each, batches of 5, and loops for two of
// them at once (MaxDiscoveredTypes): a loop runs at least its quantum (the
// defaults' max-fixed-delay, 20ms here), then yields to a waiting type, in
// turn. Before, the first two types kept their loops until drained (a loop
// ended only at an empty poll) and the discovery, which asked for two types,
// never saw the three others: they were relayed only after 2,000 events of
// the first two.
func TestMoreBusyDiscoveredTypesThanLoopsAllGetATurn(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, tg dbtest.Target) {
		s := setup(t, tg)
		const perType = 1000
		types := []string{"busy-a", "busy-b", "busy-c", "busy-d", "busy-e"}
		for _, typ := range types {
			s.publish(t, nil, typ, perType)
		}
		var (
			mu    sync.Mutex
			sent  = map[string]int{}
			seen  = map[string]bool{}
			atAll map[string]int // sent per type when the last type got its first call
		)
		rec := newRecorder()
		rec.fn = func(topic string, msgs []*message.Message) error {
			mu.Lock()
			defer mu.Unlock()
			sent[topic] += len(msgs)
			seen[topic] = true
			if atAll == nil && len(seen) == len(types) {
				atAll = map[string]int{}
				for k, v := range sent {
					atAll[k] = v
				}
			}
			return nil
		}
		cfg := fastPolling(s.discoveringConfig(nil))
		cfg.Oncebox.Outbox.Defaults.BatchSize = 5
		cfg.MaxDiscoveredTypes = 2
		s.startPoller(t, nil, rec, cfg)
		eventually(t, "every type relayed", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return atAll != nil
		})
		mu.Lock()
		defer mu.Unlock()
		t.Logf("events sent per type when the last type had its first turn: %v", atAll)
		for _, typ := range types {
			require.Less(t, atAll[typ], perType/2,
				"events of %s sent before every type had a turn (%v): no type waits for another to drain", typ, atAll)
		}
	})
}

// A discovered ordered type whose keys are all held (here the key's other
// event waits an hour for its retry) is due for the discovery but its loop
// claims nothing: that must not keep the discovery at min-fixed-delay.
// Over a simulated hour the discovery costs its idle ~72 polls and the
// type's loop at most one claim per discovery poll, as a configured type
// would cost (its own ~72) beside the discovery. Before, every discovery
// poll started the loop and counted as busy: a poll and a claim every
// 250ms, ~28,000 statements an hour.
func TestHeldKeysDoNotSpeedTheDiscoveryUp(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, tg dbtest.Target) {
		s := setup(t, tg)
		ids := s.publish(t, s.clock, "held", 2) // one key, "k"
		s.exec(t, "UPDATE "+s.Tables.Events+" SET next_retry_at = "+s.P(1)+", retry_count = 1 WHERE id = "+s.P(2),
			t0.Add(2*time.Hour), s.ID(ids[0]))
		h := &hooks{}
		cfg := s.discoveringConfig(nil)
		cfg.Oncebox.Outbox.Defaults.Ordering = oncebox.OrderingKey
		cfg.Hooks = h
		s.startPoller(t, nil, newRecorder(), cfg)
		count := func() (discovery, held int) {
			for _, p := range h.Snapshot().Polls {
				require.NoError(t, p.Err)
				switch p.EventType {
				case poller.DiscoveryEventType:
					discovery++
				case "held":
					require.Zero(t, p.Claimed, "the key is held")
					held++
				default:
					t.Fatalf("unexpected poll of %q", p.EventType)
				}
			}
			return discovery, held
		}
		stepUntil(t, s.clock, waitersPerPoller, time.Second, time.Hour+time.Minute, func() bool {
			d, held := count()
			return s.clock.Since(t0) >= time.Hour || d+held > 1000
		})
		discovery, held := count()
		msg := fmt.Sprintf("after %s: %d discovery polls, %d claims of the held type", s.clock.Since(t0), discovery, held)
		t.Log(msg)
		require.InDelta(t, 72, discovery, 8, msg)
		require.LessOrEqual(t, held, discovery, msg)
		require.Equal(t, 2, s.status(t, "PENDING"))
	})
}
