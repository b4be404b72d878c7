package dialecttest

import (
	"context"
	"sync"
	"testing"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
)

// A poison message stored twice by the same handler (a crash between storing
// and acking, a redelivery, two instances at once) is one DLQ row with one
// more attempt; another handler gets its own row. Without an event id the
// message UUID identifies it.
func testDLQConsumerUpsertStoresAPoisonMessageOnce(t *testing.T, tg Target) {
	s := setup(t, tg)
	st := s.store(t)
	ctx := context.Background()
	eventID := newID(t)
	row := func(handler string, withID bool, at time.Time, errText string) dialects.DLQRow {
		r := dialects.DLQRow{ID: newID(t), HandlerName: handler, EventType: "order-created", Topic: "orders-in",
			MessageUUID: "m-1", Payload: []byte("p"), Metadata: `{"x":"1"}`, Error: errText, FailedAt: at}
		if withID {
			r.EventID = &eventID
		}
		return r
	}
	for _, withID := range []bool{true, false} {
		first := row("ship", withID, t0, "first")
		require.NoError(t, s.Dialect.PoisonUpsert(ctx, s.Beginner, first))
		require.NoError(t, s.Dialect.PoisonUpsert(ctx, s.Beginner, row("ship", withID, t0.Add(time.Minute), "second")))
		// Two instances store it at once.
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				if err := s.Dialect.PoisonUpsert(ctx, wsql.BeginnerFromStdSQL(s.DB), row("ship", withID, t0.Add(2*time.Minute), "racing")); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		r, err := st.Get(ctx, first.ID)
		require.NoError(t, err, "with event id %v: the first row's id stays", withID)
		require.Equal(t, 6, r.RetryCount, "with event id %v: one row, one attempt per store", withID)
		require.Equal(t, "racing", r.LastError)
		require.Equal(t, t0, r.CreatedAt)
		require.Equal(t, t0, *r.FirstFailedAt)
		require.Equal(t, t0.Add(2*time.Minute), *r.LastFailedAt)
		require.Equal(t, oncebox.DLQSourceConsumer, r.Source)
		require.Equal(t, oncebox.DLQStatusMoved, r.Status)
		if withID {
			require.Equal(t, eventID, *r.EventID)
		} else {
			require.Nil(t, r.EventID)
		}
		require.NoError(t, s.Dialect.PoisonUpsert(ctx, s.Beginner, row("bill", withID, t0, "other handler")))
	}
	require.Equal(t, 4, s.Count(t, s.Tables.DLQ, ""), "ship and bill, with and without an event id")
}
