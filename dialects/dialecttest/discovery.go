package dialecttest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/poller"
)

// discoveringConfig is a relay that polls types and discovers every other
// type published (the default), on the fake clock.
func (s *suite) discoveringConfig(types map[string]oncebox.EventSettings) poller.Config {
	return poller.Config{Dialect: s.Dialect, Clock: s.clock, Oncebox: oncebox.Config{Outbox: oncebox.OutboxConfig{Events: types}}}
}

// topicsOf returns the topic each event id was delivered to.
func (r *recorder) topicsOf() map[string][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][]string{}
	for id, ss := range r.got {
		for _, s := range ss {
			out[id] = append(out[id], s.topic)
		}
	}
	return out
}

// Like Watermill's forwarder, the relay delivers every type that is
// published: a configured type with its settings, the others with the
// defaults block and their own name as topic. Before, a type no poller
// listed stayed PENDING forever.
func testRelayDeliversTypesNobodyConfigured(t *testing.T, tg Target) {
	s := setup(t, tg)
	want := map[string]string{} // event id -> topic (the publisher's: the type's name)
	for typ, n := range map[string]int{"order-created": 3, "order-shipped": 2, "invoice-sent": 250} {
		for _, id := range s.publish(t, s.clock, typ, n) {
			want[id.String()] = typ
		}
	}
	rec := newRecorder()
	h := &hooks{}
	cfg := s.discoveringConfig(map[string]oncebox.EventSettings{"order-created": {BatchSize: 2}})
	cfg.Hooks = h
	// The real clock: a fake one would be stepped while a discovered
	// type's loop is busy in the database, outside any count of waiters.
	cfg = fastPolling(cfg)
	s.startPoller(t, nil, rec, cfg)
	eventually(t, "every event delivered", func() bool { return rec.delivered() == len(want) })
	perTopic := map[string]int{}
	for id, topics := range rec.topicsOf() {
		require.Len(t, topics, 1, "event %s delivered once", id)
		require.Equal(t, want[id], topics[0], "event %s to its topic", id)
		perTopic[topics[0]]++
	}
	require.Equal(t, map[string]int{"order-created": 3, "order-shipped": 2, "invoice-sent": 250}, perTopic)
	claimedBy := map[string][]int{}
	eventually(t, "every poll reported", func() bool {
		claimedBy = map[string][]int{}
		total := 0
		for _, p := range h.Snapshot().Polls {
			if p.Claimed > 0 && p.EventType != poller.DiscoveryEventType {
				claimedBy[p.EventType] = append(claimedBy[p.EventType], p.Claimed)
				total += p.Claimed
			}
		}
		return total == len(want)
	})
	require.Equal(t, []int{2, 1}, claimedBy["order-created"], "the configured type with its own batch size")
	require.Equal(t, []int{200, 50}, claimedBy["invoice-sent"], "a discovered type with the defaults' batch size")
	eventually(t, "all PROCESSED", func() bool { return s.status(t, "PROCESSED") == len(want) })

	// The discovered types' loops end once idle: each reported a poll
	// that claimed nothing.
	eventually(t, "the discovered loops end", func() bool {
		idle := map[string]bool{}
		for _, p := range h.Snapshot().Polls {
			if p.Claimed == 0 {
				idle[p.EventType] = true
			}
		}
		return idle["order-shipped"] && idle["invoice-sent"]
	})
}

// Types found by discovery get a loop each: one that hangs never holds
// back another (as for configured types, TestSlowTypeNeverBlocksAnother).
func testDiscoveredTypesNeverBlockEachOther(t *testing.T, tg Target) {
	s := setup(t, tg)
	s.publish(t, nil, "slow", 10)
	fastIDs := s.publish(t, nil, "fast", 300)
	release := make(chan struct{})
	var once sync.Once
	rec := newRecorder()
	rec.fn = func(topic string, _ []*message.Message) error {
		if topic == "slow" {
			<-release
		}
		return nil
	}
	cfg := fastPolling(s.discoveringConfig(nil))
	cfg.Oncebox.Outbox.Defaults.BatchSize = 50
	s.startPoller(t, nil, rec, cfg)
	defer once.Do(func() { close(release) })
	eventually(t, "slow hangs with its batch", func() bool {
		return s.Count(t, s.Tables.Events, "event_type = 'slow' AND status = 'IN_PROCESS'") == 10
	})
	eventually(t, "every fast event delivered while slow hangs", func() bool {
		for _, id := range fastIDs {
			if len(rec.of(id)) != 1 {
				return false
			}
		}
		return true
	})
	require.Equal(t, 10, s.Count(t, s.Tables.Events, "event_type = 'slow' AND status = 'IN_PROCESS'"))
}

// An idle outbox costs the discovery's polls alone, at the defaults' pace:
// about 70 an hour, as one idle configured type would.
func testIdleDiscoveryCostsAboutSeventyPollsAnHour(t *testing.T, tg Target) {
	s := setup(t, tg)
	h := &hooks{}
	cfg := s.discoveringConfig(nil)
	cfg.Hooks = h
	s.startPoller(t, nil, newRecorder(), cfg)
	// One waiting goroutine fewer than a poller with a type: no type
	// loop, but the discovery.
	stepUntil(t, s.clock, waitersPerPoller, 5*time.Second, time.Hour+time.Minute, func() bool {
		return s.clock.Since(t0) >= time.Hour
	})
	polls := 0
	for _, p := range h.Snapshot().Polls {
		require.Equal(t, poller.DiscoveryEventType, p.EventType, "no type has a loop")
		require.NoError(t, p.Err)
		polls++
	}
	require.InDelta(t, 72, polls, 8, "discovery polls in an idle hour")
}

// A relay whose database cannot serve it returns an error from Run at once
// (and Running is closed), instead of logging the same failure every poll:
// tables never migrated, or a migration missing.
func testRelayFailsFastWhenTheSchemaIsNotMigrated(t *testing.T, tg Target) {
	s := setup(t, tg)
	empty := tg.NewEmpty(t)
	run := func(e *Env) error {
		p, err := poller.New(e.Beginner, newRecorder(), poller.Config{Dialect: e.Dialect}, nil)
		require.NoError(t, err, "New does no I/O")
		errc := make(chan error, 1)
		go func() { errc <- p.Run(t.Context()) }()
		<-p.Running() // closed when Run returns early too
		select {
		case err := <-errc:
			return err
		case <-time.After(30 * time.Second):
			require.NoError(t, p.Close())
			return nil
		}
	}
	err := run(empty)
	require.Error(t, err)
	require.ErrorContains(t, err, "migrate.Migrate")

	ms, err := s.Dialect.Migrations()
	require.NoError(t, err)
	last := ms[len(ms)-1]
	s.exec(t, "DELETE FROM "+s.Tables.Migrations+" WHERE version = "+s.P(1), last.Version)
	err = run(s.Env)
	require.ErrorContains(t, err, fmt.Sprintf("migration %d (%s) is not applied", last.Version, last.Name))
}
