package dialecttest

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
)

// The ordered claim's walk of the keys (docs/ordering.md, "Fairness"):
// when the window's read was cut at 10 × batch-size rows, all of held
// keys, and yielded fewer candidates than the batch, the claim walks the
// type's keys through the key index and takes the due head of each key
// that is not held.

// walkDrain claims eventType (batch rows, one event of a key per claim,
// with on-failure: block when block) until a claim takes nothing, marks
// every claim sent at once, and returns the ids in the order they were
// claimed (each claim's rows in id order).
func (s *suite) walkDrain(t *testing.T, eventType string, batch int, block bool) (out []oncebox.EventID) {
	t.Helper()
	for range 100 {
		tok, got := s.claimByKey(t, eventType, batch, block)
		if len(got) == 0 {
			return out
		}
		s.markProcessed(t, tok, got...)
		out = append(out, got...)
	}
	t.Fatal("the claims never came back empty")
	return nil
}

// requireKeyOrder checks that got holds exactly the ids of want, each key's
// ids (want's rows of one key, in publish order) in order.
func requireKeyOrder(t *testing.T, want [][]oncebox.EventID, got []oncebox.EventID) {
	t.Helper()
	var all []oncebox.EventID
	for _, key := range want {
		all = append(all, key...)
	}
	require.Len(t, got, len(all), "every event of the other keys claimed")
	for _, key := range want {
		at := -1
		for _, id := range key {
			i := slices.Index(got, id)
			require.GreaterOrEqual(t, i, 0, "event %s claimed", id)
			require.Greater(t, i, at, "the key's events in order")
			at = i
		}
	}
	require.ElementsMatch(t, all, got, "the other keys' events, and only those")
}

// othersAfter publishes two events for each of five keys, interleaved, and
// returns each key's ids in publish order.
func (s *suite) othersAfter(t *testing.T, eventType, prefix string) [][]oncebox.EventID {
	t.Helper()
	keys := []string{prefix + "1", prefix + "2", prefix + "3", prefix + "4", prefix + "5"}
	ids := s.publishKeys(t, eventType, append(slices.Clone(keys), keys...)...)
	out := make([][]oncebox.EventID, len(keys))
	for i := range keys {
		out[i] = []oncebox.EventID{ids[i], ids[len(keys)+i]}
	}
	return out
}

// A key held by on-failure: block with 200 due rows ahead of every other
// key (40 batches: beyond the window's cap of 10 × batch-size rows read)
// holds only itself: the five keys published after it are claimed, in
// order, while its head is FAILED in the outbox and while its DLQ row
// waits for an operator. Before the walk, the window held only the blocked
// key's rows and every claim took nothing.
func testOrderedClaimWalksPastABlockedKeysDeepBacklog(t *testing.T, tg Target) {
	s := setup(t, tg)
	const batch, behind = 5, 200
	a := s.publishKeys(t, "order-created", "A")
	tok, got := s.claimByKey(t, "order-created", batch, true)
	require.Equal(t, a, got)
	s.markFailed(t, tok, a[0], oncebox.StatusFailed, s.clock.Now())
	a = append(a, s.publishKeys(t, "order-created", slices.Repeat([]string{"A"}, behind)...)...)
	others := s.othersAfter(t, "order-created", "B")

	requireKeyOrder(t, others, s.walkDrain(t, "order-created", batch, true))

	// The head waits in the DLQ: the next keys go too.
	require.Equal(t, 1, s.moveAll(t))
	more := s.othersAfter(t, "order-created", "C")
	requireKeyOrder(t, more, s.walkDrain(t, "order-created", batch, true))

	in, args := s.inList(1, a[1:])
	require.Equal(t, behind, s.Count(t, s.Tables.Events, "status = 'PENDING' AND id IN ("+in+")", args...),
		"A stays held")
}

// Keys whose heads wait for a retry, with 200 due rows behind those heads
// ahead of every other key, hold only themselves: the five keys published
// after them are claimed, in order, while the heads wait; once the heads
// come due, each retried head goes first in its key.
func testOrderedClaimWalksPastWaitingKeysDeepBacklog(t *testing.T, tg Target) {
	s := setup(t, tg)
	const batch, perKey = 5, 50
	waitKeys := []string{"W1", "W2", "W3", "W4"}
	heads := s.publishKeys(t, "order-created", waitKeys...)
	tok, got := s.claimByKey(t, "order-created", batch, false)
	require.Equal(t, heads, got)
	retryAt := s.clock.Now().Add(time.Hour)
	for _, id := range heads {
		s.markFailed(t, tok, id, oncebox.StatusPending, retryAt)
	}
	var rest []string
	for range perKey {
		rest = append(rest, waitKeys...)
	}
	behind := s.publishKeys(t, "order-created", rest...)
	others := s.othersAfter(t, "order-created", "B")

	requireKeyOrder(t, others, s.walkDrain(t, "order-created", batch, false))
	in, args := s.inList(1, behind)
	require.Equal(t, len(behind), s.Count(t, s.Tables.Events, "status = 'PENDING' AND id IN ("+in+")", args...),
		"the waiting keys stay held")

	s.clock.Advance(time.Hour)
	_, got = s.claimByKey(t, "order-created", batch, false)
	require.Equal(t, heads, got, "each retried head first")
}
