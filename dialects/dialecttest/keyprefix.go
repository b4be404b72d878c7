package dialecttest

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/poller"
)

// Several events of a key per claim (dialects.ClaimParams.PerKey, for a
// publisher that keeps a key's order within a call: docs/ordering.md).

// claimPrefix runs an ordered claim with perKey and returns the ids in the
// order the claim returned them (id order).
func (s *suite) claimPrefix(t *testing.T, eventType string, limit, perKey int) (oncebox.EventID, []oncebox.EventID) {
	t.Helper()
	return s.claimOrdered(t, dialects.ClaimParams{EventType: eventType, Limit: limit, PerKey: perKey})
}

// A claim takes up to PerKey of each key's first PENDING rows, in id
// order, never a row with an earlier one of its key left behind; the rest
// of a key waits until its batch is finalized.
func testOrderedClaimTakesKeyPrefixes(t *testing.T, tg Target) {
	s := setup(t, tg)
	ids := s.publishKeys(t, "order-created", "A", "B", "A", "A", "B", "", "A")
	a1, b1, a2, a3, b2, n1, a4 := ids[0], ids[1], ids[2], ids[3], ids[4], ids[5], ids[6]

	tok1, got := s.claimPrefix(t, "order-created", 10, 2)
	require.Equal(t, []oncebox.EventID{a1, b1, a2, b2, n1}, got, "two of each key, in id order, and the row without a key")
	_, got = s.claimPrefix(t, "order-created", 10, 2)
	require.Empty(t, got, "A and B are in flight: a3 and a4 wait")
	s.markProcessed(t, tok1, a1, b1, a2, b2, n1)

	tok2, got := s.claimPrefix(t, "order-created", 1, 10)
	require.Equal(t, []oncebox.EventID{a3}, got, "a batch of one: the key's first row")
	s.markProcessed(t, tok2, a3)
	_, got = s.claimPrefix(t, "order-created", 10, 10)
	require.Equal(t, []oncebox.EventID{a4}, got)
}

// A head that failed comes due again with a later next_retry_at than its
// successors, which sort before it and fill the claim's window: the claim
// takes the head itself, never a successor, and does not stall. While the
// head waits for its retry, the keys behind its successors flow. (The
// first version of the second claim design left such a key, and every
// key whose rows filled the window, PENDING for good:
// TestOrderedRelayUnderFailuresAndACrash stopped with 2,028 rows left.)
func testOrderedClaimTakesARetriedHeadBehindAFullWindow(t *testing.T, tg Target) {
	s := setup(t, tg)
	keys := make([]string, 10)
	for i := range keys {
		keys[i] = "A"
	}
	ids := s.publishKeys(t, "order-created", append(keys, "B")...)
	tok, got := s.claimPrefix(t, "order-created", 1, 1)
	require.Equal(t, ids[:1], got)
	s.markFailed(t, tok, ids[0], oncebox.StatusPending, s.clock.Now().Add(10*time.Second))

	tokB, got := s.claimPrefix(t, "order-created", 2, 1)
	require.Equal(t, ids[10:], got, "A's head waits for its retry, its successors behind it; B, behind them, goes")
	s.markProcessed(t, tokB, ids[10])
	s.clock.Advance(20 * time.Second)
	for _, perKey := range []int{1, 2} {
		tok, got = s.claimPrefix(t, "order-created", 2, perKey)
		require.Equal(t, ids[:1], got, "PerKey %d: the retried head, due again, before its successors", perKey)
		s.markFailed(t, tok, ids[0], oncebox.StatusPending, s.clock.Now())
	}
	tok, got = s.claimPrefix(t, "order-created", 3, 3)
	require.Equal(t, ids[:1], got, "the head alone: its successors sort before it, the window ends at them")
	s.markProcessed(t, tok, ids[0])
	_, got = s.claimPrefix(t, "order-created", 3, 3)
	require.Equal(t, ids[1:4], got)
}

// Claimers racing with PerKey > 1 never hold two batches of a key at once
// and take each key's events in id order, each once.
func testOrderedPrefixClaimersRacing(t *testing.T, tg Target) {
	multi := raceOrderedClaimers(t, setup(t, tg), 12, 20, 5, 2,
		func(rng *rand.Rand) (int, int) { return 2 + rng.IntN(10), 1 + rng.IntN(4) })
	require.Positive(t, multi, "some claims took several events of a key")
}

// raceOrderedClaimers publishes perKey events of each of keys keys, round
// robin, and runs claimers ordered claimers (each loop: claim with the
// limit and PerKey that params draws, hold a moment, mark PROCESSED)
// until every event is claimed. It fails the test when a key is claimed
// while a batch of it is in flight, a key's events are claimed out of id
// order or more than PerKey of them at once, a claim's rows are not in id
// order, or an event is claimed twice or never. A key is marked in flight
// from its claim until just before its PROCESSED update, which is still
// before any other claimer can take its successor: the check never fires
// falsely. It returns how many claims took several events of a key.
func raceOrderedClaimers(t *testing.T, s *suite, keys, perKey, claimers int, seed uint64, params func(*rand.Rand) (limit, perKey int)) int {
	t.Helper()
	var order []string
	for range perKey {
		for k := range keys {
			order = append(order, fmt.Sprintf("key-%02d", k))
		}
	}
	ids := s.publishKeys(t, "order-created", order...)
	keyOf := make(map[oncebox.EventID]string, len(ids))
	next := map[string][]oncebox.EventID{}
	for i, id := range ids {
		keyOf[id] = order[i]
		next[order[i]] = append(next[order[i]], id)
	}
	var mu sync.Mutex
	inFlight := map[string]bool{}
	var violations []string
	done, multi := 0, 0
	var wg sync.WaitGroup
	for c := range claimers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), seed))
			for idle := 0; idle < 200; {
				tok := newID(t)
				limit, most := params(rng)
				got, err := s.Dialect.Claim(context.Background(), s.Beginner, dialects.ClaimParams{EventType: "order-created",
					Limit: limit, Token: tok, Now: s.clock.Now(), Instance: fmt.Sprint("claimer-", c), ByKey: true, PerKey: most})
				mu.Lock()
				if err != nil {
					violations = append(violations, "claim: "+err.Error())
					mu.Unlock()
					return
				}
				if len(got) == 0 {
					finished := done == len(ids)
					mu.Unlock()
					if finished {
						return
					}
					idle++
					time.Sleep(time.Millisecond)
					continue
				}
				claimed := make([]oncebox.EventID, len(got))
				mine := map[string]int{}
				for i, e := range got {
					claimed[i] = e.ID
					k := keyOf[e.ID]
					if inFlight[k] {
						violations = append(violations, fmt.Sprintf("%s: %s claimed while another batch of the key is in flight", k, e.ID))
					}
					mine[k]++
					if len(next[k]) == 0 || next[k][0] != e.ID {
						violations = append(violations, fmt.Sprintf("%s: %s claimed out of order", k, e.ID))
					} else {
						next[k] = next[k][1:]
					}
					if i > 0 && bytes.Compare(got[i-1].ID[:], e.ID[:]) >= 0 {
						violations = append(violations, "the claim's rows are not in id order")
					}
				}
				for k, n := range mine {
					inFlight[k] = true
					if n > max(most, 1) {
						violations = append(violations, fmt.Sprintf("%s: %d events in a claim of PerKey %d", k, n, most))
					}
					if n > 1 {
						multi++
					}
				}
				mu.Unlock()
				time.Sleep(time.Duration(rng.IntN(1500)) * time.Microsecond)
				mu.Lock()
				for k := range mine {
					inFlight[k] = false
				}
				done += len(got)
				mu.Unlock()
				if _, err := s.Dialect.MarkProcessed(context.Background(), s.Beginner, tok, claimed, s.clock.Now()); err != nil {
					mu.Lock()
					violations = append(violations, "mark: "+err.Error())
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	require.Empty(t, violations)
	require.Equal(t, len(ids), done, "every event claimed once")
	require.Equal(t, len(ids), s.status(t, "PROCESSED"))
	return multi
}

// orderKeepingLog is a keyedLog that says it keeps a key's order within a
// call (poller.KeyOrderKeeper) and counts the calls that carried several
// events of one key.
type orderKeepingLog struct {
	*keyedLog
	mu    sync.Mutex
	multi int
}

func (l *orderKeepingLog) KeepsKeyOrder() bool { return true }

// PublishBatch makes it a poller.BatchPublisher, which a KeyOrderKeeper
// must be: every message confirmed.
func (l *orderKeepingLog) PublishBatch(topic string, msgs ...*message.Message) ([]error, error) {
	return make([]error, len(msgs)), l.Publish(topic, msgs...)
}

func (l *orderKeepingLog) Publish(topic string, msgs ...*message.Message) error {
	seen := map[string]int{}
	for _, m := range msgs {
		seen[m.Metadata.Get(oncebox.HeaderKey)]++
	}
	l.mu.Lock()
	for _, n := range seen {
		if n > 1 {
			l.multi++
			break
		}
	}
	l.mu.Unlock()
	return l.publishCall(topic, msgs)
}

// publishCall records msgs as one call: per key in the order given, and a
// violation when another call carrying one of its keys is in progress.
func (l *orderKeepingLog) publishCall(_ string, msgs []*message.Message) error {
	k := l.keyedLog
	k.mu.Lock()
	keys := map[string]bool{}
	for _, m := range msgs {
		keys[m.Metadata.Get(oncebox.HeaderKey)] = true
	}
	for key := range keys {
		if k.sending[key] {
			k.violations = append(k.violations, fmt.Sprintf("%s: two sends of the key at once", key))
		}
		k.sending[key] = true
	}
	k.mu.Unlock()
	time.Sleep(200 * time.Microsecond)
	k.mu.Lock()
	defer k.mu.Unlock()
	for key := range keys {
		k.sending[key] = false
	}
	for _, m := range msgs {
		id, err := oncebox.EventIDOf(m)
		if err != nil {
			k.violations = append(k.violations, err.Error())
		}
		key := m.Metadata.Get(oncebox.HeaderKey)
		k.perKey[key] = append(k.perKey[key], id)
	}
	return nil
}

// Two relays on an ordered type, to a publisher that keeps a key's order
// within a call: batches carry several events of a key, and the broker
// sees each key's events once, in id order, no two calls of a key at once.
func testOrderedRelayToAnOrderKeepingPublisher(t *testing.T, tg Target) {
	s := setup(t, tg)
	const keys, perKey = 20, 25
	var order []string
	for range perKey {
		for k := range keys {
			order = append(order, fmt.Sprintf("key-%02d", k))
		}
	}
	s.publishKeys(t, "order-created", order...)
	log := &orderKeepingLog{keyedLog: newKeyedLog()}
	for _, id := range []string{"A", "B"} {
		c := fastPolling(s.pollerConfig("order-created"))
		c.InstanceID = id
		c.Oncebox.Outbox.Defaults.BatchSize = 40
		c.Oncebox.Outbox.Defaults.Ordering = oncebox.OrderingKey
		s.startPoller(t, nil, log, c)
	}
	require.Eventually(t, func() bool { return s.status(t, "PROCESSED") == len(order) }, time.Minute, 10*time.Millisecond)
	log.keyedLog.mu.Lock()
	defer log.keyedLog.mu.Unlock()
	require.Empty(t, log.keyedLog.violations)
	require.Len(t, log.keyedLog.perKey, keys)
	for k, got := range log.keyedLog.perKey {
		require.Len(t, got, perKey, "%s: every event once", k)
		for i := 1; i < len(got); i++ {
			require.Negative(t, bytes.Compare(got[i-1][:], got[i][:]), "%s: %s after %s", k, got[i], got[i-1])
		}
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	require.Positive(t, log.multi, "some calls carried several events of a key")
}

var (
	_ poller.KeyOrderKeeper = (*orderKeepingLog)(nil)
	_ poller.BatchPublisher = (*orderKeepingLog)(nil)
)
