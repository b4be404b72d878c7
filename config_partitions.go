package oncebox

import "time"

// ---- outbox.partitions (issue 28, item 4) ---------------------------------
// Kept in a file of its own so that other settings merge without conflict;
// config.go only names the field and calls withDefaults and validate.

// Retention modes of [PartitionsConfig].
const (
	// PartitionRetentionDrop drops an expired partition (DROP TABLE).
	PartitionRetentionDrop = "drop"
	// PartitionRetentionDetach detaches it (ALTER TABLE … DETACH
	// PARTITION): the table stays, outside the outbox, for the operator to
	// archive and drop.
	PartitionRetentionDetach = "detach"
)

// DefaultPartitionsAhead is how many partitions past the current one the
// clean-up job keeps created when partitions are on.
const DefaultPartitionsAhead = 3

// PartitionsConfig configures the range partitioning of the outbox table
// (PostgreSQL only, opt-in; docs/postgresql.md, "Partitions"). The table is
// partitioned BY RANGE (id): event ids are UUIDv7, whose first 48 bits are
// the unix milliseconds of their creation, so a range of ids is a range of
// time and the primary key (id) stays valid on the partitioned table.
type PartitionsConfig struct {
	// Interval is the time span of one partition. Zero (the default): the
	// outbox is not partitioned. At least one minute when set.
	Interval time.Duration `yaml:"interval"`
	// Ahead is how many partitions after the current one the clean-up job
	// keeps created. Default 3 when Interval is set.
	Ahead int `yaml:"ahead"`
	// Retention is what the clean-up job does with a partition whose upper
	// bound is older than outbox.clean-up.ttl and whose rows are all
	// PROCESSED: "drop" (default) or "detach".
	Retention string `yaml:"retention"`
}

// Enabled reports whether the outbox is partitioned (Interval set).
func (p PartitionsConfig) Enabled() bool { return p.Interval > 0 }

// withDefaults fills Ahead and Retention when partitions are on.
func (p PartitionsConfig) withDefaults() PartitionsConfig {
	if !p.Enabled() {
		return p
	}
	if p.Ahead == 0 {
		p.Ahead = DefaultPartitionsAhead
	}
	if p.Retention == "" {
		p.Retention = PartitionRetentionDrop
	}
	return p
}

// validate names the field at fault.
func (p PartitionsConfig) validate(path string) error {
	switch {
	case p.Interval < 0:
		return fieldErr(path+".interval", "must be >= 0 (0: not partitioned), got %s", p.Interval)
	case p.Interval == 0:
		return nil
	case p.Interval < time.Minute:
		return fieldErr(path+".interval", "must be at least 1m, got %s", p.Interval)
	case p.Ahead < 1:
		return fieldErr(path+".ahead", "must be > 0, got %d", p.Ahead)
	case p.Retention != PartitionRetentionDrop && p.Retention != PartitionRetentionDetach:
		return fieldErr(path+".retention", "must be %q or %q, got %q", PartitionRetentionDrop, PartitionRetentionDetach, p.Retention)
	}
	return nil
}

// ---- end outbox.partitions -------------------------------------------------
