package dlq_test

import (
	"context"
	"sync"
	"testing"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dlq"
)

// actions records what a Store reports to Config.OnAction.
type actions struct {
	mu  sync.Mutex
	got []string
	n   map[string]int
}

func (a *actions) on(action string, n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.got = append(a.got, action)
	a.n[action] += n
}

func TestOnActionReportsEverySuccessfulChange(t *testing.T) {
	t.Parallel()
	f := setup(t)
	rec := &actions{n: map[string]int{}}
	st, err := dlq.NewStore(f.schema.Beginner, dlq.Config{Dialect: f.schema.Dialect,
		Clock: clockwork.NewFakeClockAt(t0), OnAction: rec.on})
	require.NoError(t, err)
	ctx := context.Background()

	a, b, c := f.insert(t, row{}), f.insert(t, row{}), f.insert(t, row{})
	inProcess := f.insert(t, row{status: oncebox.DLQStatusInProcess})

	require.NoError(t, st.SetStatus(ctx, a, oncebox.DLQStatusToRetry))       // retry 1
	require.NoError(t, st.SetStatus(ctx, a, oncebox.DLQStatusToRetry))       // no-op: not reported
	require.NoError(t, st.SetStatus(ctx, a, oncebox.DLQStatusMoved))         // reopen 1
	require.NoError(t, st.SetStatus(ctx, a, oncebox.DLQStatusResolved))      // resolve 1
	require.Error(t, st.SetStatus(ctx, inProcess, oncebox.DLQStatusToRetry)) // refused: not reported
	n, err := st.SetStatusMany(ctx, []oncebox.EventID{b, c, inProcess}, oncebox.DLQStatusToRetry)
	require.NoError(t, err)
	require.Equal(t, 2, n) // retry 2
	n, err = st.SetStatusMany(ctx, []oncebox.EventID{b, c}, oncebox.DLQStatusToRetry)
	require.NoError(t, err)
	require.Zero(t, n) // 0 rows: not reported
	n, err = st.SetStatusWhere(ctx, dlq.Filter{}, oncebox.DLQStatusResolved)
	require.NoError(t, err)
	require.Equal(t, 2, n) // resolve 2 (b and c; a is already RESOLVED)
	n, err = st.SetStatusWhere(ctx, dlq.Filter{}, oncebox.DLQStatusMoved)
	require.NoError(t, err)
	require.Equal(t, 3, n)                // reopen 3
	require.NoError(t, st.Delete(ctx, a)) // delete 1
	require.ErrorIs(t, st.Delete(ctx, a), dlq.ErrNotFound)
	n, err = st.DeleteMany(ctx, []oncebox.EventID{b, a})
	require.NoError(t, err)
	require.Equal(t, 1, n) // delete 1
	n, err = st.DeleteWhere(ctx, dlq.Filter{})
	require.NoError(t, err)
	require.Equal(t, 1, n, "c; the IN_PROCESS row is skipped") // delete 1
	n, err = st.DeleteWhere(ctx, dlq.Filter{})
	require.NoError(t, err)
	require.Zero(t, n)

	require.Equal(t, []string{
		dlq.ActionRetry, dlq.ActionReopen, dlq.ActionResolve, dlq.ActionRetry, dlq.ActionResolve,
		dlq.ActionReopen, dlq.ActionDelete, dlq.ActionDelete, dlq.ActionDelete,
	}, rec.got)
	require.Equal(t, map[string]int{"retry": 3, "resolve": 3, "reopen": 4, "delete": 3}, rec.n)

	// Without OnAction the Store works as before.
	require.NoError(t, f.store.SetStatus(ctx, f.insert(t, row{}), oncebox.DLQStatusResolved))
}
