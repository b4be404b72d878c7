package sqlkit

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
)

// keyScan bounds the due rows an ordered claim of limit rows reads to find
// limit rows of keys neither busy nor waiting. PostgreSQL reads the
// ordered index lazily and stops at limit rows that pass, so the bound
// costs only when rows of busy or waiting keys lie ahead (a deep key in
// flight, a burst of a key whose head waits for a retry): those are
// skipped, and the keys behind them flow, up to the bound.
// MySQL/MariaDB materialize the bounded read whole.
func keyScan(limit int) int { return 10 * limit }

// maxWaitingKeys bounds the rows not due yet (the first to come due)
// among which an ordered claim finds the rows waiting for a retry
// (retry_count > 0) whose keys it drops from its window. A row waiting for
// a retry is its key's head (it was claimed as one), so every row of its
// key is its successor. A delayed event not attempted yet (retry_count 0,
// docs/delay.md) need not be: its key's rows before it are due and go, so
// it does not drop its key; its successors are held by the prefix rule
// alone (their stop_id is the delayed row, which is not in the window). The set only saves the window's room (a key's rows behind a
// waiting row are never candidates: its stop_id is the waiting row), so a
// cut set is safe; the bound keeps it a hashed set in the plan whatever
// the estimates: read row by row for each row of the window, 50,000
// waiting keys made a claim of 1,000 take 6.6 s, and a bound of 50,000 was
// past PostgreSQL's limit for hashing it (26 s); at 10,000 it is hashed
// (measured).
//
// The busy and waiting reads are ordered by the column of the index they
// should use ((claimed_at) WHERE IN_PROCESS, (event_type, next_retry_at,
// id) WHERE PENDING): on a table without statistics PostgreSQL otherwise
// read every keyed row of the type through the key index (44 ms of a
// 58 ms claim of 200, measured).
const maxWaitingKeys = 10000

// maxBlockingRows bounds each of the two reads of the rows that hold their
// key under on-failure: block (FAILED rows of the type, DLQ rows of the
// publisher waiting for an operator) whose keys an ordered claim drops
// from its window, as maxWaitingKeys bounds the waiting keys: past it, a
// blocked key's rows are not skipped but still never claimed, and take at
// most PerKey rows of the window each.
const maxBlockingRows = 10000

// OrderedCandidates writes the common table expressions of an ordered
// claim of p (busy, waiting, w, wr, ws, wt), to follow WITH, and cand, the
// query of the candidates (id, partition_key, next_retry_at) without
// ORDER BY.
// The pieces that differ between databases come from c.
func OrderedCandidates(c ClaimSQL, t dialects.Tables, b claimBinder, p dialects.ClaimParams) (ctes, cand string) {
	firstRows, materialized, heap := c.FirstRows, c.Materialized(), c.HeadProbe()
	ctes = busyCTE(c, t, b, p) + `,
waiting AS ` + materialized + `(
    SELECT DISTINCT y.partition_key FROM (
        ` + firstRows(`SELECT x.partition_key, x.retry_count FROM `+t.Events+` x
         WHERE x.status = 'PENDING' AND x.event_type = `+b.P(p.EventType)+` AND x.next_retry_at > `+b.T(p.Now)+` AND x.partition_key IS NOT NULL
         ORDER BY x.next_retry_at`, Lit(maxWaitingKeys)) + `) y
     WHERE y.retry_count > 0
),`
	// blocked (on-failure: block): the rows that hold their key's later
	// rows (a FAILED row, a DLQ row of the publisher waiting for an
	// operator), at most maxBlockingRows of each. Like waiting, it only
	// saves the window's room: the candidates' block filter below still
	// decides, on every blocking row, so a cut set is safe. A row of the
	// key before the blocking one stays in the window (it is no successor
	// of the failed event). Indexes: the FAILED rows by updated_at
	// (outbox_events_failed_idx on PostgreSQL, (status, event_type, …) on
	// MySQL/MariaDB, (status, updated_at) on Oracle); the DLQ's key index.
	blockedOut := ""
	if p.BlockOnFailure {
		ctes += `
blocked AS ` + materialized + `(
    SELECT bf.partition_key, bf.id FROM (
        ` + firstRows(`SELECT f.partition_key, f.id FROM `+t.Events+` f
         WHERE f.status = 'FAILED' AND f.event_type = `+b.P(p.EventType)+` AND f.partition_key IS NOT NULL
         ORDER BY f.updated_at`, Lit(maxBlockingRows)) + `) bf
    UNION ALL
    SELECT bq.partition_key, bq.event_id FROM (
        ` + firstRows(`SELECT q.partition_key, q.event_id FROM `+t.DLQ+` q
         WHERE q.event_type = `+b.P(p.EventType)+` AND q.partition_key IS NOT NULL
           AND q.source = 'publisher' AND q.status IN ('MOVED', 'TO_RETRY', 'IN_PROCESS')
         ORDER BY q.partition_key, q.event_id`, Lit(maxBlockingRows)) + `) bq
),`
		blockedOut = `
            AND NOT EXISTS (SELECT 1 FROM blocked k WHERE k.partition_key = s.partition_key AND k.id < s.id)`
	}
	// w, the window: the first limit due rows, in (next_retry_at, id)
	// order, of keys neither busy, waiting nor blocked, among the first
	// keyScan(limit), and at most perKey rows of a key (its first in that
	// order), so that a key's burst deeper than the batch takes no more of
	// the window than the claim could take of it.
	scan := `SELECT s.id, s.partition_key, s.next_retry_at FROM (
        ` + firstRows(`SELECT id, partition_key, next_retry_at FROM `+t.Events+`
         WHERE status = 'PENDING' AND event_type = `+b.P(p.EventType)+` AND next_retry_at <= `+b.T(p.Now)+`
         ORDER BY next_retry_at, id`, Lit(keyScan(p.Limit))) + `) s
         WHERE (s.partition_key IS NULL
            OR (s.partition_key NOT IN (SELECT partition_key FROM busy)
            AND s.partition_key NOT IN (SELECT partition_key FROM waiting)` + blockedOut + `))`
	perKey := max(p.PerKey, 1)
	if c.LazyWindow() {
		// PostgreSQL reads the window lazily (it stops at limit rows
		// that pass); a ROW_NUMBER over the keyScan rows would read and
		// sort them all, by key under the collation (27 of a 50 ms
		// window of 1,000, measured), and a second read of the window
		// behind a one-time filter, never run, still raised the
		// estimate past jit_above_cost (JIT: +120 ms, measured). So the
		// cap is two hashed sets from pre, the first limit due rows:
		// deep, its keys with more than perKey rows, and kfirst, the
		// first perKey rows of those keys; a row of a deep key not in
		// first leaves the window. A key deep only beyond the first
		// limit rows is not capped.
		ctes += `
pre AS ` + materialized + `(
    ` + firstRows(`SELECT id, partition_key, next_retry_at FROM `+t.Events+`
         WHERE status = 'PENDING' AND event_type = `+b.P(p.EventType)+` AND next_retry_at <= `+b.T(p.Now)+`
         ORDER BY next_retry_at, id`, Lit(p.Limit)) + `
),
deep AS ` + materialized + `(
    SELECT pre.partition_key FROM pre WHERE pre.partition_key IS NOT NULL
     GROUP BY pre.partition_key HAVING COUNT(*) > ` + Lit(perKey) + `
),
kfirst AS ` + materialized + `(
    SELECT c.id FROM (
        SELECT h.id, ROW_NUMBER() OVER (PARTITION BY h.partition_key ORDER BY h.next_retry_at, h.id) AS wn
          FROM pre h WHERE h.partition_key IN (SELECT partition_key FROM deep)) c
     WHERE c.wn <= ` + Lit(perKey) + `
),
w AS ` + materialized + `(
    ` + firstRows(scan+`
           AND (s.partition_key IS NULL OR s.partition_key NOT IN (SELECT partition_key FROM deep) OR s.id IN (SELECT id FROM kfirst))
     ORDER BY s.next_retry_at, s.id`, Lit(p.Limit)) + `
),
`
	} else {
		// MySQL/MariaDB read the bounded scan whole anyway (and compute a
		// common table expression again at each reference: one form).
		ctes += `
w AS ` + materialized + `(
    ` + firstRows(`SELECT r.id, r.partition_key, r.next_retry_at FROM (
        SELECT q.id, q.partition_key, q.next_retry_at,
               ROW_NUMBER() OVER (PARTITION BY q.partition_key ORDER BY q.next_retry_at, q.id) AS wn
          FROM (`+scan+`) q) r
     WHERE r.partition_key IS NULL OR r.wn <= `+Lit(perKey)+`
     ORDER BY r.next_retry_at, r.id`, Lit(p.Limit)) + `
),
`
	}
	ctes += `wr AS ` + materialized + `(
    SELECT w.id, w.partition_key, w.next_retry_at,
           ROW_NUMBER() OVER (PARTITION BY w.partition_key ORDER BY w.id) AS krn
      FROM w
),
ws AS ` + materialized + `(
    SELECT wr.id, wr.partition_key, wr.next_retry_at, wr.krn,
           CASE WHEN wr.krn = 1 AND wr.partition_key IS NOT NULL THEN ` + c.FirstOf("b.id", t.Events+" b", `b.event_type = `+b.P(p.EventType)+` AND b.partition_key = wr.partition_key AND b.status = 'PENDING'`+heap+`
                          AND b.id NOT IN (SELECT id FROM w)`) + ` END AS stop1
      FROM wr
),
wt AS ` + materialized + `(
    SELECT ws.id, ws.partition_key, ws.next_retry_at, ws.krn,
           FIRST_VALUE(ws.stop1) OVER (PARTITION BY ws.partition_key ORDER BY ws.krn) AS stop_id
      FROM ws
)`
	block := func(alias string) string {
		if !p.BlockOnFailure {
			return ""
		}
		return blockFilter(t, b, p, alias)
	}
	cand = `SELECT z.id, z.partition_key, z.next_retry_at FROM (
    SELECT y.id, y.partition_key, y.next_retry_at, ROW_NUMBER() OVER (PARTITION BY y.partition_key ORDER BY y.id) AS rn FROM (
    SELECT wt.id, wt.partition_key, wt.next_retry_at FROM wt
     WHERE wt.partition_key IS NULL OR ((wt.stop_id IS NULL OR wt.id < wt.stop_id)` + block("wt") + `)
    UNION ALL
    SELECT h.id, h.partition_key, h.next_retry_at FROM wt JOIN ` + t.Events + ` h ON h.id = wt.stop_id
     WHERE wt.krn = 1 AND wt.stop_id < wt.id AND h.next_retry_at <= ` + b.T(p.Now) + block("h") + `
    ) y) z
     WHERE z.partition_key IS NULL OR z.rn <= ` + Lit(perKey)
	return ctes, cand
}

// blockFilter is the condition (on-failure: block) that no FAILED row of
// the type and key of the row alias, and no DLQ row of the publisher
// waiting for an operator, precedes it.
func blockFilter(t dialects.Tables, b claimBinder, p dialects.ClaimParams, alias string) string {
	return `
       AND NOT EXISTS (SELECT 1 FROM ` + t.Events + ` f
                        WHERE f.event_type = ` + b.P(p.EventType) + ` AND f.partition_key = ` + alias + `.partition_key
                          AND f.status = 'FAILED' AND f.id < ` + alias + `.id)
       AND NOT EXISTS (SELECT 1 FROM ` + t.DLQ + ` q
                        WHERE q.event_type = ` + b.P(p.EventType) + ` AND q.partition_key = ` + alias + `.partition_key
                          AND q.source = 'publisher' AND q.status IN ('MOVED', 'TO_RETRY', 'IN_PROCESS')
                          AND q.event_id < ` + alias + `.id)`
}

// busyCTE is busy: the keys of the type with a row IN_PROCESS.
func busyCTE(c ClaimSQL, t dialects.Tables, b claimBinder, p dialects.ClaimParams) string {
	materialized, inProcessHint := c.Materialized(), c.InProcessHint()
	return `busy AS ` + materialized + `(
    SELECT DISTINCT j.partition_key FROM (
        SELECT i.partition_key FROM ` + t.Events + ` i` + inProcessHint + `
         WHERE i.status = 'IN_PROCESS' AND i.event_type = ` + b.P(p.EventType) + ` AND i.partition_key IS NOT NULL
         ORDER BY i.claimed_at) j
)`
}

// ClaimSQL is what the ordered claim's builder asks of a database: the
// pieces of SQL that differ between databases, and the shapes that suit
// their planners. Each database package implements it on a zero-size type,
// so the builder never asks which database it is writing for.
type ClaimSQL interface {
	// FirstRows is "the first n rows of query" (query ends with its ORDER
	// BY): LIMIT n, or Oracle's ROWNUM form.
	FirstRows(query, n string) string
	// FirstOf is the scalar subquery of the smallest col of from where
	// where: ORDER BY col LIMIT 1 (OrderLimitFirstOf), or MIN(col)
	// (MinFirstOf) where a scalar subquery cannot be limited (Oracle).
	FirstOf(col, from, where string) string
	// Materialized is the keyword that makes a common table expression
	// read once ("MATERIALIZED " on PostgreSQL), or "".
	Materialized() string
	// InProcessHint is the index hint after the table of the busy keys'
	// read (MySQL's FORCE INDEX on the claim index), or "".
	InProcessHint() string
	// HeadProbe is a condition, always true, on a column outside the key
	// index, added to the probe of a key's head row. On PostgreSQL it
	// makes the probe a plain index scan, which visits the heap and marks
	// the entries of rows already sent (dead) so that the next claim skips
	// them; an index-only scan walks them again at every claim
	// (docs/ordering.md, "Throughput"). "" elsewhere.
	HeadProbe() string
	// LazyWindow reports whether the planner stops reading the window at
	// limit rows that pass (PostgreSQL): the per-key cap is then two
	// hashed sets of the first limit due rows; otherwise a ROW_NUMBER
	// over the bounded scan, which MySQL and Oracle read whole anyway.
	LazyWindow() bool
	// KeyWalk is the form of the walk over the type's keys.
	KeyWalk() KeyWalk
}

// KeyWalk is how an ordered claim walks a type's keys when its window is
// short (docs/ordering.md, "The walk").
type KeyWalk int

const (
	// WalkGroupBy is a loose index scan, MIN(id) per key with GROUP BY
	// (MySQL/MariaDB: "Using index for group-by").
	WalkGroupBy KeyWalk = iota + 1
	// WalkRecursive is a recursive WITH from key to next key, bounded by
	// walkKeys (Oracle).
	WalkRecursive
	// WalkRecursiveCounted is the recursive walk that counts the keys
	// that yield a head and stops at limit of them, behind the caller's
	// gate (PostgreSQL).
	WalkRecursiveCounted
)

// OrderLimitFirstOf is ClaimSQL.FirstOf as ORDER BY col LIMIT 1: the form
// of PostgreSQL (15 has no min(uuid)) and of MySQL/MariaDB (MariaDB 10.11
// reads every entry of a correlated MIN(), a million for a million-event
// key, where ORDER BY … LIMIT 1 reads one: measured).
func OrderLimitFirstOf(col, from, where string) string {
	return "(SELECT " + col + " FROM " + from + "\n                        WHERE " + where + "\n                        ORDER BY " + col + " LIMIT 1)"
}

// MinFirstOf is ClaimSQL.FirstOf as MIN(col): Oracle's form (an INDEX
// RANGE SCAN (MIN/MAX)).
func MinFirstOf(col, from, where string) string {
	return "(SELECT MIN(" + col + ") FROM " + from + "\n                        WHERE " + where + ")"
}

// walkKeys bounds the keys one walk reads.
func walkKeys(limit int) int { return 10 * limit }

// BusyFew is the condition "fewer than limit keys of the type in flight",
// the other gate of the walk: with a batch's worth of keys or more in
// flight the relay is not starved, and the window moves as they are
// finalized; walking then would probe every busy key at each claim
// beside the batches in flight (the ordering bench's 1,000 keys at batch
// 200: about 1,000 probes per such claim).
func BusyFew(p dialects.ClaimParams) string {
	return `(SELECT COUNT(*) FROM busy) < ` + Lit(p.Limit)
}

// WindowCut writes the condition "the type has at least keyScan(limit)
// due PENDING rows": the window's read was cut by its cap. An index range
// read of at most keyScan(limit) entries of the claim index; ORDER BY
// keeps it there (without it PostgreSQL chose a sequential scan, which
// reads the PROCESSED rows ahead of the first PENDING one).
func WindowCut(c ClaimSQL, t dialects.Tables, b claimBinder, p dialects.ClaimParams) string {
	firstRows := c.FirstRows
	return `(SELECT COUNT(*) FROM (
        ` + firstRows(`SELECT 1 AS one FROM `+t.Events+` c
         WHERE c.status = 'PENDING' AND c.event_type = `+b.P(p.EventType)+` AND c.next_retry_at <= `+b.T(p.Now)+`
         ORDER BY c.next_retry_at, c.id`, Lit(keyScan(p.Limit))) + `) cc) >= ` + Lit(keyScan(p.Limit))
}

// OrderedWalk writes the walk's common table expressions (none on
// MySQL/MariaDB), to follow WITH (RECURSIVE on PostgreSQL) after busy
// (busyCTE), and heads, the query of the walked heads (id, partition_key,
// next_retry_at), at most limit of them, in (next_retry_at, id) order.
// gate, when not empty, is the condition the walk's first step runs under
// (PostgreSQL; MySQL/MariaDB and Oracle run the walk as its own
// statement). exclude, when not empty, names a relation of candidates
// (partition_key) whose keys the walk skips (PostgreSQL: the window's;
// MySQL/MariaDB and Oracle drop them in Go, AppendWalked).
//
// PostgreSQL and Oracle walk with a recursive common table expression:
// each step one probe of the key index for the next key of the type
// (ORDER BY … LIMIT 1 on PostgreSQL, MIN() on Oracle: an INDEX RANGE SCAN
// (MIN/MAX)), then one probe for each key's first PENDING row.
// MySQL/MariaDB read the keys with PENDING rows and each key's first
// PENDING id in one loose index scan of (event_type, partition_key,
// status) + id ("Using index for group-by", measured on MariaDB 10.11:
// 1,002 entries read for 1,001 keys); status is bounded by BETWEEN, the
// form that keeps MariaDB on the loose scan in the discovery (MySQL's
// eventsDueTypes).
func OrderedWalk(c ClaimSQL, t dialects.Tables, b claimBinder, p dialects.ClaimParams, gate, exclude string) (ctes, heads string) {
	firstRows, heap, walk := c.FirstRows, c.HeadProbe(), c.KeyWalk()
	excl := ""
	if exclude != "" {
		excl = `
           AND v.partition_key NOT IN (SELECT x.partition_key FROM ` + exclude + ` x WHERE x.partition_key IS NOT NULL)`
	}
	var keys string
	if walk == WalkGroupBy {
		keys = `SELECT k.partition_key, MIN(k.id) AS head FROM ` + t.Events + ` k
         WHERE k.event_type = ` + b.P(p.EventType) + ` AND k.partition_key IS NOT NULL AND k.status BETWEEN 'PENDING' AND 'PENDING'
         GROUP BY k.event_type, k.partition_key, k.status
         ORDER BY k.event_type, k.partition_key, k.status
         LIMIT ` + Lit(walkKeys(p.Limit))
	} else {
		from := ""
		where := ""
		if gate != "" {
			where = "\n     WHERE " + gate
		}
		if walk == WalkRecursive {
			from = " FROM DUAL"
		}
		next := func(after string) string {
			return c.FirstOf("k.partition_key", t.Events+" k", `k.event_type = `+b.P(p.EventType)+after+` AND k.partition_key IS NOT NULL
                          AND k.status IN ('PENDING', 'IN_PROCESS', 'FAILED')`)
		}
		if walk == WalkRecursive {
			ctes = `walk (partition_key, n) AS (
    SELECT ` + next("") + `, 1` + from + where + `
    UNION ALL
    SELECT ` + next(" AND k.partition_key > wk.partition_key") + `, wk.n + 1
      FROM walk wk
     WHERE wk.partition_key IS NOT NULL AND wk.n < ` + Lit(walkKeys(p.Limit)) + `
)`
		} else {
			// PostgreSQL counts the keys that will yield a head (found)
			// as it walks and stops at limit of them: a walk past one
			// blocked key ahead of many healthy ones reads about limit
			// keys, not walkKeys(limit). The head probe is made twice for
			// a walked key (here and in keys below): one index probe.
			hitNow, hitBlock := b.T(p.Now), ""
			if p.BlockOnFailure {
				hitBlock = blockFilter(t, b, p, "hh")
			}
			hit := `CASE WHEN wk.partition_key NOT IN (SELECT partition_key FROM busy)` + excl0(exclude, "wk") + `
                AND EXISTS (SELECT 1 FROM ` + t.Events + ` hh
                             WHERE hh.id = ` + c.FirstOf("b.id", t.Events+" b", `b.event_type = `+b.P(p.EventType)+` AND b.partition_key = wk.partition_key AND b.status = 'PENDING'`+heap) + `
                               AND hh.status = 'PENDING' AND hh.next_retry_at <= ` + hitNow + hitBlock + `)
           THEN 1 ELSE 0 END`
			ctes = `walk (partition_key, n, found) AS (
    SELECT ` + next("") + `, 1, 0` + where + `
    UNION ALL
    SELECT ` + next(" AND k.partition_key > wk.partition_key") + `, wk.n + 1,
           wk.found + ` + hit + `
      FROM walk wk
     WHERE wk.partition_key IS NOT NULL AND wk.n < ` + Lit(walkKeys(p.Limit)) + ` AND wk.found < ` + Lit(p.Limit) + `
)`
		}
		keys = `SELECT wk.partition_key, ` + c.FirstOf("b.id", t.Events+" b", `b.event_type = `+b.P(p.EventType)+` AND b.partition_key = wk.partition_key AND b.status = 'PENDING'`+heap) + ` AS head
          FROM walk wk
         WHERE wk.partition_key IS NOT NULL`
	}
	// Bound in text order (Oracle's and MySQL's placeholders).
	now, block := b.T(p.Now), ""
	if p.BlockOnFailure {
		block = blockFilter(t, b, p, "h")
	}
	heads = firstRows(`SELECT h.id, h.partition_key, h.next_retry_at FROM (
        `+keys+`) v
      JOIN `+t.Events+` h ON h.id = v.head
     WHERE v.partition_key NOT IN (SELECT partition_key FROM busy)`+excl+`
       AND h.status = 'PENDING' AND h.next_retry_at <= `+now+block+`
     ORDER BY h.next_retry_at, h.id`, Lit(p.Limit))
	return ctes, heads
}

// excl0 is the condition that alias.partition_key is not among the keys
// of the relation exclude (none when exclude is empty).
func excl0(exclude, alias string) string {
	if exclude == "" {
		return ""
	}
	return `
                AND ` + alias + `.partition_key NOT IN (SELECT x.partition_key FROM ` + exclude + ` x WHERE x.partition_key IS NOT NULL)`
}

// AppendWalked appends to cands the walked heads of keys that are not
// candidates already.
func AppendWalked(cands, heads []Candidate) []Candidate {
	have := make(map[string]bool, len(cands))
	for _, c := range cands {
		if c.key != nil {
			have[*c.key] = true
		}
	}
	for _, h := range heads {
		if h.key != nil && !have[*h.key] {
			have[*h.key] = true
			cands = append(cands, h)
		}
	}
	return cands
}

// candidate is a row an ordered claim read before locking: its id and key.
type Candidate struct {
	id  oncebox.EventID
	key *string
}

// QueryCandidates runs the plain read of an ordered claim's candidates
// (id, partition_key, …) in claim order. cut reports the marker row of
// CandidatesRead (all NULL): the window's read was cut by its cap.
func QueryCandidates(ctx context.Context, db wsql.ContextExecutor, q dialects.Query) (out []Candidate, cut bool, err error) {
	rows, err := db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	for rows.Next() {
		var c Candidate
		var id any
		var key sql.NullString
		var next any
		if err := rows.Scan(&id, &key, &next); err != nil {
			return nil, false, fmt.Errorf("scan: %w", err)
		}
		if id == nil {
			cut = true
			continue
		}
		if err := c.id.Scan(id); err != nil {
			return nil, false, fmt.Errorf("scan: %w", err)
		}
		if key.Valid {
			c.key = &key.String
		}
		out = append(out, c)
	}
	return out, cut, RowsErr(rows)
}

// CandidatesRead is the first statement of an ordered claim on
// MySQL/MariaDB and Oracle: the candidates (OrderedCandidates) in
// (next_retry_at, id) order, and a marker row of NULLs when the window's
// read was cut (WindowCut) and fewer than limit keys are busy (BusyFew), so that the claim knows, without another round
// trip, whether its walk may find more (QueryCandidates).
func CandidatesRead(p dialects.ClaimParams, ctes, cand, cut string) string {
	return "WITH " + ctes + "\n" + cand + `
UNION ALL
SELECT NULL, NULL, NULL FROM DUAL
 WHERE ` + BusyFew(p) + `
   AND ` + cut + `
 ORDER BY next_retry_at, id`
}

// WalkRead is the walk's statement on MySQL/MariaDB and Oracle (the third
// of an ordered claim, run only when the window was cut and the
// candidates are short): busy, then OrderedWalk's heads.
func WalkRead(c ClaimSQL, t dialects.Tables, b claimBinder, p dialects.ClaimParams) string {
	// Oracle's recursive WITH takes no RECURSIVE keyword; MySQL's walk is
	// not recursive. busy first: MySQL binds its parameters in text order.
	with := "WITH " + busyCTE(c, t, b, p)
	ctes, heads := OrderedWalk(c, t, b, p, "", "")
	if ctes != "" {
		with += ",\n" + ctes
	}
	return with + "\n" + heads
}

// CandidateIDs is the ids of cands, in order.
func CandidateIDs(cands []Candidate) []oncebox.EventID {
	ids := make([]oncebox.EventID, len(cands))
	for i, c := range cands {
		ids[i] = c.id
	}
	return ids
}

// claimable is what an ordered claim keeps of the candidates it locked
// (given in claim order), in id order: the key prefixes (keepKeyPrefixes),
// cut to limit without breaking one (cutKeyPrefixes). The rows it leaves
// stay locked until the claim's commit, unchanged.
func Claimable(cands []Candidate, locked []dialects.ClaimedEvent, limit int) []dialects.ClaimedEvent {
	keep := cutKeyPrefixes(keepKeyPrefixes(cands, locked), limit)
	SortByID(keep)
	return keep
}

// keepKeyPrefixes keeps the locked rows of an ordered claim that are not
// preceded, in their key, by a candidate that was not locked (skipped
// because another claimer holds it, or no longer PENDING and due): the
// claim takes a prefix of each key or nothing of it.
func keepKeyPrefixes(cands []Candidate, locked []dialects.ClaimedEvent) (keep []dialects.ClaimedEvent) {
	got := make(map[oncebox.EventID]bool, len(locked))
	for _, e := range locked {
		got[e.ID] = true
	}
	// first missing candidate id of each key
	gap := map[string]oncebox.EventID{}
	for _, c := range cands {
		if c.key == nil || got[c.id] {
			continue
		}
		if g, ok := gap[*c.key]; !ok || bytes.Compare(c.id[:], g[:]) < 0 {
			gap[*c.key] = c.id
		}
	}
	for _, e := range locked {
		if e.Key != nil {
			if g, ok := gap[*e.Key]; ok && bytes.Compare(e.ID[:], g[:]) > 0 {
				continue
			}
		}
		keep = append(keep, e)
	}
	return keep
}

// cutKeyPrefixes keeps at most limit of an ordered claim's rows, given in
// claim order, without breaking a key's prefix: the keys (and the rows
// without a key, each alone) in the order of their first row, each key's
// rows in id order, cut after limit rows.
func cutKeyPrefixes(rows []dialects.ClaimedEvent, limit int) (keep []dialects.ClaimedEvent) {
	if len(rows) <= limit {
		return rows
	}
	var groups [][]dialects.ClaimedEvent
	at := map[string]int{}
	for _, e := range rows {
		if e.Key == nil {
			groups = append(groups, []dialects.ClaimedEvent{e})
			continue
		}
		g, ok := at[*e.Key]
		if !ok {
			g = len(groups)
			at[*e.Key] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], e)
	}
	for _, g := range groups {
		SortByID(g)
		for _, e := range g {
			if len(keep) == limit {
				return keep
			}
			keep = append(keep, e)
		}
	}
	return keep
}

// SortByID puts an ordered claim's rows in id order, which is each key's
// order: the relay sends a batch in slice order, and a key's rows may be
// in the window out of id order (an earlier row that failed and came due
// again has a later next_retry_at than its successors).
func SortByID(events []dialects.ClaimedEvent) {
	slices.SortStableFunc(events, func(a, b dialects.ClaimedEvent) int { return bytes.Compare(a.ID[:], b.ID[:]) })
}

// lit writes a count of an ordered claim (a LIMIT, a bound) into its text
// rather than binding it: a prepared statement (pgx prepares and caches
// every statement) runs on a generic plan after five executions, and with
// its LIMITs unknown PostgreSQL's generic plan sorted the type's every
// PENDING row instead of reading the ordered index up to the limit (a
// claim of 200 took 45 ms instead of 3, measured, falling as the backlog
// drained). The counts are the batch size and constants, so the texts
// are few.
func Lit(n int) string { return strconv.Itoa(n) }

// claimBinder binds the arguments of a statement in text order: p binds a
// value, t a time, each returning the text that stands for it.
type claimBinder interface {
	P(v any) string
	T(v time.Time) string
}

// LimitClause is "query LIMIT n" (PostgreSQL, MySQL).
func LimitClause(query, n string) string { return query + "\n                        LIMIT " + n }
