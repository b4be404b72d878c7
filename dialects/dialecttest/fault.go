package dialecttest

import (
	"context"
	"database/sql"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/stretchr/testify/require"
)

// faultyDB is the real database with one injected fault: the first
// statements for which match holds fail, as if the connection dropped, on the
// handle and in the transactions it begins (the dialects run an operation
// either way).
type faultyDB struct {
	wsql.Beginner
	match func(query string) bool
	fails atomic.Int32
}

var errInjected = errors.New("injected: connection reset by peer")

func (f *faultyDB) fault(query string) error {
	if f.match(query) && f.fails.Add(-1) >= 0 {
		return errInjected
	}
	return nil
}

func (f *faultyDB) ExecContext(ctx context.Context, query string, args ...any) (wsql.Result, error) {
	if err := f.fault(query); err != nil {
		return nil, err
	}
	return f.Beginner.ExecContext(ctx, query, args...)
}

func (f *faultyDB) QueryContext(ctx context.Context, query string, args ...any) (wsql.Rows, error) {
	if err := f.fault(query); err != nil {
		return nil, err
	}
	return f.Beginner.QueryContext(ctx, query, args...)
}

func (f *faultyDB) BeginTx(ctx context.Context, opts *sql.TxOptions) (wsql.Tx, error) {
	tx, err := f.Beginner.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &faultyTx{Tx: tx, f: f}, nil
}

type faultyTx struct {
	wsql.Tx
	f *faultyDB
}

func (t *faultyTx) ExecContext(ctx context.Context, query string, args ...any) (wsql.Result, error) {
	if err := t.f.fault(query); err != nil {
		return nil, err
	}
	return t.Tx.ExecContext(ctx, query, args...)
}

func (t *faultyTx) QueryContext(ctx context.Context, query string, args ...any) (wsql.Rows, error) {
	if err := t.f.fault(query); err != nil {
		return nil, err
	}
	return t.Tx.QueryContext(ctx, query, args...)
}

// A finalize lost with the database connection (the crash between the send
// and the PROCESSED update) leaves the rows IN_PROCESS: the recovery sends
// them again. A duplicate, never a loss, and no attempt counted.
func testLostFinalizeIsRecoveredAndResent(t *testing.T, tg Target) {
	s := setup(t, tg)
	ids := s.publish(t, s.clock, "order-created", 4)
	db := &faultyDB{Beginner: s.Beginner, match: isMarkProcessed}
	db.fails.Store(1)
	rec := newRecorder()
	h := &hooks{}
	cfg := s.pollerConfig("order-created")
	cfg.Hooks = h
	s.startPoller(t, db, rec, cfg)

	require.NoError(t, s.clock.BlockUntilContext(context.Background(), waitersPerPoller))
	eventually(t, "the poll reported", func() bool { return len(h.Snapshot().Polls) > 0 })
	require.Equal(t, 4, rec.delivered())
	require.Equal(t, 4, s.status(t, "IN_PROCESS"), "the finalize was lost")
	var pollErr error
	for _, pi := range h.Snapshot().Polls {
		pollErr = errors.Join(pollErr, pi.Err)
	}
	require.ErrorIs(t, pollErr, errInjected)

	stepUntil(t, s.clock, waitersPerPoller, time.Second, 15*time.Minute, func() bool { return s.status(t, "PROCESSED") == 4 })
	for _, id := range ids {
		require.Len(t, rec.of(id), 2, "sent again after recovery")
	}
	require.Zero(t, s.Count(t, s.Tables.Events, "retry_count <> 0"))
}
