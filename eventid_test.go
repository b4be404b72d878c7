package oncebox_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
)

func TestEventIDsAreMonotonicV7(t *testing.T) {
	t.Parallel()
	before := time.Now().Truncate(time.Millisecond)
	prev, err := oncebox.NewEventID()
	require.NoError(t, err)
	for i := 0; i < 100_000; i++ {
		id, err := oncebox.NewEventID()
		require.NoError(t, err)
		require.Equal(t, 7, id.Version())
		require.Greater(t, id.String(), prev.String(), "id %d", i)
		prev = id
	}
	require.False(t, prev.Time().Before(before))
	require.False(t, prev.Time().After(time.Now().Add(time.Second)), "the counter borrows at most a little from the future")
}

func TestEventIDTextAndScan(t *testing.T) {
	t.Parallel()
	id, err := oncebox.NewEventID()
	require.NoError(t, err)
	parsed, err := oncebox.ParseEventID(id.String())
	require.NoError(t, err)
	require.Equal(t, id, parsed)

	var fromBytes, fromText oncebox.EventID
	require.NoError(t, fromBytes.Scan(id[:]))
	require.NoError(t, fromText.Scan(id.String()))
	require.Equal(t, id, fromBytes)
	require.Equal(t, id, fromText)
	require.Error(t, fromText.Scan(42))

	_, err = oncebox.ParseEventID("")
	require.ErrorIs(t, err, oncebox.ErrInvalidInput)
	_, err = oncebox.ParseEventID("not-a-uuid")
	require.ErrorContains(t, err, `"not-a-uuid"`)
}
