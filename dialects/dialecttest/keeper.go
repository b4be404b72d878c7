package dialecttest

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/poller"
)

// slowDB is the real database with latency added: every statement (on the
// handle and in the transactions it begins) takes delay more. The sleep is
// the latency being simulated, not a wait for a condition.
type slowDB struct {
	wsql.Beginner
	delay time.Duration
}

func (s *slowDB) ExecContext(ctx context.Context, query string, args ...any) (wsql.Result, error) {
	time.Sleep(s.delay)
	return s.Beginner.ExecContext(ctx, query, args...)
}

func (s *slowDB) QueryContext(ctx context.Context, query string, args ...any) (wsql.Rows, error) {
	time.Sleep(s.delay)
	return s.Beginner.QueryContext(ctx, query, args...)
}

func (s *slowDB) BeginTx(ctx context.Context, opts *sql.TxOptions) (wsql.Tx, error) {
	tx, err := s.Beginner.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &slowTx{Tx: tx, delay: s.delay}, nil
}

type slowTx struct {
	wsql.Tx
	delay time.Duration
}

func (t *slowTx) ExecContext(ctx context.Context, query string, args ...any) (wsql.Result, error) {
	time.Sleep(t.delay)
	return t.Tx.ExecContext(ctx, query, args...)
}

func (t *slowTx) QueryContext(ctx context.Context, query string, args ...any) (wsql.Rows, error) {
	time.Sleep(t.delay)
	return t.Tx.QueryContext(ctx, query, args...)
}

// A live relay is never taken for dead (docs/design.md, "Recovery after a
// crash"): relay A's statements are slow (25 ms each) and its one
// connection slot is wanted at once by the claims and finalizes of many
// busy types, so a statement waits seconds for the slot — longer than the
// heartbeat timeout. Its heartbeat and recovery have a slot of their own,
// and a claim's claimed_at is the time it was made, after its slot: relay
// B's recovery, run every heartbeat while rows are IN_PROCESS, returns none
// of A's claims to PENDING; no finalize of A is stale; every event is
// PROCESSED and delivered once, with no attempt counted.
//
// On the real clock: the contention is real time spent waiting for a slot.
func testSlowBusyRelayKeepsItsClaims(t *testing.T, tg Target) {
	s := setup(t, tg)
	const (
		types   = 32
		perType = 20
	)
	names := make([]string, types)
	var ids []oncebox.EventID
	for i := range names {
		names[i] = fmt.Sprintf("busy-%02d", i)
		ids = append(ids, s.publish(t, nil, names[i], perType)...)
	}
	live := func(c poller.Config) poller.Config {
		c = fastPolling(c)
		c.Heartbeat, c.HeartbeatTimeout = 250*time.Millisecond, time.Second
		c.DisableWakeOnCommit = true
		return c
	}

	hA := &hooks{}
	cfgA := live(s.pollerConfig(names...))
	cfgA.Oncebox.Outbox.Defaults.BatchSize = 10
	cfgA.InstanceID, cfgA.Hooks, cfgA.MaxConcurrentQueries = "A", hA, 1
	rec := newRecorder()

	hB := &hooks{}
	cfgB := live(s.pollerConfig("idle"))
	cfgB.InstanceID, cfgB.Hooks = "B", hB
	s.startPoller(t, nil, newRecorder(), cfgB)
	s.startPoller(t, &slowDB{Beginner: s.Beginner, delay: 25 * time.Millisecond}, rec, cfgA)

	start := time.Now()
	require.Eventually(t, func() bool {
		return s.status(t, "PROCESSED") == len(ids) || len(hA.Snapshot().Stale) > 0
	}, 3*time.Minute, 20*time.Millisecond, "every event PROCESSED")
	_, _, recoveredByB := runs(t, poller.JobRecovery, hB)
	_, _, recoveredByA := runs(t, poller.JobRecovery, hA)
	t.Logf("%s: %d events of %d types PROCESSED in %s (real clock); B's recovery ran %d times",
		tg.Name, len(ids), types, time.Since(start).Round(time.Millisecond), len(hB.Snapshot().Jobs))
	require.Empty(t, hA.Snapshot().Stale, "no finalize of the live relay is stale")
	require.Zero(t, recoveredByB, "B's recovery took none of A's live claims")
	require.Zero(t, recoveredByA, "nor did A's own")
	require.Equal(t, len(ids), s.status(t, "PROCESSED"))
	require.Zero(t, s.Count(t, s.Tables.Events, "retry_count <> 0"), "no attempt counted")
	for _, id := range ids {
		require.Len(t, rec.of(id), 1, "event %s delivered once", id)
	}
}
