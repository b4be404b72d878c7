package dialecttest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/poller"
	"github.com/oncebox/watermill-oncebox/publisher"
)

// Per-key ordering (docs/ordering.md): the claim of a type with ordering:
// key takes the head event of each key only.

// publishKeys commits one event of eventType per entry of keys, in that
// order, in one transaction ("" for an event without a key), created at
// the suite's clock, and returns their ids (increasing).
func (s *suite) publishKeys(t *testing.T, eventType string, keys ...string) []oncebox.EventID {
	t.Helper()
	tx := s.begin(t)
	pub, err := publisher.NewPublisher(tx, publisher.Config{Dialect: s.Dialect, Clock: s.clock}, nil)
	require.NoError(t, err)
	msgs := make([]*message.Message, len(keys))
	for i, k := range keys {
		msgs[i] = message.NewMessage(watermill.NewUUID(), []byte(`{"n":1}`))
		if k != "" {
			oncebox.SetKey(msgs[i], k)
		}
	}
	require.NoError(t, pub.Publish(eventType, msgs...))
	require.NoError(t, tx.Commit())
	ids := make([]oncebox.EventID, len(msgs))
	for i, m := range msgs {
		ids[i], err = oncebox.EventIDOf(m)
		require.NoError(t, err)
	}
	return ids
}

// claimByKey runs the dialect's ordered claim of eventType (one event of
// a key per claim) and returns the claim's token and the ids claimed,
// sorted.
func (s *suite) claimByKey(t *testing.T, eventType string, limit int, block bool) (oncebox.EventID, []oncebox.EventID) {
	t.Helper()
	tok, ids := s.claimOrdered(t, dialects.ClaimParams{EventType: eventType, Limit: limit, BlockOnFailure: block})
	slices.SortFunc(ids, func(a, b oncebox.EventID) int { return bytes.Compare(a[:], b[:]) })
	return tok, ids
}

// claimOrdered runs the dialect's ordered claim p (ByKey, with a new token
// at the suite's clock) and returns the token and the ids in the order
// the claim returned them.
func (s *suite) claimOrdered(t *testing.T, p dialects.ClaimParams) (oncebox.EventID, []oncebox.EventID) {
	t.Helper()
	p.Token, p.Now, p.Instance, p.ByKey = newID(t), s.clock.Now(), "test", true
	got, err := s.Dialect.Claim(context.Background(), s.Beginner, p)
	require.NoError(t, err)
	ids := make([]oncebox.EventID, len(got))
	for i := range got {
		ids[i] = got[i].ID
	}
	return p.Token, ids
}

// markProcessed finalizes ids of the claim tok as sent.
func (s *suite) markProcessed(t *testing.T, tok oncebox.EventID, ids ...oncebox.EventID) {
	t.Helper()
	marked, err := s.Dialect.MarkProcessed(context.Background(), s.Beginner, tok, ids, s.clock.Now())
	require.NoError(t, err)
	require.Len(t, marked, len(ids))
}

// markFailed finalizes id of the claim tok as a failed attempt: back to
// PENDING until retryAt, or FAILED when status says so.
func (s *suite) markFailed(t *testing.T, tok, id oncebox.EventID, status oncebox.Status, retryAt time.Time) {
	t.Helper()
	n, err := s.Dialect.MarkFailed(context.Background(), s.Beginner, tok,
		[]dialects.FailedEvent{{ID: id, Status: status, RetryCount: 1, NextRetryAt: retryAt, Error: "refused"}}, s.clock.Now())
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
}

// The head of each key, and every event without a key, is claimed; the
// next event of a key waits while its head is in flight or retrying, and
// goes once the head is sent. A claim with a smaller batch takes heads in
// (next_retry_at, id) order.
func testOrderedClaimTakesTheHeadOfEachKey(t *testing.T, tg Target) {
	s := setup(t, tg)
	ids := s.publishKeys(t, "order-created", "A", "B", "A", "", "B", "A", "")
	a1, b1, a2, n1, b2, a3, n2 := ids[0], ids[1], ids[2], ids[3], ids[4], ids[5], ids[6]
	// Another type's rows with the same key never hold these.
	s.publishKeys(t, "order-paid", "A")

	tok1, got := s.claimByKey(t, "order-created", 2, false)
	require.Equal(t, []oncebox.EventID{a1, b1}, got, "the batch is full before the rows without a key")
	tok2, got := s.claimByKey(t, "order-created", 10, false)
	require.Equal(t, []oncebox.EventID{n1, n2}, got, "A and B are in flight: only the events without a key")
	s.markProcessed(t, tok2, n1, n2)
	_, got = s.claimByKey(t, "order-created", 10, false)
	require.Empty(t, got)

	// A's head is sent; B's fails and waits 10s for its retry.
	s.markProcessed(t, tok1, a1)
	s.markFailed(t, tok1, b1, oncebox.StatusPending, s.clock.Now().Add(10*time.Second))
	tok3, got := s.claimByKey(t, "order-created", 10, false)
	require.Equal(t, []oncebox.EventID{a2}, got, "b2 waits behind its retrying head")
	s.markProcessed(t, tok3, a2)

	s.clock.Advance(10 * time.Second)
	tok4, got := s.claimByKey(t, "order-created", 10, false)
	require.Equal(t, []oncebox.EventID{b1, a3}, got, "the retry is due: B's head again, never b2 before it")
	s.markProcessed(t, tok4, b1, a3)
	_, got = s.claimByKey(t, "order-created", 10, false)
	require.Equal(t, []oncebox.EventID{b2}, got)
}

// A head released back to PENDING (a broker outage, a recovery) is the
// head again: its successor never overtakes it. A head that comes back
// while its successor is in flight (a DLQ retry keeps the event's id)
// waits for that successor: one batch of a key in flight at a time.
func testOrderedClaimKeepsOneBatchOfAKeyInFlight(t *testing.T, tg Target) {
	s := setup(t, tg)
	ids := s.publishKeys(t, "order-created", "A", "A", "A")
	tok, got := s.claimByKey(t, "order-created", 10, false)
	require.Equal(t, ids[:1], got)
	n, err := s.Dialect.ReleaseClaims(context.Background(), s.Beginner, tok, got, s.clock.Now())
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	tok, got = s.claimByKey(t, "order-created", 10, false)
	require.Equal(t, ids[:1], got, "released, the head is claimed again")
	if s.deleted {
		// The row must stay to come back below (a DLQ retry brings back
		// a FAILED row's id; PROCESSED and back stands for it here).
		s.exec(t, "UPDATE "+s.Tables.Events+" SET status = 'PROCESSED' WHERE id = "+s.P(1), s.ID(ids[0]))
	} else {
		s.markProcessed(t, tok, got...)
	}

	// ids[1] is in flight when ids[0] comes back with its old id.
	tok, got = s.claimByKey(t, "order-created", 10, false)
	require.Equal(t, ids[1:2], got)
	s.exec(t, "UPDATE "+s.Tables.Events+" SET status = 'PENDING' WHERE id = "+s.P(1), s.ID(ids[0]))
	_, got = s.claimByKey(t, "order-created", 10, false)
	require.Empty(t, got, "the key's successor is in flight")
	s.markProcessed(t, tok, ids[1])
	tok, got = s.claimByKey(t, "order-created", 10, false)
	require.Equal(t, ids[:1], got, "the event back in the outbox goes next, at its old place")
	s.markProcessed(t, tok, got...)
	_, got = s.claimByKey(t, "order-created", 10, false)
	require.Equal(t, ids[2:], got)
}

// on-failure: skip lets the next event of a key go once its FAILED head is
// out of the outbox; block holds it while the head is FAILED or its DLQ
// row waits for an operator. An operator's retry puts the event back at
// its old place (its id is kept): it goes before the events that waited
// behind it. A resolve releases the key.
func testOrderedClaimAfterAHeadFailed(t *testing.T, tg Target) {
	s := setup(t, tg)
	ctx := context.Background()
	st := s.store(t)
	for _, block := range []bool{false, true} {
		eventType := fmt.Sprintf("block-%v", block)
		ids := s.publishKeys(t, eventType, "A", "A", "A", "B")
		tok, got := s.claimByKey(t, eventType, 10, block)
		require.Equal(t, []oncebox.EventID{ids[0], ids[3]}, got)
		s.markProcessed(t, tok, ids[3])
		s.markFailed(t, tok, ids[0], oncebox.StatusFailed, s.clock.Now())

		_, got = s.claimByKey(t, eventType, 10, block)
		if !block {
			require.Equal(t, ids[1:2], got, "skip: the FAILED head does not hold its key")
			require.Equal(t, 1, s.moveAll(t))
			continue
		}
		require.Empty(t, got, "block: the FAILED head holds its key")
		require.Equal(t, 1, s.moveAll(t))
		_, got = s.claimByKey(t, eventType, 10, block)
		require.Empty(t, got, "block: the head's DLQ row holds its key")

		// The operator retries it: it comes back with its id, first.
		require.NoError(t, st.SetStatus(ctx, ids[0], oncebox.DLQStatusToRetry))
		_, got = s.claimByKey(t, eventType, 10, block)
		require.Empty(t, got, "TO_RETRY still holds the key")
		moved, err := s.Dialect.TransferDLQToOutbox(ctx, s.Beginner, s.clock.Now(), 100)
		require.NoError(t, err)
		require.Equal(t, 1, moved)
		tok, got = s.claimByKey(t, eventType, 10, block)
		require.Equal(t, ids[:1], got, "the retried event takes its old place, before those that waited")

		// It fails for good again; this time the operator resolves it.
		s.markFailed(t, tok, ids[0], oncebox.StatusFailed, s.clock.Now())
		require.Equal(t, 1, s.moveAll(t))
		_, got = s.claimByKey(t, eventType, 10, block)
		require.Empty(t, got)
		require.NoError(t, st.SetStatus(ctx, ids[0], oncebox.DLQStatusResolved))
		_, got = s.claimByKey(t, eventType, 10, block)
		require.Equal(t, ids[1:2], got, "resolved: the key goes on")
	}
}

// Claimers racing on the same keys never hold two events of a key at
// once, and take each key's events in id order, each once. Each claimer
// loops claim → hold a moment → mark PROCESSED; a key is marked in flight
// from its claim until just before its PROCESSED update, which is still
// before any other claimer can take its successor: the check never fires
// falsely. On MySQL/MariaDB this is the test of the two-statement claim
// (a plain read of the heads, then the lock): in a single locking read
// whose probe the optimizer runs as a join, a head locked by another
// claimer is skipped and its successor taken (measured on MariaDB 10.11
// with the LEFT JOIN form; docs/ordering.md). With the NOT EXISTS probe
// inside FOR UPDATE SKIP LOCKED, MariaDB 10.11 passed this test three
// times: the test guards the form, it cannot tell the two apart there.
func testOrderedClaimersRacing(t *testing.T, tg Target) {
	multi := raceOrderedClaimers(t, setup(t, tg), 20, 25, 6, 1,
		func(rng *rand.Rand) (int, int) { return 1 + rng.IntN(8), 1 })
	require.Zero(t, multi, "PerKey 1: one event of a key per claim")
}

// keyedLog is a message.Publisher that logs, per key, the event ids it
// delivers in the order the broker would see them, and reports two calls
// in progress at once that carry the same key. fail, when set, refuses a
// whole call before anything is delivered (Publish), or one message
// (publishBatch).
type keyedLog struct {
	mu         sync.Mutex
	perKey     map[string][]oncebox.EventID
	sending    map[string]bool
	violations []string
	fail       func() bool
	// sameKey is the most messages of one key that one call carried.
	sameKey int
}

func newKeyedLog() *keyedLog {
	return &keyedLog{perKey: map[string][]oncebox.EventID{}, sending: map[string]bool{}}
}

var errRefused = errors.New("refused by the test broker")

// send delivers msgs, but those that refuse picks, after the broker's
// round trip, and returns one error per message.
func (l *keyedLog) send(msgs []*message.Message, refuse func(l *keyedLog) []bool) []error {
	keys := map[string]int{}
	for _, m := range msgs {
		keys[m.Metadata.Get(oncebox.HeaderKey)]++
	}
	l.mu.Lock()
	for k, n := range keys {
		l.sameKey = max(l.sameKey, n)
		if l.sending[k] {
			l.violations = append(l.violations, fmt.Sprintf("%s: two sends of the key at once", k))
		}
		l.sending[k] = true
	}
	refused := refuse(l)
	l.mu.Unlock()
	// The broker's round trip: another send of a key would overlap it.
	time.Sleep(200 * time.Microsecond)
	l.mu.Lock()
	defer l.mu.Unlock()
	for k := range keys {
		l.sending[k] = false
	}
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		if refused[i] {
			errs[i] = errRefused
			continue
		}
		id, err := oncebox.EventIDOf(m)
		if err != nil {
			l.violations = append(l.violations, err.Error())
		}
		k := m.Metadata.Get(oncebox.HeaderKey)
		l.perKey[k] = append(l.perKey[k], id)
	}
	return errs
}

// Publish delivers the whole call, or refuses it whole.
func (l *keyedLog) Publish(_ string, msgs ...*message.Message) error {
	errs := l.send(msgs, func(l *keyedLog) []bool {
		refuse := l.fail != nil && l.fail()
		out := make([]bool, len(msgs))
		for i := range out {
			out[i] = refuse
		}
		return out
	})
	if len(errs) > 0 && errs[0] != nil {
		return errRefused
	}
	return nil
}

// publishBatch delivers msgs as a broker that keeps the order of a key
// within a call (Kafka's idempotent producer): fail refuses single
// messages, and a refused message fails the later ones of its key in the
// call.
func (l *keyedLog) publishBatch(msgs []*message.Message) []error {
	return l.send(msgs, func(l *keyedLog) []bool {
		out := make([]bool, len(msgs))
		failedKeys := map[string]bool{}
		for i, m := range msgs {
			k := m.Metadata.Get(oncebox.HeaderKey)
			out[i] = failedKeys[k] || l.fail != nil && l.fail()
			failedKeys[k] = out[i]
		}
		return out
	})
}

func (l *keyedLog) Close() error { return nil }

// keeperLog is a keyedLog as a poller.BatchPublisher and
// poller.KeyOrderKeeper: the relay may send several events of a key in one
// call.
type keeperLog struct{ *keyedLog }

func (l keeperLog) PublishBatch(_ string, msgs ...*message.Message) ([]error, error) {
	return l.publishBatch(msgs), nil
}

func (keeperLog) KeepsKeyOrder() bool { return true }

// killedPublisher delivers its instance's calls through log until the
// kill-th or the first after it that delivers at least minBatch messages:
// that call is delivered, then the instance dies (cut cuts its database
// connection) and the call never returns until the test ends. Keeper, it
// sends as keeperLog does (killedKeeper).
type killedPublisher struct {
	log      *keyedLog
	keeper   bool
	kill     int
	minBatch int
	calls    int
	dead     bool
	cut      func()
	gone     chan struct{}
	mu       sync.Mutex
	sent     []oncebox.EventID // every id it delivered
	// lastCall holds the ids the deadly call delivered, never finalized.
	lastCall []oncebox.EventID
}

func (k *killedPublisher) deliver(topic string, msgs []*message.Message) []error {
	var errs []error
	if k.keeper {
		errs = k.log.publishBatch(msgs)
	} else if err := k.log.Publish(topic, msgs...); err != nil {
		return []error{err}
	}
	k.mu.Lock()
	k.calls++
	var ok []oncebox.EventID
	for i, m := range msgs {
		if errs == nil || errs[i] == nil {
			id, _ := oncebox.EventIDOf(m)
			ok = append(ok, id)
		}
	}
	dies := !k.dead && k.calls >= k.kill && len(ok) >= k.minBatch
	k.dead = k.dead || dies
	k.sent = append(k.sent, ok...)
	if dies {
		k.lastCall = ok
	}
	k.mu.Unlock()
	if dies {
		k.cut()
		<-k.gone
	}
	return errs
}

func (k *killedPublisher) Publish(topic string, msgs ...*message.Message) error {
	if errs := k.deliver(topic, msgs); len(errs) > 0 {
		return errs[0]
	}
	return nil
}

func (k *killedPublisher) Close() error { return nil }

// killedKeeper is a killedPublisher that keeps key order (keeperLog).
type killedKeeper struct{ *killedPublisher }

func (k killedKeeper) PublishBatch(topic string, msgs ...*message.Message) ([]error, error) {
	return k.deliver(topic, msgs), nil
}

func (killedKeeper) KeepsKeyOrder() bool { return true }

// sentHooks records, besides what pollertest.Hooks does, the ids a relay
// reported sent: confirmed by the broker and marked PROCESSED by it.
type sentHooks struct {
	hooks
	mu  sync.Mutex
	ids map[oncebox.EventID]bool
}

func (h *sentHooks) Sent(eventType string, ids []oncebox.EventID) {
	h.hooks.Sent(eventType, ids)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ids == nil {
		h.ids = map[oncebox.EventID]bool{}
	}
	for _, id := range ids {
		h.ids[id] = true
	}
}

// finalized reports whether id was reported sent.
func (h *sentHooks) finalized(id oncebox.EventID) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ids[id]
}

// Four relays on one ordered type, 200 keys × 50 events (the issue's
// scale), sends refused at random (5 % of calls, retried after 1ms), and
// one relay, A, killed in the middle of a batch: after the broker confirmed
// its third call (or the first after it of at least 10 events) and before
// it recorded it. The publisher is a plain one, so a batch holds at most
// one event of a key. What the broker sees:
//
//   - per key, no id ever after a greater one of its key was confirmed:
//     the first deliveries of a key strictly increasing, and a resend only
//     right after its own first delivery, never behind a later event;
//   - every event exactly once, except A's deliveries that A did not
//     finalize (its killed call, and any earlier call whose finalize the
//     crash cut off): exactly twice, A's and the resend after the recovery
//     of A's claims. A live relay's batch is never sent twice (its
//     heartbeat keeps it its own);
//   - no two sends of a key at once.
func testOrderedRelayUnderFailuresAndACrash(t *testing.T, tg Target) { orderedCrash(t, tg, false) }

// TestOrderedRelayUnderFailuresAndACrash, 100 keys × 30 events, with a
// publisher that keeps the order of a key within a call (poller.KeyOrderKeeper, as the kafka
// publisher with its recommended config): a batch may hold several events
// of a key, in order (the events are published in runs of 10 of a key,
// so that the claim's window holds several); 2 % of the messages are
// refused one by one, and a
// refused message fails the later ones of its key in the call. The same,
// but for the resends: A's killed call may hold several events of a key,
// which are all sent again, from the first: a key's resends go back past
// its events of the killed batch (the consumer's inbox drops them), never
// past an event that was finalized. So, per key: first deliveries strictly
// increasing, never behind anything delivered before; resends strictly
// increasing, each after every event of its key delivered once only.
func testOrderedRelaySeveralPerKeyUnderFailuresAndACrash(t *testing.T, tg Target) {
	orderedCrash(t, tg, true)
}

// orderedCrash is the test of TestOrderedRelayUnderFailuresAndACrash; keeper
// gives the relays a poller.KeyOrderKeeper publisher.
func orderedCrash(t *testing.T, tg Target, keeper bool) {
	s := setup(t, tg)
	keys, perKey := 200, 50 // the scale
	if keeper {
		keys, perKey = 100, 30 // a variant: a third of the run time
	}
	var ids []oncebox.EventID
	for range perKey / 10 {
		var order []string
		for i := range 10 * keys {
			// Round robin over the keys; a key order keeper gets runs of
			// 10 events of a key instead, so that a window of due rows
			// holds several events of a key.
			k := i % keys
			if keeper {
				k = i / 10
			}
			order = append(order, fmt.Sprintf("key-%03d", k))
		}
		ids = append(ids, s.publishKeys(t, "order-created", order...)...)
	}
	total := keys * perKey

	log := newKeyedLog()
	var rmu sync.Mutex
	rng := rand.New(rand.NewPCG(7, 7))
	failPct := 5 // of calls
	if keeper {
		failPct = 2 // of messages
	}
	log.fail = func() bool {
		rmu.Lock()
		defer rmu.Unlock()
		return rng.IntN(100) < failPct
	}
	cfg := func(id string, h poller.Hooks) poller.Config {
		c := fastPolling(s.pollerConfig("order-created"))
		c.InstanceID, c.Hooks = id, h
		// Short enough to recover A within seconds, long enough that a
		// live relay slowed by -race on a loaded machine is not taken
		// for dead (its batch would be sent twice, which fails the
		// test: see the stale finalizes in its message).
		c.Heartbeat, c.HeartbeatTimeout = 200*time.Millisecond, 10*time.Second
		c.OutageBackoff = poller.Schedule{Min: 5 * time.Millisecond, Max: 20 * time.Millisecond, Multiplier: 2}
		c.Oncebox.Outbox.Defaults.BatchSize = 25
		c.Oncebox.Outbox.Defaults.MaxRetries = oncebox.Int(oncebox.MaxRetriesLimit)
		c.Oncebox.Outbox.Defaults.Backoff = oncebox.BackoffSettings{Delay: time.Millisecond, Multiplier: 1}
		c.Oncebox.Outbox.Defaults.Ordering = oncebox.OrderingKey
		return c
	}

	var cut atomic.Bool
	dbA := &faultyDB{Beginner: s.Beginner, match: func(string) bool { return cut.Load() }}
	dbA.fails.Store(1 << 30)
	killed := &killedPublisher{log: log, keeper: keeper, kill: 3, minBatch: 10, cut: func() { cut.Store(true) }, gone: make(chan struct{})}
	var pubA, pubLive message.Publisher = killed, log
	if keeper {
		pubA, pubLive = killedKeeper{killed}, keeperLog{log}
	}
	hA := &sentHooks{}
	s.startPoller(t, dbA, pubA, cfg("A", hA))
	t.Cleanup(func() { close(killed.gone) }) // runs before A's Close
	live := []*hooks{{}, {}, {}}
	for i, id := range []string{"B", "C", "D"} {
		s.startPoller(t, nil, pubLive, cfg(id, live[i]))
	}

	start := time.Now()
	require.Eventually(t, func() bool { return s.status(t, "PROCESSED") == total }, 3*time.Minute, 20*time.Millisecond,
		"every event PROCESSED")
	t.Logf("%s: %d events over %d keys relayed in %s by 4 relays, one killed",
		tg.Name, total, keys, time.Since(start).Round(time.Millisecond))

	// What A delivered and did not finalize may be delivered twice.
	killed.mu.Lock()
	dead, sentByA, lastCall := killed.dead, slices.Clone(killed.sent), slices.Clone(killed.lastCall)
	killed.mu.Unlock()
	require.True(t, dead, "A died")
	require.GreaterOrEqual(t, len(lastCall), killed.minBatch)
	require.Equal(t, lastCall, sentByA[len(sentByA)-len(lastCall):], "A sent nothing after its killed call")
	resendable := map[oncebox.EventID]bool{}
	byA := map[oncebox.EventID]bool{}
	for _, id := range sentByA {
		require.False(t, byA[id], "A delivered %s once", id)
		byA[id] = true
		if !hA.finalized(id) {
			resendable[id] = true
		}
	}
	for _, id := range lastCall {
		require.True(t, resendable[id], "A's killed call was never finalized by A")
	}
	refused, stale := 0, 0
	for _, h := range live {
		snap := h.Snapshot()
		refused += len(snap.Failures)
		stale += len(snap.Stale)
	}
	require.NotZero(t, refused, "sends were refused at random")

	log.mu.Lock()
	defer log.mu.Unlock()
	require.Empty(t, log.violations)
	require.Len(t, log.perKey, keys)
	if keeper {
		require.Greater(t, log.sameKey, 1, "batches carried several events of a key")
	} else {
		require.Equal(t, 1, log.sameKey, "a plain publisher's batch carries one event of a key")
	}
	count := map[oncebox.EventID]int{}
	for k, got := range log.perKey {
		var top, topOnce, topResent oncebox.EventID // greatest so far: delivered, not resendable, resent
		for i, id := range got {
			count[id]++
			after := func(a oncebox.EventID) bool { return bytes.Compare(id[:], a[:]) > 0 }
			switch {
			case !keeper:
				require.True(t, i == 0 || !after(top) && id == top || after(top),
					"%s: %s delivered after %s was confirmed: backwards", k, id, top)
			case count[id] == 1:
				require.True(t, i == 0 || after(top), "%s: %s first delivered after %s", k, id, top)
			default:
				require.True(t, resendable[id] && after(topOnce) && after(topResent),
					"%s: %s resent after %s (delivered once) or %s (resent)", k, id, topOnce, topResent)
				topResent = id
			}
			if i == 0 || after(top) {
				top = id
			}
			if !resendable[id] && (i == 0 || after(topOnce)) {
				topOnce = id
			}
		}
	}
	for _, id := range ids {
		want := 1
		if resendable[id] {
			want = 2
		}
		require.Equal(t, want, count[id], "deliveries of %s (A delivered and did not finalize it: %v; "+
			"finalizes of the live relays that found their claim taken: %d)", id, resendable[id], stale)
	}
	require.Len(t, count, total, "nothing else delivered")
	t.Logf("%s: %d deliveries again, all of A's unfinalized ones (its killed call: %d); %d sends refused; "+
		"at most %d events of a key in a call", tg.Name, len(resendable), len(lastCall), refused, log.sameKey)
}
