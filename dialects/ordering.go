package dialects

import (
	"strconv"
	"time"
)

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

// claimBinder binds the arguments of a statement in text order: p binds a
// value, t a time, each returning the text that stands for it.
type claimBinder interface {
	p(v any) string
	t(v time.Time) string
}

// maxKeySteps bounds the keys one ordered claim enumerates: within
// MySQL's cte_max_recursion_depth (1,000).
const maxKeySteps = 999

// keyWindow and keySteps are the two bounded reads of an ordered claim of
// limit rows: the first keyWindow(limit) due rows in (next_retry_at, id)
// order, and the heads of the first keySteps(limit) keys (in key order)
// that have a PENDING row.
func keyWindow(limit int) int { return 2 * limit }
func keySteps(limit int) int  { return min(limit, maxKeySteps) }

// keyHeads builds the candidates of an ordered claim (docs/ordering.md) in
// two parts: keys, the recursive common table expression k(partition_key,
// n) that jumps from one key with a PENDING row of the type to the next
// (a loose index scan of (event_type, partition_key, status, id), one
// probe a key), to be written after WITH [RECURSIVE]; and body, the query
// over c that keeps the due PENDING rows that are the head of their key
// (keyHead) among two bounded sets of candidates, in (next_retry_at, id)
// order, without its LIMIT: the first keyWindow rows in claim order
// (every row of a type with many keys, and the rows without a key), and
// the first PENDING row (by id) of each of the first keySteps keys (a
// deep key: without it, a claim would read every blocked row of a key
// whose head is in flight, a million probes for a million-event key).
// limitRows writes "the first n rows of query" in the dialect's form.
//
// The cost of a claim is so bounded by about keyWindow + 2 × keySteps
// index probes whatever the backlog. The price: a head that is neither in
// the window nor among the first keys waits until the rows ahead of it
// move (docs/ordering.md, "Fairness").
func keyHeads(t Tables, b claimBinder, p ClaimParams, limitRows func(query string, n string) string) (keys, body string) {
	keys = `k (partition_key, n) AS (
    SELECT MIN(partition_key), 1 FROM ` + t.Events + `
     WHERE event_type = ` + b.p(p.EventType) + ` AND status = 'PENDING' AND partition_key IS NOT NULL
  UNION ALL
    SELECT (SELECT MIN(e.partition_key) FROM ` + t.Events + ` e
             WHERE e.event_type = ` + b.p(p.EventType) + ` AND e.status = 'PENDING' AND e.partition_key > k.partition_key), k.n + 1
      FROM k
     WHERE k.partition_key IS NOT NULL AND k.n < ` + b.p(keySteps(p.Limit)) + `
)`
	// The first PENDING id of a key: MIN(id) on MySQL and Oracle;
	// PostgreSQL 15 has no min(uuid), and reads the first index entry.
	first, last := "MIN(h.id)", ""
	if _, pg := b.(*dollarBinder); pg {
		first, last = "h.id", " ORDER BY h.id LIMIT 1"
	}
	window := limitRows(`SELECT id FROM `+t.Events+`
                        WHERE status = 'PENDING' AND event_type = `+b.p(p.EventType)+` AND next_retry_at <= `+b.t(p.Now)+`
                        ORDER BY next_retry_at, id`, b.p(keyWindow(p.Limit)))
	body = `SELECT c.id FROM ` + t.Events + ` c
     WHERE c.id IN (SELECT w.id FROM (` + window + `) w
                    UNION ALL
                    SELECT (SELECT ` + first + ` FROM ` + t.Events + ` h
                             WHERE h.event_type = ` + b.p(p.EventType) + ` AND h.partition_key = k.partition_key AND h.status = 'PENDING'` + last + `)
                      FROM k WHERE k.partition_key IS NOT NULL)
       AND c.status = 'PENDING' AND c.next_retry_at <= ` + b.t(p.Now) + `
       AND ` + keyHead(t, p.BlockOnFailure) + `
     ORDER BY c.next_retry_at, c.id`
	return keys, body
}

// dollarBinder binds PostgreSQL's $n parameters, one per use.
type dollarBinder struct {
	args []any
}

func (b *dollarBinder) p(v any) string {
	b.args = append(b.args, v)
	return "$" + strconv.Itoa(len(b.args))
}

func (b *dollarBinder) t(v time.Time) string { return b.p(v) }

// questionBinder binds MySQL's ? parameters.
type questionBinder struct {
	args []any
}

func (b *questionBinder) p(v any) string {
	b.args = append(b.args, v)
	return "?"
}

func (b *questionBinder) t(v time.Time) string { return b.p(mysqlTime(v)) }

// limitClause is "query LIMIT n" (PostgreSQL, MySQL).
func limitClause(query, n string) string { return query + "\n                        LIMIT " + n }
