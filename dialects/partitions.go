package dialects

import (
	"context"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"

	oncebox "github.com/oncebox/watermill-oncebox"
)

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
