// The SQLite tests run without the race detector (scripts/test.sh runs
// them in a second pass): -race instruments modernc.org/sqlite's engine,
// transpiled C, and slows it past the relay's heartbeat timeout
// (docs/sqlite.md, "What was tested"). oncebox's own code is race-checked
// by the suite on PostgreSQL and MariaDB.

//go:build !race

package conformance_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/sqlite"
	"github.com/oncebox/watermill-oncebox/migrate"
)

// A batch of the largest size the configuration allows
// (oncebox.MaxBatchSize) fits SQLite's 32,766 bind parameters in every
// statement of the relay: claimed, failed (five parameters a row),
// released and marked.
func TestSQLiteLargestBatchFitsTheBindLimit(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "oncebox.db")
	d, err := sqlite.New(oncebox.TablesConfig{})
	require.NoError(t, err)
	db := openSQLite(t, path)
	b := wsql.BeginnerFromStdSQL(db)
	ctx := context.Background()
	require.NoError(t, migrate.Migrate(ctx, b, d))
	n := oncebox.MaxBatchSize
	ids := publishEvents(t, db, d, n, 4000)
	now := time.Now()
	claim := func() (oncebox.EventID, []dialects.ClaimedEvent) {
		token, err := oncebox.NewEventID()
		require.NoError(t, err)
		evs, err := d.Claim(ctx, b, dialects.ClaimParams{EventType: relayEventType, Limit: n, Token: token, Now: now})
		require.NoError(t, err)
		require.Len(t, evs, n)
		return token, evs
	}

	token, evs := claim()
	failed := make([]dialects.FailedEvent, len(evs))
	for i, e := range evs {
		failed[i] = dialects.FailedEvent{ID: e.ID, Status: oncebox.StatusPending, RetryCount: 1, NextRetryAt: now, Error: fmt.Sprint("e", i)}
	}
	changed, err := d.MarkFailed(ctx, b, token, failed, now)
	require.NoError(t, err)
	require.EqualValues(t, n, changed)

	token, evs = claim()
	released, err := d.ReleaseClaims(ctx, b, token, idsOf(evs), now)
	require.NoError(t, err)
	require.EqualValues(t, n, released)

	token, evs = claim()
	marked, err := d.MarkProcessed(ctx, b, token, idsOf(evs), now)
	require.NoError(t, err)
	require.Len(t, marked, len(ids))
}

func idsOf(evs []dialects.ClaimedEvent) []oncebox.EventID {
	out := make([]oncebox.EventID, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}
