package dialecttest

import (
	"context"
	"database/sql"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox/poller"
)

// A relay killed after the broker confirmed its batch (its database
// connection cut, so it can neither finalize nor write its heartbeat;
// its send stuck, so its goroutine never gets further) is recovered by
// another instance within the heartbeat timeout of its last heartbeat, not
// after max-batch-processing-time, and without an attempt counted. When the
// frozen instance wakes (its connection back, its send returning the
// broker's confirmation), its late finalize changes nothing: the recovery
// and the new claim gave the rows a new claim token.
func testDeadInstanceIsRecoveredWithinTheHeartbeatTimeout(t *testing.T, tg Target) {
	s := setup(t, tg)
	ids := s.publish(t, s.clock, "order-created", 5)

	var cut atomic.Bool
	dbA := &faultyDB{Beginner: s.Beginner, match: func(string) bool { return cut.Load() }}
	dbA.fails.Store(1 << 30)
	claimed := make(chan struct{})
	wake := make(chan struct{})
	frozen := newRecorder()
	frozen.fn = func(string, []*message.Message) error {
		close(claimed)
		<-wake
		return nil // the broker's confirmation, seen by a process that was frozen
	}
	hA := &hooks{}
	cfgA := s.pollerConfig("order-created")
	cfgA.InstanceID, cfgA.Hooks = "A", hA
	s.startPoller(t, dbA, frozen, cfgA)
	<-claimed
	require.Equal(t, 5, s.Count(t, s.Tables.Events, "status = 'IN_PROCESS' AND claimed_by = 'A'"), "the claim records its instance")

	rec := newRecorder()
	hB := &hooks{}
	cfgB := s.pollerConfig("order-created")
	cfgB.InstanceID, cfgB.Hooks = "B", hB
	s.startPoller(t, nil, rec, cfgB)

	// Waiting on the clock: A's keeper and clean-up (its poll loop is
	// stuck in the send), B's poll loop, keeper and clean-up. A holds
	// a batch: it writes its heartbeat.
	stepUntil(t, s.clock, 5, time.Second, time.Minute, func() bool {
		return s.Count(t, s.Tables.Instances, "instance_id = 'A'") == 1
	})
	// Alive, with a send slower than the heartbeat timeout: not
	// recovered (only max-batch-processing-time would).
	stepUntil(t, s.clock, 5, time.Second, time.Minute, func() bool { return s.clock.Since(t0) >= 30*time.Second })
	require.Equal(t, 5, s.Count(t, s.Tables.Events, "status = 'IN_PROCESS' AND claimed_by = 'A'"), "a live instance's batch is not recovered")

	// The crash.
	cut.Store(true)
	recovered := stepUntil(t, s.clock, 5, time.Second, 5*time.Minute, func() bool {
		return s.Count(t, s.Tables.Events, "claimed_by = 'A'") == 0
	})
	t.Logf("%s: recovered %s after the crash (fake clock)", tg.Name, recovered)
	require.LessOrEqual(t, recovered, 15*time.Second, "within HeartbeatTimeout + Heartbeat of the last heartbeat")
	require.GreaterOrEqual(t, recovered, 9*time.Second, "not before HeartbeatTimeout − Heartbeat")

	resent := recovered + stepUntil(t, s.clock, 5, time.Second, 5*time.Minute, func() bool {
		return rec.delivered() == 5 && s.status(t, "PROCESSED") == 5
	})
	t.Logf("%s: resent and PROCESSED %s after the crash (fake clock)", tg.Name, resent)
	require.Less(t, resent, time.Minute, "not after max-batch-processing-time (300s)")
	_, _, rows := runs(t, poller.JobRecovery, hB)
	require.Equal(t, 5, rows, "B recovered them")
	require.Zero(t, s.Count(t, s.Tables.Events, "retry_count <> 0"), "recovery counts no attempt")

	// A wakes: its finalize (MarkProcessed with its old token) is refused.
	cut.Store(false)
	close(wake)
	eventually(t, "A's finalize is seen as stale", func() bool { return len(hA.Snapshot().Stale) == 1 })
	require.Equal(t, [2]int{5, 0}, hA.Snapshot().Stale[0])
	require.Equal(t, 5, s.processed(t, "claimed_by = 'B'"))
	for _, id := range ids {
		require.Len(t, rec.of(id), 1)
	}
}

// A closed instance deletes its heartbeat; an instance that never held a
// batch for a heartbeat interval never wrote one.
func testClosedInstanceDeletesItsHeartbeat(t *testing.T, tg Target) {
	s := setup(t, tg)
	s.publish(t, s.clock, "order-created", 3)
	claimed := make(chan struct{})
	release := make(chan struct{})
	slow := newRecorder()
	slow.fn = func(string, []*message.Message) error {
		close(claimed)
		<-release
		return nil
	}
	cfg := s.pollerConfig("order-created")
	cfg.InstanceID = "slow"
	p, err := poller.New(s.Beginner, slow, s.cfg(cfg), nil)
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() { errc <- p.Run(context.Background()) }()
	<-claimed
	stepUntil(t, s.clock, 2, time.Second, time.Minute, func() bool {
		return s.Count(t, s.Tables.Instances, "instance_id = 'slow'") == 1
	})
	close(release)
	eventually(t, "the batch is finalized", func() bool { return s.status(t, "PROCESSED") == 3 })
	require.NoError(t, p.Close())
	require.NoError(t, <-errc)
	require.Zero(t, s.Count(t, s.Tables.Instances, ""), "Close deleted the heartbeat")
}

// countingDB is the real database, counting the statements sent through
// it (on the handle and in the transactions it begins) and the
// transactions begun.
type countingDB struct {
	wsql.Beginner
	stmts, txs atomic.Int64
	heartbeats atomic.Int64 // statements writing a heartbeat
	instances  string
}

func (c *countingDB) count(query string) {
	c.stmts.Add(1)
	q := strings.ToUpper(strings.TrimSpace(query))
	if strings.Contains(query, c.instances) && (strings.HasPrefix(q, "INSERT") || strings.HasPrefix(q, "MERGE")) {
		c.heartbeats.Add(1)
	}
}

func (c *countingDB) ExecContext(ctx context.Context, query string, args ...any) (wsql.Result, error) {
	c.count(query)
	return c.Beginner.ExecContext(ctx, query, args...)
}

func (c *countingDB) QueryContext(ctx context.Context, query string, args ...any) (wsql.Rows, error) {
	c.count(query)
	return c.Beginner.QueryContext(ctx, query, args...)
}

func (c *countingDB) BeginTx(ctx context.Context, opts *sql.TxOptions) (wsql.Tx, error) {
	c.txs.Add(1)
	tx, err := c.Beginner.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &countingTx{Tx: tx, c: c}, nil
}

type countingTx struct {
	wsql.Tx
	c *countingDB
}

func (t *countingTx) ExecContext(ctx context.Context, query string, args ...any) (wsql.Result, error) {
	t.c.count(query)
	return t.Tx.ExecContext(ctx, query, args...)
}

func (t *countingTx) QueryContext(ctx context.Context, query string, args ...any) (wsql.Rows, error) {
	t.c.count(query)
	return t.Tx.QueryContext(ctx, query, args...)
}

// An idle instance (no type configured, discovery on, every default)
// costs at most 100 statements an idle hour in all, heartbeat and
// recovery included: it holds no claims, so it writes no heartbeat, and
// its recovery keeps the idle schedule after one look at the start.
func testIdleInstanceCostsAtMostAHundredStatementsAnHour(t *testing.T, tg Target) {
	s := setup(t, tg)
	db := &countingDB{Beginner: s.Beginner, instances: s.Tables.Instances}
	cfg := s.discoveringConfig(nil)
	s.startPoller(t, db, newRecorder(), cfg)
	stepUntil(t, s.clock, waitersPerPoller, 5*time.Second, time.Hour+time.Minute, func() bool {
		return s.clock.Since(t0) >= time.Hour
	})
	t.Logf("%s: idle hour: %d statements (%d transactions begun), %d heartbeats",
		tg.Name, db.stmts.Load(), db.txs.Load(), db.heartbeats.Load())
	require.LessOrEqual(t, db.stmts.Load(), int64(100), "statements in an idle hour")
	require.Zero(t, db.heartbeats.Load(), "an instance that holds no claims writes no heartbeat")
	require.Zero(t, s.Count(t, s.Tables.Instances, ""))
}
