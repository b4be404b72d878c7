package dialecttest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
)

// Per-key ordering through the relay (docs/ordering.md): what a failing
// head does to its key, and to the other keys, with the poller's own retry,
// DLQ move and DLQ retry on the suite's fake clock.

// attempt is one message a keyedBroker was given: its event id, and
// whether the broker took it.
type attempt struct {
	id oncebox.EventID
	ok bool
}

// show is attempts as text, for readable failures.
func show(attempts []attempt) []string {
	out := make([]string, len(attempts))
	for i, a := range attempts {
		out[i] = a.id.String()
		if !a.ok {
			out[i] += " (refused)"
		}
	}
	return out
}

// keyedBroker is a poller.BatchPublisher that logs, per event type and key,
// every message it is given in the order given, refused or taken. refuse,
// when it holds for an id, refuses that message alone: the others of the
// call are taken.
type keyedBroker struct {
	mu     sync.Mutex
	log    map[string][]attempt // "type/key" -> attempts
	refuse func(id oncebox.EventID) bool
}

func newKeyedBroker() *keyedBroker { return &keyedBroker{log: map[string][]attempt{}} }

var errPoison = errors.New("the test broker refuses this event")

func (b *keyedBroker) PublishBatch(topic string, msgs ...*message.Message) ([]error, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		id, err := oncebox.EventIDOf(m)
		if err != nil {
			return nil, err
		}
		ok := b.refuse == nil || !b.refuse(id)
		if !ok {
			errs[i] = errPoison
		}
		k := topic + "/" + m.Metadata.Get(oncebox.HeaderKey)
		b.log[k] = append(b.log[k], attempt{id: id, ok: ok})
	}
	return errs, nil
}

func (b *keyedBroker) Publish(topic string, msgs ...*message.Message) error {
	errs, err := b.PublishBatch(topic, msgs...)
	return errors.Join(append(errs, err)...)
}

func (b *keyedBroker) Close() error { return nil }

// setRefuse replaces the refusal rule.
func (b *keyedBroker) setRefuse(f func(oncebox.EventID) bool) {
	b.mu.Lock()
	b.refuse = f
	b.mu.Unlock()
}

// of returns the attempts logged for eventType and key.
func (b *keyedBroker) of(eventType, key string) []attempt {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]attempt(nil), b.log[eventType+"/"+key]...)
}

// taken is the ids taken for eventType and key, in order.
func (b *keyedBroker) taken(eventType, key string) []oncebox.EventID {
	var ids []oncebox.EventID
	for _, a := range b.of(eventType, key) {
		if a.ok {
			ids = append(ids, a.id)
		}
	}
	return ids
}

// keyedEvents publishes perKey events of each of keys, interleaved (one of
// each key in turn), and returns each key's ids in publish order.
func (s *suite) keyedEvents(t *testing.T, eventType string, keys []string, perKey int) map[string][]oncebox.EventID {
	t.Helper()
	var order []string
	for range perKey {
		order = append(order, keys...)
	}
	ids := s.publishKeys(t, eventType, order...)
	byKey := map[string][]oncebox.EventID{}
	for i, id := range ids {
		byKey[order[i]] = append(byKey[order[i]], id)
	}
	return byKey
}

// refusedThenTaken is the attempts of a key whose events ids were taken
// in order, but ids[at], refused n times before it was taken (n ≥ 0), or
// never taken when never is set: then the key goes on after it.
func refusedThenTaken(ids []oncebox.EventID, at, n int, never bool) []attempt {
	var want []attempt
	for i, id := range ids {
		if i == at {
			for range n {
				want = append(want, attempt{id: id})
			}
			if never {
				continue
			}
		}
		want = append(want, attempt{id: id, ok: true})
	}
	return want
}

// A head event whose sends keep failing holds back the later events of its
// key, and only of its key: two relays deliver every other key's events,
// in order, while it is retried; the later events of its key are never
// attempted until it is sent, then follow it in order.
func testOrderedRelayAFailingHeadBlocksOnlyItsKey(t *testing.T, tg Target) {
	s := setup(t, tg)
	keys := make([]string, 10)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%02d", i)
	}
	const perKey, stuck, at = 10, "key-03", 2
	ids := s.keyedEvents(t, "order-created", keys, perKey)
	head := ids[stuck][at] // key-03's third event: its key has gone on before it
	broker := newKeyedBroker()
	broker.setRefuse(func(id oncebox.EventID) bool { return id == head })

	hs := []*hooks{{}, {}}
	for i, name := range []string{"A", "B"} {
		cfg := s.pollerConfig("order-created")
		cfg.InstanceID, cfg.Hooks = name, hs[i]
		d := &cfg.Oncebox.Outbox.Defaults
		d.Ordering = oncebox.OrderingKey
		d.BatchSize = 4
		d.MaxRetries = oncebox.Int(oncebox.MaxRetriesLimit)
		d.Backoff = oncebox.BackoffSettings{Delay: time.Second, Multiplier: 1}
		d.Polling = oncebox.PollingSettings{MinFixedDelay: 100 * time.Millisecond, MaxFixedDelay: time.Second, Multiplier: 2}
		s.startPoller(t, nil, broker, cfg)
	}
	failures := func() int {
		n := 0
		for _, h := range hs {
			for _, f := range h.Snapshot().Failures {
				require.Equal(t, head, f.ID, "only the head fails")
				n++
			}
		}
		return n
	}
	others := func() bool {
		for _, k := range keys {
			if k != stuck && len(broker.taken("order-created", k)) < perKey {
				return false
			}
		}
		return true
	}
	const refusals = 8
	stepUntil(t, s.clock, 2*waitersPerPoller, 250*time.Millisecond, 10*time.Minute, func() bool {
		return others() && failures() >= refusals
	})

	for _, k := range keys {
		if k != stuck {
			require.Equal(t, show(refusedThenTaken(ids[k], -1, 0, false)), show(broker.of("order-created", k)), "%s flows", k)
		}
	}
	n := failures()
	require.Equal(t, show(refusedThenTaken(ids[stuck][:at+1], at, n, true)), show(broker.of("order-created", stuck)),
		"%s: its first events, then its head refused %d times; nothing after it attempted", stuck, n)
	in, args := s.inList(1, ids[stuck][at+1:])
	require.Equal(t, perKey-at-1, s.Count(t, s.Tables.Events, "status = 'PENDING' AND retry_count = 0 AND id IN ("+in+")", args...),
		"the later events of the key wait, never attempted")

	// The broker takes it: the key goes on, in order.
	broker.setRefuse(nil)
	stepUntil(t, s.clock, 2*waitersPerPoller, 250*time.Millisecond, 10*time.Minute, func() bool {
		return len(broker.taken("order-created", stuck)) == perKey
	})
	n = failures()
	require.Equal(t, show(refusedThenTaken(ids[stuck], at, n, false)), show(broker.of("order-created", stuck)))
	eventually(t, "every row PROCESSED", func() bool { return s.status(t, "PROCESSED") == len(keys)*perKey })
}

// A head event that fails for good is moved to the DLQ by the relay's
// transfer job. With on-failure: skip (the default) its key goes on: the
// later events follow its last attempt, in order. With on-failure: block
// the key stays held behind the DLQ row, however long the relay polls,
// while the type's other keys flow; when the operator retries the row, the
// event comes back at its old place and the key goes on in exactly the
// publish order.
func testOrderedRelayHeadMovedToTheDLQ(t *testing.T, tg Target) {
	s := setup(t, tg)
	ctx := context.Background()
	const perKey, at, maxRetries = 5, 1, 1
	keys := []string{"A", "B", "C"}
	skip := s.keyedEvents(t, "skip", keys, perKey)
	block := s.keyedEvents(t, "block", keys, perKey)
	poison := map[oncebox.EventID]bool{skip["A"][at]: true, block["A"][at]: true}
	broker := newKeyedBroker()
	broker.setRefuse(func(id oncebox.EventID) bool { return poison[id] })

	h := &hooks{}
	cfg := s.pollerConfig("skip", "block")
	cfg.Hooks = h
	cfg.Oncebox.Outbox.DLQ.Enabled = true
	for name, onFailure := range map[string]oncebox.OnFailure{"skip": oncebox.OnFailureSkip, "block": oncebox.OnFailureBlock} {
		cfg.Oncebox.Outbox.Events[name] = oncebox.EventSettings{Ordering: oncebox.OrderingKey, OnFailure: onFailure,
			BatchSize: 2, MaxRetries: oncebox.Int(maxRetries), Backoff: oncebox.BackoffSettings{Delay: time.Second, Multiplier: 1},
			Polling: oncebox.PollingSettings{MinFixedDelay: 100 * time.Millisecond, MaxFixedDelay: time.Second, Multiplier: 2}}
	}
	s.startPoller(t, nil, broker, cfg)
	// One more poll loop than the type of waitersPerPollerDLQ.
	const waiters = waitersPerPollerDLQ + 1
	inDLQ := func(id oncebox.EventID) bool {
		return s.Count(t, s.Tables.DLQ, "event_id = "+s.P(1)+" AND status = 'MOVED'", s.ID(id)) == 1
	}
	flowed := func(eventType string, keys ...string) bool {
		for _, k := range keys {
			if len(broker.taken(eventType, k)) < perKey {
				return false
			}
		}
		return true
	}
	stepUntil(t, s.clock, waiters, 250*time.Millisecond, 10*time.Minute, func() bool {
		return inDLQ(skip["A"][at]) && inDLQ(block["A"][at]) &&
			len(broker.taken("skip", "A")) == perKey-1 && flowed("skip", "B", "C") && flowed("block", "B", "C")
	})
	require.Equal(t, show(refusedThenTaken(skip["A"], at, 1+maxRetries, true)), show(broker.of("skip", "A")),
		"skip: the head's attempts, then the rest of its key after it")

	// block: the key is held behind its DLQ row, poll after poll.
	blockPolls := func() int {
		n := 0
		for _, p := range h.Snapshot().Polls {
			if p.EventType == "block" {
				n++
			}
		}
		return n
	}
	polls := blockPolls()
	for range 60 {
		require.NoError(t, s.clock.BlockUntilContext(ctx, waiters))
		require.Equal(t, show(refusedThenTaken(block["A"][:at+1], at, 1+maxRetries, true)), show(broker.of("block", "A")),
			"block: nothing after the head while its DLQ row waits for an operator")
		s.clock.Advance(time.Second)
	}
	require.GreaterOrEqual(t, blockPolls()-polls, 50, "the relay kept polling the type")
	in, args := s.inList(1, block["A"][at+1:])
	require.Equal(t, perKey-at-1, s.Count(t, s.Tables.Events, "status = 'PENDING' AND retry_count = 0 AND id IN ("+in+")", args...))

	// The operator retries it, and the broker takes it now: it goes at
	// its old place, before the events that waited behind it.
	broker.setRefuse(nil)
	require.NoError(t, s.store(t).SetStatus(ctx, block["A"][at], oncebox.DLQStatusToRetry))
	stepUntil(t, s.clock, waiters, 250*time.Millisecond, 10*time.Minute, func() bool {
		return len(broker.taken("block", "A")) == perKey
	})
	require.Equal(t, show(refusedThenTaken(block["A"], at, 1+maxRetries, false)), show(broker.of("block", "A")),
		"block: exactly the publish order")
	for _, k := range []string{"B", "C"} {
		require.Equal(t, show(refusedThenTaken(skip[k], -1, 0, false)), show(broker.of("skip", k)))
		require.Equal(t, show(refusedThenTaken(block[k], -1, 0, false)), show(broker.of("block", k)))
	}
	require.True(t, inDLQ(skip["A"][at]), "skip: the DLQ row stays for the operator")
	require.Equal(t, 1, s.Count(t, s.Tables.DLQ, ""))
}

// keeperBroker is a keyedBroker that declares it keeps the order of a key
// within a call (poller.KeyOrderKeeper): the relay may send several events
// of a key in one call.
type keeperBroker struct{ *keyedBroker }

func (keeperBroker) KeepsKeyOrder() bool { return true }

// With a publisher that keeps a key's order within a call, a batch may
// carry several events of a key: they go in id order, whatever their due
// times. Here the head came due after its successors (it failed more
// often: a later next_retry_at), as in TestOrderedRelaySeveralPerKeyUnderFailuresAndACrash,
// where a head retried alone in a full batch then went in one call with
// its successors, after them.
func testOrderedRelaySendsAKeysEventsInIDOrderWithinACall(t *testing.T, tg Target) {
	s := setup(t, tg)
	ids := s.publishKeys(t, "order-created", "A", "A", "A")
	s.exec(t, "UPDATE "+s.Tables.Events+" SET next_retry_at = "+s.P(1)+", retry_count = 3 WHERE id = "+s.P(2),
		t0.Add(2*time.Second), s.ID(ids[0]))
	s.exec(t, "UPDATE "+s.Tables.Events+" SET next_retry_at = "+s.P(1)+", retry_count = 1 WHERE id <> "+s.P(2),
		t0.Add(time.Second), s.ID(ids[0]))
	broker := keeperBroker{newKeyedBroker()}
	cfg := s.pollerConfig("order-created")
	cfg.Oncebox.Outbox.Defaults.Ordering = oncebox.OrderingKey
	s.startPoller(t, nil, broker, cfg)
	stepUntil(t, s.clock, waitersPerPoller, time.Second, time.Minute, func() bool {
		return len(broker.of("order-created", "A")) == 3
	})
	require.Equal(t, show(refusedThenTaken(ids, -1, 0, false)), show(broker.of("order-created", "A")),
		"the key's events in one call, in id order")
}
