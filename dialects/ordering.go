package dialects

// keyHead is the condition, on the outbox row aliased c, that makes it the
// head of its key (docs/ordering.md): the same text on every dialect, with
// no bind parameter. A row without a key is always a head (unordered). A
// row with a key is a head when
//
//   - no earlier row (by id: UUIDv7 ids are time ordered) of its type and
//     key is PENDING, whether due or waiting for a retry (nor FAILED, with
//     block);
//   - no row of its type and key is IN_PROCESS, earlier or later: a later
//     row is IN_PROCESS only when the head came back from the DLQ (retry)
//     or from a release while its successor was claimed, and one key's
//     events are in flight in one batch at a time;
//   - with block, no DLQ row of the publisher for an earlier event of the
//     type and key waits for an operator (MOVED, TO_RETRY, IN_PROCESS).
//
// Concurrency: the probes are plain reads of the committed state (an MVCC
// snapshot on PostgreSQL and Oracle; MySQL and Oracle run them in a
// statement of their own, never inside the locking read, because InnoDB
// would skip or wait on the locked rows there). Only a head is ever
// claimed, a key has one head at a time, and claiming it changes its row,
// which the claimers lock with SKIP LOCKED and re-check: two claimers
// racing for a key race for the lock on one row. A claimer that skips the
// locked head does not take the next row of the key, because the probe of
// the next row still sees the head PENDING (or, once the claim committed,
// IN_PROCESS).
//
// Indexes (migration 4): (event_type, partition_key, status, id) over the
// rows with a key that are not PROCESSED (partial on PostgreSQL; on
// MySQL/MariaDB and Oracle PROCESSED rows are in the index, in a range of
// their own the probes never read), and (event_type, partition_key,
// event_id) over the DLQ. Each probe is one index range read.
func keyHead(t Tables, block bool) string {
	earlier := "'PENDING'"
	if block {
		earlier = "'PENDING', 'FAILED'"
	}
	s := `(c.partition_key IS NULL OR (
           NOT EXISTS (SELECT 1 FROM ` + t.Events + ` b
                        WHERE b.event_type = c.event_type AND b.partition_key = c.partition_key
                          AND b.status IN (` + earlier + `) AND b.id < c.id)
       AND NOT EXISTS (SELECT 1 FROM ` + t.Events + ` b
                        WHERE b.event_type = c.event_type AND b.partition_key = c.partition_key
                          AND b.status = 'IN_PROCESS')`
	if block {
		s += `
       AND NOT EXISTS (SELECT 1 FROM ` + t.DLQ + ` q
                        WHERE q.event_type = c.event_type AND q.partition_key = c.partition_key
                          AND q.source = 'publisher' AND q.status IN ('MOVED', 'TO_RETRY', 'IN_PROCESS')
                          AND q.event_id < c.id)`
	}
	return s + "))"
}
