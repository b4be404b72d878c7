package dialecttest

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
)

// Per-key ordering under skewed traffic (docs/ordering.md, "Fairness"): a
// key that cannot yield a candidate (blocked behind a failed head) or can
// yield only its first rows (a burst deeper than the batch) takes no more
// than its share of the claim's window, so the keys behind it go.

// A key held by on-failure: block, with a batch and more of due PENDING
// rows ahead of every other key (its producer kept writing), holds only
// itself: the other keys are claimed, in order, while its head is FAILED
// in the outbox and while its DLQ row waits for an operator. Before, the
// claim's window held only the blocked key's rows and every claim took
// nothing. A PENDING row of the key before the blocking one stays a
// candidate (the block holds the rows after the failed event only).
func testOrderedClaimPassesABlockedKeysBacklog(t *testing.T, tg Target) {
	s := setup(t, tg)
	const batch, behind = 5, 12
	a := s.publishKeys(t, "order-created", "A")
	tok, got := s.claimByKey(t, "order-created", batch, true)
	require.Equal(t, a, got)
	s.markFailed(t, tok, a[0], oncebox.StatusFailed, s.clock.Now())
	// A's producer keeps writing; then the other keys.
	a = append(a, s.publishKeys(t, "order-created", slices.Repeat([]string{"A"}, behind)...)...)
	others := s.publishKeys(t, "order-created", "B", "C", "B", "C", "B", "C")

	// drain claims until a claim takes nothing, each claim sent at
	// once, and returns the claims' rows in claim order.
	drain := func(n int) (out [][]oncebox.EventID) {
		for range n {
			tok, got := s.claimByKey(t, "order-created", batch, true)
			if len(got) == 0 {
				return out
			}
			s.markProcessed(t, tok, got...)
			out = append(out, got)
		}
		return out
	}
	require.Equal(t, [][]oncebox.EventID{{others[0], others[1]}}, drain(1),
		"A's head is FAILED: B and C go, in order, past A's %d due rows", behind)
	require.Equal(t, 1, s.moveAll(t))
	require.Equal(t, [][]oncebox.EventID{{others[2], others[3]}, {others[4], others[5]}}, drain(10),
		"A's head waits in the DLQ: B and C go on, in order")
	in, args := s.inList(1, a[1:])
	require.Equal(t, behind, s.Count(t, s.Tables.Events, "status = 'PENDING' AND id IN ("+in+")", args...),
		"A stays held")

	// A row of A before the blocking one is no successor of it.
	more := s.publishKeys(t, "order-created", "D", "D")
	s.exec(t, "UPDATE "+s.Tables.Events+" SET status = 'FAILED' WHERE id = "+s.P(1), s.ID(more[1]))
	require.Equal(t, [][]oncebox.EventID{{more[0]}}, drain(10), "D's first event is before its FAILED one")
}

// A hot key with a burst of ten batches ahead of another key's event does
// not hold that event behind its burst: the window holds the hot key's
// first row only, and the other key's event goes with the hot key's
// second. Before, the window was the hot key's first batch-size rows and
// the other event went out with the hot key's 47th event.
func testOrderedClaimPassesAHotKeysBurst(t *testing.T, tg Target) {
	s := setup(t, tg)
	const batch, burst = 5, 50
	hot := s.publishKeys(t, "order-created", slices.Repeat([]string{"H"}, burst)...)
	k := s.publishKeys(t, "order-created", "K")[0]

	hotBefore := 0
	for claims := 0; ; claims++ {
		require.Less(t, claims, burst+1, "every event claimed")
		tok, got := s.claimByKey(t, "order-created", batch, false)
		require.NotEmpty(t, got)
		s.markProcessed(t, tok, got...)
		if slices.Contains(got, k) {
			for _, id := range got {
				if id != k {
					hotBefore++
				}
			}
			break
		}
		hotBefore += len(got)
	}
	require.LessOrEqual(t, hotBefore, batch,
		"K's event goes before the hot key's %dth event (it went with %d of the hot key's %d events)", batch+1, hotBefore, len(hot))
}

// heldBroker is a BatchPublisher (one event of a key per batch) that holds
// the send of the events hold names until release is closed, and records
// the order of the events it took.
type heldBroker struct {
	hold    func(oncebox.EventID) bool
	release chan struct{}
	mu      sync.Mutex
	taken   []oncebox.EventID
}

func (b *heldBroker) PublishBatch(_ string, msgs ...*message.Message) ([]error, error) {
	for _, m := range msgs {
		id, err := oncebox.EventIDOf(m)
		if err != nil {
			return nil, err
		}
		if b.hold(id) {
			<-b.release
		}
		b.mu.Lock()
		b.taken = append(b.taken, id)
		b.mu.Unlock()
	}
	return make([]error, len(msgs)), nil
}

func (b *heldBroker) Publish(topic string, msgs ...*message.Message) error {
	_, err := b.PublishBatch(topic, msgs...)
	return err
}

func (b *heldBroker) Close() error { return nil }

// While a partial ordered batch is in flight (the hot key's head, one
// event of a key per batch, whose send the broker holds), the relay claims
// the other keys beside it: the other key's event is claimed (IN_PROCESS)
// before the hot key's batch was sent. Before, the loop made no claim while
// a partial batch was in flight and the event stayed PENDING.
func testOrderedRelayClaimsOtherKeysBesideAPartialBatch(t *testing.T, tg Target) {
	s := setup(t, tg)
	const batch, burst = 5, 20
	hot := s.publishKeys(t, "order-created", slices.Repeat([]string{"H"}, burst)...)
	k := s.publishKeys(t, "order-created", "K")[0]
	broker := &heldBroker{hold: func(id oncebox.EventID) bool { return id == hot[0] }, release: make(chan struct{})}
	released := false
	release := func() {
		if !released {
			released = true
			close(broker.release)
		}
	}
	defer release()

	cfg := s.pollerConfig("order-created")
	d := &cfg.Oncebox.Outbox.Defaults
	d.Ordering = oncebox.OrderingKey
	d.BatchSize = batch
	d.Polling = oncebox.PollingSettings{MinFixedDelay: 100 * time.Millisecond, MaxFixedDelay: time.Second, Multiplier: 2}
	s.startPoller(t, nil, broker, cfg)

	claimed := func() bool {
		return s.Count(t, s.Tables.Events, "status = 'IN_PROCESS' AND id = "+s.P(1), s.ID(k)) == 1
	}
	require.Eventually(t, claimed, 10*time.Second, 5*time.Millisecond,
		"K's event is claimed while the hot key's head is being sent")
	release()

	eventually(t, "every event sent", func() bool {
		s.clock.Advance(10 * time.Millisecond) // past any poll that found nothing
		return s.status(t, "PROCESSED") == burst+1
	})
	broker.mu.Lock()
	taken := slices.Clone(broker.taken)
	broker.mu.Unlock()
	var hotTaken []oncebox.EventID
	for _, id := range taken {
		if id != k {
			hotTaken = append(hotTaken, id)
		}
	}
	require.Equal(t, fmt.Sprint(hot), fmt.Sprint(hotTaken), "the hot key in order")
	require.True(t, slices.IsSortedFunc(hotTaken, func(a, b oncebox.EventID) int { return bytes.Compare(a[:], b[:]) }))
}
