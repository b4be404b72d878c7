package metrics_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox/internal/pgtest"
	"github.com/oncebox/watermill-oncebox/metrics"
)

// xminStatements counts the xmin collector's statements among the recorded
// ones.
func xminStatements(tr *pgtest.StatementCounter) int {
	n := 0
	for _, q := range tr.Statements() {
		if strings.Contains(q, "pg_prepared_xacts") {
			n++
		}
	}
	return n
}

// TestXminReportsAHeldTransaction opens a transaction with an xid on the
// machine's PostgreSQL, assigns more xids after it, and requires the
// backend gauges to report at least its age. Other sessions of the shared
// server may hold an older one: the gauge is a maximum, so the test
// requires at least, never exactly.
func TestXminReportsAHeldTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.NewSchema(t)
	holder, err := pgx.Connect(ctx, pgtest.DSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = holder.Close(context.Background()) })
	tx, err := holder.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	var held int64
	require.NoError(t, tx.QueryRow(ctx, "SELECT txid_current()").Scan(&held))
	began := time.Now()
	// Five more xids, each in a transaction of its own: the held one is at
	// least six transactions old after them.
	var next int64
	for range 5 {
		require.NoError(t, s.Pool.QueryRow(ctx, "SELECT txid_current()").Scan(&next))
	}

	clock := clockwork.NewFakeClockAt(t0)
	reg := prometheus.NewPedanticRegistry()
	c, err := metrics.NewXminCollector(s.Beginner, metrics.XminConfig{TTL: time.Second, Clock: clock})
	require.NoError(t, err)
	require.NoError(t, reg.Register(c))

	backend := map[string]string{"holder": metrics.XminHolderBackend}
	require.GreaterOrEqual(t, mustValue(t, reg, metrics.NamePostgresOldestXminAgeXids, backend), float64(next-held),
		"the held xid %d is at least %d transactions old", held, next-held)
	for _, h := range []string{metrics.XminHolderPreparedXact, metrics.XminHolderReplicationSlot} {
		mustValue(t, reg, metrics.NamePostgresOldestXminAgeXids, map[string]string{"holder": h})
	}
	mustValue(t, reg, metrics.NamePostgresOldestXminAge, map[string]string{"holder": metrics.XminHolderPreparedXact})
	_, slotSeconds := value(t, reg, metrics.NamePostgresOldestXminAge, map[string]string{"holder": metrics.XminHolderReplicationSlot})
	require.False(t, slotSeconds, "a replication slot's xmin carries no time")

	// The seconds gauge follows the transaction's xact_start: poll until
	// it is a second old (a refresh per TTL of the fake clock).
	deadline := time.Now().Add(15 * time.Second)
	for {
		clock.Advance(time.Second)
		v := mustValue(t, reg, metrics.NamePostgresOldestXminAge, backend)
		if v >= 1 && time.Since(began) >= time.Second {
			require.GreaterOrEqual(t, v, time.Since(began).Seconds()-2, "not older than the oldest holder's age")
			break
		}
		require.True(t, time.Now().Before(deadline), "the backend gauge reached %.2fs after %s", v, time.Since(began))
		time.Sleep(100 * time.Millisecond) // time must pass on the server's clock: nothing to poll for
	}
}

func TestXminScrapeStormRunsOneQueryPerTTL(t *testing.T) {
	t.Parallel()
	tr := &pgtest.StatementCounter{}
	s := pgtest.NewSchema(t, pgtest.WithTracer(tr))
	clock := clockwork.NewFakeClockAt(t0)
	reg := prometheus.NewPedanticRegistry()
	c, err := metrics.NewXminCollector(s.Beginner, metrics.XminConfig{TTL: 15 * time.Second, Clock: clock})
	require.NoError(t, err)
	require.NoError(t, reg.Register(c))
	tr.Reset()
	storm := func() {
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				for range 10 {
					if _, err := reg.Gather(); err != nil {
						t.Errorf("gather: %v", err)
					}
				}
			})
		}
		wg.Wait()
	}
	storm()
	require.Equal(t, 1, xminStatements(tr), "200 scrapes within one TTL: one query")
	clock.Advance(14 * time.Second)
	storm()
	require.Equal(t, 1, xminStatements(tr))
	clock.Advance(time.Second)
	storm()
	require.Equal(t, 2, xminStatements(tr), "the TTL passed: one more query")
}

func TestXminConfigValidation(t *testing.T) {
	t.Parallel()
	err := metrics.XminConfig{TTL: -1, QueryTimeout: -1}.Validate()
	require.ErrorContains(t, err, "XminConfig.TTL")
	require.ErrorContains(t, err, "XminConfig.QueryTimeout")
	_, err = metrics.NewXminCollector(nil, metrics.XminConfig{})
	require.ErrorContains(t, err, "db is nil")
}
