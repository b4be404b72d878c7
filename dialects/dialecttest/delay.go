package dialecttest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/components/delay"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/poller"
	"github.com/oncebox/watermill-oncebox/publisher"
)

// publishDelayed publishes msgs as events of eventType through a publisher
// of cfg in one transaction, committed when Publish succeeded and rolled
// back otherwise, and returns Publish's error.
func (s *suite) publishDelayed(t *testing.T, cfg publisher.Config, eventType string, msgs ...*message.Message) error {
	t.Helper()
	tx := s.begin(t)
	pub, err := publisher.NewPublisher(tx, cfg, nil)
	require.NoError(t, err)
	if err := pub.Publish(eventType, msgs...); err != nil {
		require.NoError(t, tx.Rollback())
		return err
	}
	require.NoError(t, tx.Commit())
	return nil
}

// dueAt reports whether the event of msg is PENDING with next_retry_at at.
func (s *suite) dueAt(t *testing.T, msg *message.Message, at time.Time) bool {
	t.Helper()
	id, err := oncebox.EventIDOf(msg)
	require.NoError(t, err)
	return s.Count(t, s.Tables.Events, "id = "+s.P(1)+" AND status = 'PENDING' AND next_retry_at = "+s.P(2), s.ID(id), at) == 1
}

// slowPace is a poller config of types whose idle polls are an hour apart:
// a delayed event relayed at its time was relayed by the wake-up at the
// next due time, not by a poll.
func (s *suite) slowPace(types ...string) poller.Config {
	cfg := s.pollerConfig(types...)
	cfg.Oncebox.Outbox.Defaults.Polling = oncebox.PollingSettings{MinFixedDelay: time.Hour, MaxFixedDelay: time.Hour, Multiplier: 1}
	return cfg
}

// An event delayed with Watermill's metadata (delay.Until, or only
// _watermill_delayed_for) or with WithDeliverAt is written with
// next_retry_at at its time; a past time is now. The relay sends each at its
// time, not before, although its idle polls are an hour apart, and keeps
// the delay metadata as watermill-sql's delayed publisher does.
func testDelayedEventsAreRelayedAtTheirTime(t *testing.T, tg Target) {
	s := setup(t, tg)
	cfg := publisher.Config{Dialect: s.Dialect, Clock: s.clock}
	now := s.clock.Now()
	until := message.NewMessage(watermill.NewUUID(), []byte("until"))
	delay.Message(until, delay.Until(now.Add(10*time.Minute)))
	forOnly := message.NewMessage(watermill.NewUUID(), []byte("for"))
	forOnly.Metadata.Set(delay.DelayedForKey, "5m")
	past := message.NewMessage(watermill.NewUUID(), []byte("past"))
	delay.Message(past, delay.Until(now.Add(-time.Hour)))
	plain := message.NewMessage(watermill.NewUUID(), []byte("plain"))
	at := message.NewMessage(watermill.NewUUID(), []byte("at"))
	publisher.WithDeliverAt(now.Add(7*time.Minute + 500*time.Millisecond))(at)
	require.NoError(t, s.publishDelayed(t, cfg, "delayed", until, forOnly, past, plain, at))

	require.True(t, s.dueAt(t, until, now.Add(10*time.Minute)), "delay.Until")
	require.True(t, s.dueAt(t, forOnly, now.Add(5*time.Minute)), "_watermill_delayed_for alone: from the publisher's clock")
	require.True(t, s.dueAt(t, past, now), "a past time is now")
	require.True(t, s.dueAt(t, plain, now), "no delay")
	require.True(t, s.dueAt(t, at, now.Add(7*time.Minute+500*time.Millisecond)), "WithDeliverAt, to the millisecond")

	var mu sync.Mutex
	sentAt := map[string]time.Time{} // payload -> the fake clock's time at the send
	rec := newRecorder()
	rec.fn = func(_ string, msgs []*message.Message) error {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			sentAt[string(m.Payload)] = s.clock.Now()
		}
		return nil
	}
	h := &hooks{}
	pc := s.slowPace("delayed")
	pc.Hooks = h
	defer func() {
		if t.Failed() {
			for _, p := range h.Snapshot().Polls {
				t.Logf("poll %+v", p)
			}
			t.Logf("clock %v", s.clock.Now())
		}
	}()
	s.startPoller(t, nil, rec, pc)
	eventually(t, "the due events are sent at once", func() bool { return rec.delivered() == 2 })
	require.Len(t, rec.of(idOf(t, past)), 1)
	require.Len(t, rec.of(idOf(t, plain)), 1)

	// step advances the clock by d once the relay sleeps.
	step := func(d time.Duration) {
		t.Helper()
		require.NoError(t, s.clock.BlockUntilContext(context.Background(), waitersPerPoller))
		s.clock.Advance(d)
	}
	step(5*time.Minute - time.Millisecond)
	require.NoError(t, s.clock.BlockUntilContext(context.Background(), waitersPerPoller))
	require.Equal(t, 2, rec.delivered(), "nothing before its time")
	step(time.Millisecond)
	eventually(t, "the 5 min event at its time", func() bool { return len(rec.of(idOf(t, forOnly))) == 1 })
	step(2*time.Minute + 500*time.Millisecond)
	eventually(t, "the 7 min 0.5 s event at its time", func() bool { return len(rec.of(idOf(t, at))) == 1 })
	step(3*time.Minute - 500*time.Millisecond - time.Millisecond)
	require.NoError(t, s.clock.BlockUntilContext(context.Background(), waitersPerPoller))
	require.Empty(t, rec.of(idOf(t, until)), "nothing before its time")
	step(time.Millisecond)
	eventually(t, "the 10 min event at its time", func() bool { return len(rec.of(idOf(t, until))) == 1 })
	eventually(t, "all PROCESSED", func() bool { return s.status(t, "PROCESSED") == 5 })
	for _, m := range []*message.Message{past, plain, forOnly, at, until} {
		require.Len(t, rec.of(idOf(t, m)), 1, "%s sent once", m.Payload)
	}

	mu.Lock()
	require.Equal(t, map[string]time.Time{"past": now, "plain": now, "for": now.Add(5 * time.Minute),
		"at": now.Add(7*time.Minute + 500*time.Millisecond), "until": now.Add(10 * time.Minute)}, sentAt,
		"each sent when the fake clock reached its time")
	mu.Unlock()
	got := rec.of(idOf(t, until))[0].msg.Metadata
	require.Equal(t, until.Metadata.Get(delay.DelayedUntilKey), got.Get(delay.DelayedUntilKey), "the delay metadata is kept, as watermill-sql keeps it")
	require.NotEmpty(t, got.Get(delay.DelayedForKey), "delay.Until computes it from the real clock")
	got = rec.of(idOf(t, forOnly))[0].msg.Metadata
	require.Equal(t, now.Add(5*time.Minute).Format(time.RFC3339Nano), got.Get(delay.DelayedUntilKey), "the publisher adds the time it computed")
}

func idOf(t *testing.T, msg *message.Message) oncebox.EventID {
	t.Helper()
	id, err := oncebox.EventIDOf(msg)
	require.NoError(t, err)
	return id
}

// A delay over the maximum, or delay metadata that does not parse, refuses
// the whole call with an error naming the message, the key and the value
// or the limit: nothing of it is written.
func testDelayBoundsRefuseTheWholeCall(t *testing.T, tg Target) {
	s := setup(t, tg)
	now := s.clock.Now()
	cfg := publisher.Config{Dialect: s.Dialect, Clock: s.clock}
	batch := func(bad func(*message.Message)) []*message.Message {
		msgs := []*message.Message{message.NewMessage("m-0", nil), message.NewMessage("m-1", nil), message.NewMessage("m-2", nil)}
		bad(msgs[1])
		return msgs
	}
	for _, c := range []struct {
		name string
		cfg  publisher.Config
		bad  func(*message.Message)
		want []string
	}{
		{"over the default 30 days", cfg, func(m *message.Message) { delay.Message(m, delay.Until(now.Add(31*24*time.Hour))) },
			[]string{`message 1 (uuid "m-1")`, "more than the maximum delay 720h0m0s", "publisher.Config.MaxDelay", `"delayed"`}},
		{"over a configured limit", func() publisher.Config { c := cfg; c.MaxDelay = time.Hour; return c }(),
			publisher.WithDelay(time.Hour + time.Second), []string{`uuid "m-1"`, "more than the maximum delay 1h0m0s"}},
		{"an until that is no time", cfg, func(m *message.Message) { m.Metadata.Set(delay.DelayedUntilKey, "tomorrow") },
			[]string{`uuid "m-1"`, `_watermill_delayed_until "tomorrow"`, "RFC 3339"}},
		{"a for that is no duration", cfg, func(m *message.Message) { m.Metadata.Set(delay.DelayedForKey, "5 minutes") },
			[]string{`uuid "m-1"`, `_watermill_delayed_for "5 minutes"`, "duration"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := s.publishDelayed(t, c.cfg, "delayed", batch(c.bad)...)
			require.ErrorIs(t, err, oncebox.ErrInvalidInput)
			for _, w := range c.want {
				require.ErrorContains(t, err, w)
			}
			require.Zero(t, s.Count(t, s.Tables.Events, ""), "nothing written")
		})
	}
	t.Run("the limit itself and a negative for are accepted", func(t *testing.T) {
		limit := cfg
		limit.MaxDelay = time.Hour
		onLimit := message.NewMessage("on-limit", nil)
		publisher.WithDelay(time.Hour)(onLimit)
		negative := message.NewMessage("negative", nil)
		publisher.WithDelay(-time.Minute)(negative)
		require.NoError(t, s.publishDelayed(t, limit, "delayed", onLimit, negative))
		require.True(t, s.dueAt(t, onLimit, now.Add(time.Hour)))
		require.True(t, s.dueAt(t, negative, now), "a negative delay is now")
	})
}

// Watermill's delay.NewPublisher wrapped around the oncebox publisher works
// as documented upstream: the delay of the message's context, or the
// DefaultDelayGenerator's, becomes the row's next_retry_at; a message that
// has its own delay keeps it; without any, the call is refused unless
// AllowNoDelay.
func testDelayNewPublisherWrapsTheOutbox(t *testing.T, tg Target) {
	s := setup(t, tg)
	now := s.clock.Now()
	wrap := func(t *testing.T, pub message.Publisher, config delay.PublisherConfig) message.Publisher {
		t.Helper()
		d, err := delay.NewPublisher(pub, config)
		require.NoError(t, err)
		return d
	}
	t.Run("the context's delay, the generator's, the message's own", func(t *testing.T) {
		tx := s.begin(t)
		pub, err := publisher.NewPublisher(tx, publisher.Config{Dialect: s.Dialect, Clock: s.clock}, nil)
		require.NoError(t, err)
		d := wrap(t, pub, delay.PublisherConfig{DefaultDelayGenerator: func(p delay.DefaultDelayGeneratorParams) (delay.Delay, error) {
			return delay.Until(now.Add(3 * time.Minute)), nil
		}})
		fromCtx := message.NewMessage(watermill.NewUUID(), nil)
		fromCtx.SetContext(delay.WithContext(context.Background(), delay.Until(now.Add(2*time.Minute))))
		generated := message.NewMessage(watermill.NewUUID(), nil)
		own := message.NewMessage(watermill.NewUUID(), nil)
		delay.Message(own, delay.Until(now.Add(4*time.Minute)))
		require.NoError(t, d.Publish("wrapped", fromCtx, generated, own))
		require.NoError(t, tx.Commit())
		require.True(t, s.dueAt(t, fromCtx, now.Add(2*time.Minute)), "delay.WithContext")
		require.True(t, s.dueAt(t, generated, now.Add(3*time.Minute)), "DefaultDelayGenerator")
		require.True(t, s.dueAt(t, own, now.Add(4*time.Minute)), "the message's own delay")
	})
	t.Run("no delay: refused unless AllowNoDelay", func(t *testing.T) {
		tx := s.begin(t)
		pub, err := publisher.NewPublisher(tx, publisher.Config{Dialect: s.Dialect, Clock: s.clock}, nil)
		require.NoError(t, err)
		require.ErrorContains(t, wrap(t, pub, delay.PublisherConfig{}).Publish("wrapped", message.NewMessage("none", nil)),
			"message doesn't have a delay set")
		plain := message.NewMessage("plain", nil)
		require.NoError(t, wrap(t, pub, delay.PublisherConfig{AllowNoDelay: true}).Publish("wrapped", plain))
		require.NoError(t, tx.Commit())
		require.True(t, s.dueAt(t, plain, now))
		require.Equal(t, 4, s.Count(t, s.Tables.Events, ""), "the three delayed above and this one")
	})
}

// ordering: key. A delayed event is its key's place in the FIFO: the events
// of its key published before it go at once, those after it wait until it
// was sent, and other keys are not held. Sent in publish order.
func testOrderedDelayedEventHoldsOnlyItsSuccessors(t *testing.T, tg Target) {
	s := setup(t, tg)
	now := s.clock.Now()
	keyed := func(key, body string, opts ...publisher.MessageOption) *message.Message {
		m := message.NewMessage(watermill.NewUUID(), []byte(body))
		oncebox.SetKey(m, key)
		for _, o := range opts {
			o(m)
		}
		return m
	}
	e1 := keyed("k", "e1")
	e2 := keyed("k", "e2", publisher.WithDelay(10*time.Minute))
	e3 := keyed("k", "e3")
	l1 := keyed("l", "l1")
	require.NoError(t, s.publishDelayed(t, publisher.Config{Dialect: s.Dialect, Clock: s.clock}, "ordered", e1, e2, e3, l1))
	require.True(t, s.dueAt(t, e2, now.Add(10*time.Minute)))

	var mu sync.Mutex
	var order []string
	rec := newRecorder()
	rec.fn = func(_ string, msgs []*message.Message) error {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			order = append(order, string(m.Payload))
		}
		return nil
	}
	sentOrder := func() string { mu.Lock(); defer mu.Unlock(); return fmt.Sprint(order) }
	cfg := s.slowPace("ordered")
	cfg.Oncebox.Outbox.Events["ordered"] = oncebox.EventSettings{Ordering: oncebox.OrderingKey}
	s.startPoller(t, nil, rec, cfg)
	eventually(t, "the events before the delayed one, and other keys, at once", func() bool { return rec.delivered() == 2 })
	require.Len(t, rec.of(idOf(t, e1)), 1, "the event before the delayed one is not held")
	require.Len(t, rec.of(idOf(t, l1)), 1, "another key is not held")

	require.NoError(t, s.clock.BlockUntilContext(context.Background(), waitersPerPoller))
	s.clock.Advance(10*time.Minute - time.Millisecond)
	require.NoError(t, s.clock.BlockUntilContext(context.Background(), waitersPerPoller))
	require.Empty(t, rec.of(idOf(t, e3)), "the event after the delayed one waits for it")
	require.Empty(t, rec.of(idOf(t, e2)))
	s.clock.Advance(time.Millisecond)
	eventually(t, "the delayed event, then its successor", func() bool { return rec.delivered() == 4 })
	k := []string{}
	for _, p := range order {
		if p != "l1" {
			k = append(k, p)
		}
	}
	require.Equal(t, []string{"e1", "e2", "e3"}, k, "key k in publish order: %s", sentOrder())
}

// A retry takes the delayed event's path: with idle polls an hour apart,
// the second attempt is made when the clock reaches its next_retry_at
// (the default backoff's 10 s), not at the next poll.
func testRetryIsSentAtItsTime(t *testing.T, tg Target) {
	s := setup(t, tg)
	s.publish(t, s.clock, "retried", 1)
	var mu sync.Mutex
	var attempts []time.Time
	rec := newRecorder()
	rec.fn = func(string, []*message.Message) error {
		mu.Lock()
		defer mu.Unlock()
		attempts = append(attempts, s.clock.Now())
		if len(attempts) == 1 {
			return fmt.Errorf("schema registry says no")
		}
		return nil
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(attempts) }
	s.startPoller(t, nil, rec, s.slowPace("retried"))
	eventually(t, "the first attempt", func() bool { return count() == 1 })
	eventually(t, "the retry recorded", func() bool { return s.Count(t, s.Tables.Events, "retry_count = 1") == 1 })
	require.NoError(t, s.clock.BlockUntilContext(context.Background(), waitersPerPoller))
	s.clock.Advance(10*time.Second - time.Millisecond)
	require.NoError(t, s.clock.BlockUntilContext(context.Background(), waitersPerPoller))
	require.Equal(t, 1, count(), "not before its time")
	s.clock.Advance(time.Millisecond)
	eventually(t, "the retry at its time", func() bool { return count() == 2 })
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 10*time.Second, attempts[1].Sub(attempts[0]))
}

// A plain event (not delayed, not retried) written after a claim began does
// not end the relay's sleep: only a row that was delayed or retried comes
// due later (docs/delay.md); an arrival is taken by a wake-up or at the
// pace's next poll, min-fixed-delay being the floor between partial polls.
// Counted as coming due, every arrival cut a polling relay's sleep to
// nothing and its adaptive pace grew with no full batch to reset it.
func testPlainArrivalDoesNotEndTheSleep(t *testing.T, tg Target) {
	s := setup(t, tg)
	s.publish(t, s.clock, "arrivals", 1)
	gate := make(chan struct{})
	var once sync.Once
	started := make(chan struct{})
	rec := newRecorder()
	rec.fn = func(string, []*message.Message) error {
		once.Do(func() {
			close(started)
			<-gate
		})
		return nil
	}
	s.startPoller(t, nil, rec, s.slowPace("arrivals"))
	<-started
	// While the first batch is being sent: a millisecond later, a plain
	// event, with no wake-up.
	s.clock.Advance(time.Millisecond)
	tx := s.begin(t)
	pub, err := publisher.NewPublisher(tx, publisher.Config{Dialect: s.Dialect, Clock: s.clock, DisableWakeOnCommit: true}, nil)
	require.NoError(t, err)
	late := message.NewMessage(watermill.NewUUID(), []byte(`{"n":2}`))
	require.NoError(t, pub.Publish("arrivals", late))
	require.NoError(t, tx.Commit())
	close(gate)
	eventually(t, "the first batch", func() bool { return s.status(t, "PROCESSED") >= 1 })
	require.NoError(t, s.clock.BlockUntilContext(context.Background(), waitersPerPoller))
	require.Equal(t, 1, rec.delivered(), "the arrival waits for the pace's next poll")
	require.Empty(t, rec.of(idOf(t, late)))
	s.clock.Advance(time.Hour)
	eventually(t, "the arrival at the next poll", func() bool { return len(rec.of(idOf(t, late))) == 1 })
}
