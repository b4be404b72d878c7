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
//   - it is the first PENDING row (by id: UUIDv7 ids are time ordered) of
//     its type and key, whether the others are due or waiting for a retry
//     (with block, no earlier row is FAILED either);
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
func keyHead(t Tables, block, orderLimit bool, heap string) string {
	s := `(c.partition_key IS NULL OR (
           c.id = ` + firstOf(orderLimit, "b.id", t.Events+" b", `b.event_type = c.event_type AND b.partition_key = c.partition_key
                          AND b.status = 'PENDING'`+heap) + `
       AND NOT EXISTS (SELECT 1 FROM ` + t.Events + ` b
                        WHERE b.event_type = c.event_type AND b.partition_key = c.partition_key
                          AND b.status = 'IN_PROCESS')`
	if block {
		s += `
       AND NOT EXISTS (SELECT 1 FROM ` + t.Events + ` b
                        WHERE b.event_type = c.event_type AND b.partition_key = c.partition_key
                          AND b.status = 'FAILED' AND b.id < c.id)
       AND NOT EXISTS (SELECT 1 FROM ` + t.DLQ + ` q
                        WHERE q.event_type = c.event_type AND q.partition_key = c.partition_key
                          AND q.source = 'publisher' AND q.status IN ('MOVED', 'TO_RETRY', 'IN_PROCESS')
                          AND q.event_id < c.id)`
	}
	return s + "))"
}

// firstOf is the scalar subquery of the smallest col of from where where
// holds: ORDER BY col LIMIT 1 on PostgreSQL (15 has no min(uuid)) and on
// MySQL/MariaDB (MariaDB 10.11 reads every entry of a correlated MIN(), a
// million for a million-event key, where ORDER BY … LIMIT 1 reads one:
// measured); MIN(col) on Oracle (an INDEX RANGE SCAN (MIN/MAX)).
func firstOf(orderLimit bool, col, from, where string) string {
	if orderLimit {
		return "(SELECT " + col + " FROM " + from + "\n                        WHERE " + where + "\n                        ORDER BY " + col + " LIMIT 1)"
	}
	return "(SELECT MIN(" + col + ") FROM " + from + "\n                        WHERE " + where + ")"
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
// (keyHead) among two bounded sets of candidates (a derived table joined
// to c by primary key, so that the plan starts from the few candidates:
// MariaDB ran c.id IN (… UNION …) as a dependent subquery for every
// PENDING row), in (next_retry_at, id) order, without its LIMIT: the first keyWindow rows in claim order
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
	// MariaDB (10.11, measured at 1,000,000 rows) estimates the derived
	// table as large as the outbox and starts from c, probing every
	// PENDING row: STRAIGHT_JOIN makes it start from the candidates.
	join := "JOIN"
	_, mysql := b.(*questionBinder)
	if mysql {
		join = "STRAIGHT_JOIN"
	}
	_, oracle := b.(*binder)
	// PostgreSQL: a condition on a column outside the key index (always
	// true) makes each probe a plain index scan, which visits the heap and
	// marks the entries of rows already sent (dead) so that the next claim
	// skips them; an index-only scan walks them again at every claim
	// (docs/ordering.md, "Throughput").
	heap := func(string) string { return "" }
	if _, pg := b.(*dollarBinder); pg {
		heap = func(alias string) string { return " AND " + alias + ".next_retry_at IS NOT NULL" }
	}
	dual := ""
	if oracle {
		dual = " FROM DUAL"
	}
	if !mysql {
		keys = `k (partition_key, n) AS (
    SELECT ` + firstOf(!oracle, "f.partition_key", t.Events+" f", `f.event_type = `+b.p(p.EventType)+` AND f.status = 'PENDING' AND f.partition_key IS NOT NULL`+heap("f")) + `, 1` + dual + `
  UNION ALL
    SELECT ` + firstOf(!oracle, "e.partition_key", t.Events+" e", `e.event_type = `+b.p(p.EventType)+` AND e.status = 'PENDING' AND e.partition_key > k.partition_key`+heap("e")) + `, k.n + 1
      FROM k
     WHERE k.partition_key IS NOT NULL AND k.n < ` + b.p(keySteps(p.Limit)) + `
)`
	}
	window := limitRows(`SELECT id FROM `+t.Events+`
                        WHERE status = 'PENDING' AND event_type = `+b.p(p.EventType)+` AND next_retry_at <= `+b.t(p.Now)+`
                        ORDER BY next_retry_at, id`, b.p(keyWindow(p.Limit)))
	var heads string
	if mysql {
		// MySQL/MariaDB read a correlated range from its start (MariaDB
		// 10.11 read 100,000 entries a step at 1,000,000 rows), but jump
		// from key to key in one loose index scan ("Using index for
		// group-by": MIN(id) with an equality on status between the key
		// and id), no recursion needed.
		heads = `SELECT g.id FROM (SELECT MIN(id) AS id FROM ` + t.Events + `
                                WHERE event_type = ` + b.p(p.EventType) + ` AND status = 'PENDING' AND partition_key IS NOT NULL
                                GROUP BY event_type, partition_key
                                LIMIT ` + b.p(keySteps(p.Limit)) + `) g`
	} else {
		heads = `SELECT ` + firstOf(!oracle, "h.id", t.Events+" h", `h.event_type = `+b.p(p.EventType)+` AND h.partition_key = k.partition_key AND h.status = 'PENDING'`+heap("h")) + `
              FROM k WHERE k.partition_key IS NOT NULL`
	}
	body = `SELECT c.id
      FROM (SELECT w.id FROM (` + window + `) w
            UNION
            ` + heads + `) cand
      ` + join + ` ` + t.Events + ` c ON c.id = cand.id
     WHERE c.status = 'PENDING' AND c.next_retry_at <= ` + b.t(p.Now) + `
       AND ` + keyHead(t, p.BlockOnFailure, !oracle, heap("b")) + `
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
