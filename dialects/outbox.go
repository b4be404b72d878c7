package dialects

// OutboxWriter is what the publisher asks of the dialect: the insert of
// the outbox rows in the caller's transaction and the wake-up on commit.
type OutboxWriter interface {
	// EventsInsert inserts rows into the outbox table in one statement. The
	// caller keeps len(rows) at most MaxRowsPerInsert().
	EventsInsert(rows []EventRow) Query
	// MaxRowsPerInsert is the most rows EventsInsert can take in one
	// statement, bounded by the database's limit on bind parameters.
	MaxRowsPerInsert() int
	// Notify builds the statement that, run in a transaction, wakes the
	// relays listening on channel with payload once the transaction commits
	// (PostgreSQL's pg_notify; see NotifyChannel). A zero Query (empty SQL)
	// means the database cannot: MySQL/MariaDB and Oracle relays poll only.
	Notify(channel, payload string) Query
}
