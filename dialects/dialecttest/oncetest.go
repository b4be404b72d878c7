package dialecttest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/oncetest"
)

// The test helpers users get work on every dialect: EventsList reads the
// rows in publish order, Drain relays them through the relay's path.
func testTestHelpers(t *testing.T, tg Target) {
	s := setup(t, tg)
	ctx := context.Background()
	ids := append(s.publish(t, nil, "order-created", 3), s.publish(t, nil, "order-paid", 1)...)

	oncetest.RequireEvents(t, s.Beginner, s.Dialect, []oncetest.Expected{
		{Type: "order-created", Key: "k", Payload: []byte(`{"n": 1}`)},
		{Type: "order-created"}, {Type: "order-created"}, {Type: "order-paid", Topic: "order-paid"},
	})
	events, err := oncetest.Events(ctx, s.Beginner, s.Dialect)
	require.NoError(t, err)
	for i, e := range events {
		require.Equal(t, ids[i], e.ID, "publish order")
		require.Equal(t, oncebox.StatusPending, e.Status)
	}

	rec := newRecorder()
	n, err := oncetest.Drain(ctx, s.Beginner, s.Dialect, rec)
	require.NoError(t, err)
	require.Equal(t, 4, n)
	for _, id := range ids {
		require.Len(t, rec.of(id), 1, "event %s sent once", id)
	}
	require.Equal(t, 4, s.status(t, "PROCESSED"))
}
