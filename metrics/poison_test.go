package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dlq"
	"github.com/oncebox/watermill-oncebox/internal/pgtest"
	"github.com/oncebox/watermill-oncebox/metrics"
	"github.com/oncebox/watermill-oncebox/middleware"
)

func TestPoisonHooks(t *testing.T) {
	t.Parallel()
	s := pgtest.NewSchema(t)
	reg := prometheus.NewPedanticRegistry()
	h, err := metrics.NewPoisonHooks(reg)
	require.NoError(t, err)
	_, err = metrics.NewPoisonHooks(reg)
	require.Error(t, err, "one PoisonHooks per registry")

	poison, err := middleware.NewPoisonQueue(s.Beginner, middleware.PoisonConfig{Dialect: s.Dialect,
		OnParked: h.OnParked, OnStoreFailed: h.OnStoreFailed, OnNacked: h.OnNacked}, nil)
	require.NoError(t, err)
	failing := poison.Middleware(func(*message.Message) ([]*message.Message, error) {
		return nil, errors.New("cannot parse")
	})
	newID := func() string {
		id, err := oncebox.NewEventID()
		require.NoError(t, err)
		return id.String()
	}
	for range 2 {
		_, err = failing(event(newID()))
		require.NoError(t, err, "parked and acked")
	}
	// No router: the handler name is "" here; under a router it is the
	// handler's name (see middleware's tests).
	require.Equal(t, 2.0, mustValue(t, reg, metrics.NamePoisonParked, map[string]string{"handler": ""}))

	_, err = s.Pool.Exec(context.Background(), "DROP TABLE "+s.Dialect.Tables().DLQ)
	require.NoError(t, err)
	_, err = failing(event(newID()))
	require.Error(t, err, "not stored: nacked")
	require.Equal(t, 1.0, mustValue(t, reg, metrics.NamePoisonStoreFailures, map[string]string{"handler": ""}))
	require.Equal(t, 2.0, mustValue(t, reg, metrics.NamePoisonParked, map[string]string{"handler": ""}))

	// A transient error is returned for redelivery and counted.
	_, err = poison.Middleware(func(*message.Message) ([]*message.Message, error) {
		return nil, fmt.Errorf("save: %w", context.DeadlineExceeded)
	})(event(newID()))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, 1.0, mustValue(t, reg, metrics.NamePoisonNacked, map[string]string{"handler": ""}))

	h.OnParked("billing", nil)
	require.Equal(t, 1.0, mustValue(t, reg, metrics.NamePoisonParked, map[string]string{"handler": "billing"}))
}

func TestDLQActionHooks(t *testing.T) {
	t.Parallel()
	s := pgtest.NewSchema(t)
	reg := prometheus.NewPedanticRegistry()
	h, err := metrics.NewDLQActionHooks(reg)
	require.NoError(t, err)
	_, err = metrics.NewDLQActionHooks(reg)
	require.Error(t, err, "one DLQActionHooks per registry")

	// Park two messages, then act on them through a Store.
	poison, err := middleware.NewPoisonQueue(s.Beginner, middleware.PoisonConfig{Dialect: s.Dialect}, watermill.NopLogger{})
	require.NoError(t, err)
	failing := poison.Middleware(func(*message.Message) ([]*message.Message, error) { return nil, errors.New("bad") })
	for range 2 {
		id, err := oncebox.NewEventID()
		require.NoError(t, err)
		_, err = failing(event(id.String()))
		require.NoError(t, err)
	}
	st, err := dlq.NewStore(s.Beginner, dlq.Config{Dialect: s.Dialect, OnAction: h.OnAction})
	require.NoError(t, err)
	ctx := context.Background()
	n, err := st.SetStatusWhere(ctx, dlq.Filter{}, oncebox.DLQStatusToRetry)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	_, err = st.SetStatusWhere(ctx, dlq.Filter{}, oncebox.DLQStatusToRetry) // 0 rows: not counted
	require.NoError(t, err)
	rows, _, err := st.List(ctx, dlq.Filter{}, dlq.Page{})
	require.NoError(t, err)
	require.Len(t, rows, 2)
	require.NoError(t, st.SetStatus(ctx, rows[0].ID, oncebox.DLQStatusResolved))
	require.NoError(t, st.SetStatus(ctx, rows[0].ID, oncebox.DLQStatusMoved))
	n, err = st.DeleteWhere(ctx, dlq.Filter{})
	require.NoError(t, err)
	require.Equal(t, 2, n)

	for action, want := range map[string]float64{dlq.ActionRetry: 2, dlq.ActionResolve: 1, dlq.ActionReopen: 1, dlq.ActionDelete: 2} {
		require.Equal(t, want, mustValue(t, reg, metrics.NameDLQActions, map[string]string{"action": action}), action)
	}
	h.OnAction(dlq.ActionDelete, 0)
	require.Equal(t, 2.0, mustValue(t, reg, metrics.NameDLQActions, map[string]string{"action": dlq.ActionDelete}))
}
