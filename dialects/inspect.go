package dialects

// Inspector reads the tables as a whole, for tools (the CLI's status) and
// tests (package oncetest); never on the relay's path.
type Inspector interface {
	// Backlog counts the outbox rows by event type and status with the
	// oldest created_at of each group, and the DLQ rows by source and status
	// (oldest NULL): columns kind ('outbox' or 'dlq'), key, status, count,
	// oldest.
	Backlog() Query
	// EventsList selects every row of the outbox table in id order
	// (publish order within a process), whatever its status, columns in
	// the order of StoredEvent.ScanTargets. It scans the whole table: for
	// tests (package oncetest) and tools, not for the relay.
	EventsList() Query
}
