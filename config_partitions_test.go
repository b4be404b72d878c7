package oncebox

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPartitionsConfig(t *testing.T) {
	t.Parallel()
	c := Config{}.WithDefaults()
	require.False(t, c.Outbox.Partitions.Enabled())
	c.Outbox.Partitions.Interval = 24 * time.Hour
	c = c.WithDefaults()
	require.Equal(t, DefaultPartitionsAhead, c.Outbox.Partitions.Ahead)
	require.Equal(t, PartitionRetentionDrop, c.Outbox.Partitions.Retention)
	require.NoError(t, c.Outbox.Partitions.validate("outbox.partitions"))
	c.Outbox.Partitions.Retention = "archive"
	require.ErrorContains(t, c.Outbox.Partitions.validate("outbox.partitions"), "outbox.partitions.retention")
	c.Outbox.Partitions.Interval = time.Second
	require.ErrorContains(t, c.Outbox.Partitions.validate("outbox.partitions"), "outbox.partitions.interval")
}
