package dialects

import (
	"context"
	"fmt"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"

	oncebox "github.com/oncebox/watermill-oncebox"
)

// Partitioner is implemented by the dialects whose outbox table can be
// partitioned by time (PostgreSQL).
type Partitioner interface {
	// Partitioned returns a copy of the dialect whose Migrations end with
	// the step that partitions the outbox table as p says (p on; off: the
	// dialect unchanged).
	Partitioned(p oncebox.PartitionsConfig) Dialect
}

// ForPartitions returns d as outbox.partitions asks: partitioned when p is
// on (d must be a Partitioner: an error names the setting otherwise), d
// itself when p is off. The service and the CLI build their dialect
// through it, so that migrating with the configuration partitions the
// table the relay's clean-up job then maintains.
func ForPartitions(d Dialect, p oncebox.PartitionsConfig) (Dialect, error) {
	if !p.Enabled() {
		return d, nil
	}
	pd, ok := d.(Partitioner)
	if !ok {
		return nil, fmt.Errorf("%w: outbox.partitions: the %s dialect cannot partition the outbox table (PostgreSQL only): unset outbox.partitions.interval",
			oncebox.ErrInvalidConfig, d.Name())
	}
	return pd.Partitioned(p), nil
}

// PartitionMaintainer is implemented by the dialects that can partition
// the outbox table by time (PostgreSQL): the outbox clean-up job calls it
// under its lease when outbox.partitions is on.
type PartitionMaintainer interface {
	// MaintainPartitions creates the partitions of the interval of now and
	// p.Ahead after it, and drops (or detaches, p.Retention) each partition
	// whose upper bound is at or before cutoff and that holds only
	// PROCESSED rows.
	MaintainPartitions(ctx context.Context, db wsql.Beginner, p oncebox.PartitionsConfig, now, cutoff time.Time) (PartitionStats, error)
}

// PartitionStats counts what one MaintainPartitions run did.
type PartitionStats struct {
	// Created counts the range partitions created.
	Created int
	// Removed counts the partitions dropped or detached.
	Removed int
	// Kept counts the expired partitions kept because they still hold a row
	// that is not PROCESSED, or because their locks were not granted within
	// the lock timeout (the next run tries again).
	Kept int
}
