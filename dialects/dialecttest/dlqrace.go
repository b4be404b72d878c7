package dialecttest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dlq"
)

// An operator resolves DLQ rows while the retry job transfers them: each row
// ends on exactly one side, transferred (PENDING in the outbox) or RESOLVED
// in the DLQ, never both, never lost.
func testDLQOperatorRacesTheTransfer(t *testing.T, tg Target) {
	s := setup(t, tg)
	st := s.store(t)
	ctx := context.Background()
	const n = 400
	ids := s.publish(t, s.clock, "order-created", n)
	s.failAll(t)
	require.Equal(t, n, s.moveAll(t))
	got, err := st.SetStatusWhere(ctx, dlq.Filter{}, oncebox.DLQStatusToRetry)
	require.NoError(t, err)
	require.Equal(t, n, got)

	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 2 {
		wg.Go(func() {
			<-start
			for {
				moved, err := s.Dialect.TransferDLQToOutbox(ctx, s.Beginner, t0.Add(time.Hour), 3)
				if err != nil {
					t.Errorf("TransferDLQToOutbox: %v", err)
					return
				}
				if moved == 0 {
					return
				}
			}
		})
	}
	// The operator resolves the rows from the last (the transfers take
	// the first first): in chunks, then one by one, then by filter.
	wg.Go(func() {
		<-start
		for i := n; i > 200; i -= 20 {
			if _, err := st.SetStatusMany(ctx, ids[i-20:i], oncebox.DLQStatusResolved); err != nil {
				t.Errorf("SetStatusMany: %v", err)
			}
		}
		for i := 200; i > 0; i-- {
			if err := st.SetStatus(ctx, ids[i-1], oncebox.DLQStatusResolved); err != nil && !isGone(err) {
				t.Errorf("SetStatus %d: %v", i-1, err)
			}
		}
		if _, err := st.SetStatusWhere(ctx, dlq.Filter{Statuses: []oncebox.DLQStatus{oncebox.DLQStatusToRetry}}, oncebox.DLQStatusResolved); err != nil {
			t.Errorf("SetStatusWhere: %v", err)
		}
	})
	close(start)
	wg.Wait()

	inOutbox := s.Count(t, s.Tables.Events, "")
	resolved := s.Count(t, s.Tables.DLQ, "status = 'RESOLVED'")
	t.Logf("%d transferred, %d resolved", inOutbox, resolved)
	require.Equal(t, resolved, s.Count(t, s.Tables.DLQ, ""), "every row left in the DLQ is RESOLVED")
	require.Equal(t, n, inOutbox+resolved, "each row on exactly one side")
	for _, id := range ids {
		in, args := s.inList(1, []oncebox.EventID{id})
		require.Equal(t, 1, s.Count(t, s.Tables.Events, "id IN ("+in+")", args...)+s.Count(t, s.Tables.DLQ, "event_id IN ("+in+")", args...), id)
	}
}

// isGone reports an error saying the row was transferred meanwhile.
func isGone(err error) bool {
	return errors.Is(err, dlq.ErrNotFound)
}
