package dialecttest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/poller"
)

// gatedPublisher records the event ids it is given, in order, and holds
// its first call until open is closed (and the n-th until after[n] is
// closed) or the call's context ends (it honours the context, as a
// publisher must for Close to cut it short).
type gatedPublisher struct {
	mu    sync.Mutex
	order []string
	calls int
	open  chan struct{}
	// after holds the return of the n-th call until after[n] is closed.
	after map[int]chan struct{}
}

func (g *gatedPublisher) Publish(_ string, msgs ...*message.Message) error {
	g.mu.Lock()
	g.calls++
	call := g.calls
	g.mu.Unlock()
	gate := g.after[call]
	if call == 1 {
		gate = g.open
	}
	if gate != nil {
		select {
		case <-gate:
		case <-msgs[0].Context().Done():
			return msgs[0].Context().Err()
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, m := range msgs {
		g.order = append(g.order, m.Metadata.Get(oncebox.HeaderEventID))
	}
	return nil
}

func (g *gatedPublisher) Close() error { return nil }

func (g *gatedPublisher) sent() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.order...)
}

// While a full batch is being sent, the next one is claimed (the claim of
// batch k+1 overlaps the send of batch k), yet the broker sees the events of
// the type in claim order, each once. Before the pipelining, the first
// send held the loop and the second batch was never claimed meanwhile.
func testPipelineClaimsTheNextBatchWhileOneIsSent(t *testing.T, tg Target) {
	s := setup(t, tg)
	ids := s.publish(t, s.clock, "order-created", 30)
	pub := &gatedPublisher{open: make(chan struct{})}
	cfg := s.pollerConfig("order-created")
	cfg.Oncebox.Outbox.Defaults.BatchSize = 10
	cfg.MaxBatchesInFlight = 2
	s.startPoller(t, nil, pub, cfg)
	eventually(t, "batch 2 claimed while batch 1 is being sent", func() bool { return s.status(t, "IN_PROCESS") == 20 })
	require.Equal(t, 10, s.status(t, "PENDING"), "never more than MaxBatchesInFlight batches of a type held at once")
	close(pub.open)
	eventually(t, "every event sent", func() bool { return len(pub.sent()) == len(ids) })
	eventually(t, "every event PROCESSED", func() bool { return s.status(t, "PROCESSED") == len(ids) })
	want := make([]string, len(ids))
	for i, id := range ids {
		want[i] = id.String()
	}
	require.Equal(t, want, pub.sent(), "claim order is send order, each event once")
}

// Close with two batches held (one being sent, the next claimed) releases
// both without counting an attempt once CloseTimeout cuts the send short.
func testCloseWithTwoBatchesInFlightReleasesBoth(t *testing.T, tg Target) {
	s := setup(t, tg)
	s.publish(t, s.clock, "order-created", 20)
	pub := &gatedPublisher{open: make(chan struct{})} // never opened: the first send hangs
	defer close(pub.open)
	cfg := s.pollerConfig("order-created")
	cfg.Oncebox.Outbox.Defaults.BatchSize = 10
	cfg.CloseTimeout = 200 * time.Millisecond
	p, err := poller.New(s.Beginner, pub, s.cfg(cfg), nil)
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() { errc <- p.Run(context.Background()) }()
	eventually(t, "two batches held", func() bool { return s.status(t, "IN_PROCESS") == 20 })
	require.NoError(t, p.Close())
	require.NoError(t, <-errc)
	require.Equal(t, 20, s.Count(t, s.Tables.Events, "status = 'PENDING' AND retry_count = 0 AND claim_token IS NULL"),
		"both batches released without an attempt")
}

// A crash between the claim of batch k+1 and the finalize of batch k (here
// the finalize of the first batch is lost with the connection, while the
// second was claimed during its send) loses nothing and counts no attempt:
// the first batch's rows stay IN_PROCESS and are sent again after recovery;
// the others are sent once. Batch 2's send ends only once batch 1's
// finalize has been tried, so that the two are not merged into one
// statement (TestMergedFinalizeLostWithTheConnection is that case).
func testPipelinedFinalizeLostWhileTheNextBatchIsClaimed(t *testing.T, tg Target) {
	s := setup(t, tg)
	ids := s.publish(t, s.clock, "order-created", 30)
	tried := make(chan struct{})
	var once sync.Once
	db := &faultyDB{Beginner: s.Beginner, match: func(q string) bool {
		if !isMarkProcessed(q) {
			return false
		}
		once.Do(func() { close(tried) })
		return true
	}}
	db.fails.Store(1)
	pub := &gatedPublisher{open: make(chan struct{}), after: map[int]chan struct{}{2: tried}}
	cfg := s.pollerConfig("order-created")
	cfg.Oncebox.Outbox.Defaults.BatchSize = 10
	cfg.MaxBatchesInFlight = 2
	s.startPoller(t, db, pub, cfg)
	eventually(t, "batch 2 claimed during batch 1's send", func() bool { return s.status(t, "IN_PROCESS") == 20 })
	close(pub.open)
	eventually(t, "batches 2 and 3 PROCESSED, batch 1's finalize lost", func() bool {
		return s.status(t, "PROCESSED") == 20 && s.status(t, "IN_PROCESS") == 10
	})
	stepUntil(t, s.clock, waitersPerPoller, time.Second, 15*time.Minute, func() bool { return s.status(t, "PROCESSED") == 30 })
	sends := map[string]int{}
	for _, id := range pub.sent() {
		sends[id]++
	}
	for i, id := range ids {
		want := 1
		if i < 10 {
			want = 2 // batch 1, sent again after the recovery
		}
		require.Equal(t, want, sends[id.String()], "event %d", i)
	}
	require.Zero(t, s.Count(t, s.Tables.Events, "retry_count <> 0"), "no attempt counted")
}
