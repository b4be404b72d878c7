package dialecttest

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dlq"
)

// Every operation that moves rows is atomic: the connection lost before any
// one of its statements (the k-th, for every k) leaves every row where it
// was. One statement on PostgreSQL; on MySQL and Oracle several in one
// transaction, so a crash between the select and the update of a claim, or
// between the copy and the delete of a transfer, must roll back whole.
func testOperationsAreAtomicAtEveryStatement(t *testing.T, tg Target) {
	s := setup(t, tg)
	ctx := context.Background()
	const n = 5
	reset := func() {
		s.exec(t, "DELETE FROM "+s.Tables.Events)
		s.exec(t, "DELETE FROM "+s.Tables.DLQ)
	}
	type op struct {
		name    string
		prepare func() (state func() bool)
		run     func(db *faultyDB) error
	}
	var token oncebox.EventID
	var ids []oncebox.EventID
	ops := []op{
		{"Claim",
			func() func() bool {
				s.publish(t, s.clock, "t", n)
				return func() bool { return s.Count(t, s.Tables.Events, "status = 'PENDING' AND claim_token IS NULL") == n }
			},
			func(db *faultyDB) error {
				_, err := s.Dialect.Claim(ctx, db, dialects.ClaimParams{EventType: "t", Limit: 10, Token: newID(t), Now: t0})
				return err
			}},
		{"MarkProcessed",
			func() func() bool {
				ids = s.publish(t, s.clock, "t", n)
				token = newID(t)
				evs, err := s.Dialect.Claim(ctx, s.Beginner, dialects.ClaimParams{EventType: "t", Limit: 10, Token: token, Now: t0})
				require.NoError(t, err)
				require.Len(t, evs, n)
				return func() bool { return s.status(t, "IN_PROCESS") == n }
			},
			func(db *faultyDB) error {
				_, err := s.Dialect.MarkProcessed(ctx, db, token, ids, t0)
				return err
			}},
		{"MoveToDLQ",
			func() func() bool {
				s.publish(t, s.clock, "t", n)
				s.failAll(t)
				return func() bool { return s.status(t, "FAILED") == n && s.Count(t, s.Tables.DLQ, "") == 0 }
			},
			func(db *faultyDB) error {
				_, err := s.Dialect.MoveToDLQ(ctx, db, t0, 100)
				return err
			}},
		{"TransferDLQToOutbox",
			func() func() bool {
				s.publish(t, s.clock, "t", n)
				s.failAll(t)
				require.Equal(t, n, s.moveAll(t))
				_, err := s.store(t).SetStatusWhere(ctx, dlq.Filter{}, oncebox.DLQStatusToRetry)
				require.NoError(t, err)
				return func() bool {
					return s.Count(t, s.Tables.DLQ, "status = 'TO_RETRY'") == n && s.Count(t, s.Tables.Events, "") == 0
				}
			},
			func(db *faultyDB) error {
				_, err := s.Dialect.TransferDLQToOutbox(ctx, db, t0, 100)
				return err
			}},
	}
	for _, o := range ops {
		t.Run(o.name, func(t *testing.T) {
			for k := int32(1); ; k++ {
				require.Less(t, k, int32(20), "an operation of more than 20 statements")
				reset()
				unchanged := o.prepare()
				var calls atomic.Int32
				db := &faultyDB{Beginner: s.Beginner, match: func(string) bool { return calls.Add(1) == k }}
				db.fails.Store(1)
				err := o.run(db)
				if calls.Load() < k {
					require.NoError(t, err, "the run without a fault")
					require.False(t, unchanged(), "the run without a fault changed the rows")
					t.Logf("%s: %d statements, each lost in turn: nothing changed", o.name, k-1)
					return
				}
				require.ErrorIs(t, err, errInjected, "statement %d lost", k)
				require.True(t, unchanged(), "statement %d lost: the rows moved anyway", k)
			}
		})
	}
}
