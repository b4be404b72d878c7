package postgres

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/jackc/pgx/v5/pgconn"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
)

// Partitioning of the outbox table (issue 28, item 4; docs/postgresql.md,
// "Partitions"). The table is partitioned BY RANGE (id): an event id is a
// UUIDv7 whose first 48 bits are its unix milliseconds, so the bound of a
// time is the uuid of those 48 bits followed by zeros, PRIMARY KEY (id)
// holds on the partitioned table (the partition key is in it), and the
// partial indexes created on the parent exist on every partition.
// A DEFAULT partition takes the ids of no range partition: the rows of the
// table before its conversion, and ids that are not UUIDv7.

// PartitionMigrationVersion numbers the opt-in step that converts the
// outbox table to a partitioned one. It is outside the numbering of the
// migrations every install runs (0001…), so that turning partitions on
// later never leaves a gap below a plain migration: a dialect built with
// WithPartitions appends it to Migrations, and migrate applies it once.
const PartitionMigrationVersion = 1001

// WithPartitions returns a copy of d whose Migrations end with the step
// that partitions the outbox table (PartitionMigrationVersion), with the
// partitions of p.Interval for the current interval and p.Ahead after it.
// A zero p (partitions off) returns d unchanged.
func (d *Dialect) WithPartitions(p oncebox.PartitionsConfig) *Dialect {
	if !p.Enabled() {
		return d
	}
	c := *d
	c.partitions = partitionDefaults(p)
	return &c
}

// Partitioned implements dialects.Partitioner: WithPartitions.
func (d *Dialect) Partitioned(p oncebox.PartitionsConfig) dialects.Dialect {
	return d.WithPartitions(p)
}

var _ dialects.Partitioner = (*Dialect)(nil)

// partitionMigration is the conversion step: one DO block, so that it runs
// as one statement inside the migration transaction, under the migration
// lock.
//
// It renames the table to <events>_default (and its indexes to
// <name>_default), creates the partitioned table LIKE it with the primary
// key and every index it had (their definitions read before the rename, so
// the CREATE INDEX statements name the new parent), and attaches the old
// table as the DEFAULT partition: its equivalent indexes are attached, not
// rebuilt, and its rows stay where they are. It then creates the range
// partitions of the current interval and Ahead after it; the default
// partition is empty on a new install, so these need no scan of it. On a
// table already partitioned it does nothing. The ACCESS EXCLUSIVE lock it
// takes on the table lasts the migration transaction.
func (d *Dialect) partitionMigration() dialects.Migration {
	iv := d.partitions.Interval.Milliseconds()
	sql := fmt.Sprintf(`DO $oncebox$
DECLARE
    parent regclass := %[1]s;
    nsp    text;
    rel    text;
    pk     text;
    defs   text[];
    names  text[];
    i      int;
    lo     bigint;
    hi     bigint;
BEGIN
    IF (SELECT relkind FROM pg_class WHERE oid = parent) = 'p' THEN
        RETURN;
    END IF;
    EXECUTE format('LOCK TABLE %%s IN ACCESS EXCLUSIVE MODE', parent);
    SELECT n.nspname, c.relname INTO nsp, rel
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = parent;
    SELECT ic.relname INTO pk
      FROM pg_index x JOIN pg_class ic ON ic.oid = x.indexrelid
     WHERE x.indrelid = parent AND x.indisprimary;
    SELECT coalesce(array_agg(pg_get_indexdef(x.indexrelid)), '{}'), coalesce(array_agg(ic.relname), '{}')
      INTO defs, names
      FROM pg_index x JOIN pg_class ic ON ic.oid = x.indexrelid
     WHERE x.indrelid = parent AND NOT x.indisprimary;
    EXECUTE format('ALTER TABLE %%I.%%I RENAME TO %%I', nsp, rel, left(rel, 55) || '_default');
    EXECUTE format('ALTER INDEX %%I.%%I RENAME TO %%I', nsp, pk, left(pk, 55) || '_default');
    FOR i IN 1 .. coalesce(array_length(names, 1), 0) LOOP
        EXECUTE format('ALTER INDEX %%I.%%I RENAME TO %%I', nsp, names[i], left(names[i], 55) || '_default');
    END LOOP;
    EXECUTE format('CREATE TABLE %%I.%%I (LIKE %%I.%%I INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE INCLUDING COMMENTS) PARTITION BY RANGE (id)',
        nsp, rel, nsp, left(rel, 55) || '_default');
    EXECUTE format('ALTER TABLE %%I.%%I ADD CONSTRAINT %%I PRIMARY KEY (id)', nsp, rel, pk);
    FOR i IN 1 .. coalesce(array_length(defs, 1), 0) LOOP
        EXECUTE defs[i];
    END LOOP;
    EXECUTE format('ALTER TABLE %%I.%%I ATTACH PARTITION %%I.%%I DEFAULT', nsp, rel, nsp, left(rel, 55) || '_default');
    lo := floor(extract(epoch FROM clock_timestamp()) * 1000 / %[2]d)::bigint * %[2]d;
    FOR i IN 0 .. %[3]d LOOP
        hi := lo + %[2]d;
        EXECUTE format('CREATE TABLE %%I.%%I PARTITION OF %%I.%%I FOR VALUES FROM (%%L) TO (%%L)',
            nsp, left(rel, 40) || '_p' || to_char(to_timestamp(lo / 1000.0) AT TIME ZONE 'UTC', 'YYYYMMDD"t"HH24MI'),
            nsp, rel,
            lpad(to_hex(lo), 12, '0') || '00000000000000000000',
            lpad(to_hex(hi), 12, '0') || '00000000000000000000');
        lo := hi;
    END LOOP;
END
$oncebox$`, quoteLiteral(d.tables.Events), iv, d.partitions.Ahead)
	return dialects.Migration{
		Version:    PartitionMigrationVersion,
		Name:       "1001_partition_outbox (outbox.partitions, opt-in)",
		Statements: []string{sql},
	}
}

// partitionDefaults fills Ahead and Retention as Config.WithDefaults
// does, for a PartitionsConfig built by hand.
func partitionDefaults(p oncebox.PartitionsConfig) oncebox.PartitionsConfig {
	if p.Ahead <= 0 {
		p.Ahead = oncebox.DefaultPartitionsAhead
	}
	if p.Retention == "" {
		p.Retention = oncebox.PartitionRetentionDrop
	}
	return p
}

// quoteLiteral quotes s as an SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// partitionBound is the lowest id of the unix millisecond ms: its 48 bits
// then zeros, as 32 hex digits (PostgreSQL's uuid input takes them without
// hyphens; uuids compare as bytes, so the order of ids is that of times).
func partitionBound(ms int64) string {
	var b [16]byte
	for i := 0; i < 6; i++ {
		b[5-i] = byte(ms >> (8 * i))
	}
	return hex.EncodeToString(b[:])
}

// boundTime is the inverse of partitionBound on a bound uuid as PostgreSQL
// prints it.
func boundTime(u string) (time.Time, error) {
	h := strings.ReplaceAll(u, "-", "")
	if len(h) != 32 {
		return time.Time{}, fmt.Errorf("partition bound %q is not a uuid", u)
	}
	b, err := hex.DecodeString(h[:12])
	if err != nil {
		return time.Time{}, fmt.Errorf("partition bound %q: %w", u, err)
	}
	var ms int64
	for _, x := range b {
		ms = ms<<8 | int64(x)
	}
	return time.UnixMilli(ms).UTC(), nil
}

// partitionName is the name of the range partition starting at lo:
// <events table>_pYYYYMMDDtHHMM in UTC (the table name cut to keep it under
// 63 bytes), as the conversion step names them.
func (d *Dialect) partitionName(lo time.Time) string {
	rel := d.tables.Events
	if i := strings.LastIndexByte(rel, '.'); i >= 0 {
		rel = rel[i+1:]
	}
	if len(rel) > 40 {
		rel = rel[:40]
	}
	return rel + "_p" + lo.UTC().Format("20060102t1504")
}

// qualify prefixes name with the configured schema, if any.
func (d *Dialect) qualify(name string) string {
	if d.schema == "" {
		return name
	}
	return d.schema + "." + name
}

// partitionBoundRE reads the bounds of a range partition from
// pg_get_expr(relpartbound).
var partitionBoundRE = regexp.MustCompile(`FROM \('([0-9a-f-]+)'\) TO \('([0-9a-f-]+)'\)`)

// partitionLockTimeout bounds the wait of a retention step for its locks:
// a partition busy longer is tried again at the next run.
const partitionLockTimeout = "2s"

// MaintainPartitions is the partition maintenance the outbox clean-up job
// runs under its lease (poller, cleanUpLoop) when outbox.partitions is on:
// it creates the partitions of the interval of now and p.Ahead after it,
// then drops (or detaches) each range partition whose upper bound is at or
// before cutoff (now - outbox.clean-up.ttl) and that holds only PROCESSED
// rows. It fails when the outbox table is not partitioned (the conversion
// step of WithPartitions was not migrated).
func (d *Dialect) MaintainPartitions(ctx context.Context, db wsql.Beginner, p oncebox.PartitionsConfig, now, cutoff time.Time) (dialects.PartitionStats, error) {
	var st dialects.PartitionStats
	p = partitionDefaults(p)
	var kind string
	if err := scanOne(ctx, db, &kind, "SELECT relkind::text FROM pg_class WHERE oid = $1::regclass", d.tables.Events); err != nil {
		return st, fmt.Errorf("partitions: look up %s: %w", d.tables.Events, err)
	}
	if kind != "p" {
		return st, fmt.Errorf("outbox.partitions is set but %s is not partitioned: run the migrations with the partitions setting (migration %d)", d.tables.Events, PartitionMigrationVersion)
	}
	iv := p.Interval.Milliseconds()
	lo := now.UnixMilli() / iv * iv
	with, withRead := "", false
	for k := 0; k <= p.Ahead; k++ {
		from, to := lo+int64(k)*iv, lo+int64(k+1)*iv
		name := d.qualify(d.partitionName(time.UnixMilli(from)))
		var missing bool
		if err := scanOne(ctx, db, &missing, "SELECT to_regclass($1) IS NULL", name); err != nil {
			return st, fmt.Errorf("partitions: look up %s: %w", name, err)
		}
		if !missing {
			continue
		}
		if !withRead {
			w, err := d.partitionStorageParams(ctx, db)
			if err != nil {
				return st, err
			}
			with, withRead = w, true
		}
		// No IF NOT EXISTS: a partition created by a concurrent run
		// between the look-up and here must fail with 42P07 (below) and
		// not be counted as created by this run.
		q := fmt.Sprintf("CREATE TABLE %s PARTITION OF %s FOR VALUES FROM ('%s') TO ('%s')%s",
			name, d.tables.Events, partitionBound(from), partitionBound(to), with)
		_, err := db.ExecContext(ctx, q)
		var pgErr *pgconn.PgError
		switch {
		case errors.As(err, &pgErr) && (pgErr.Code == "42P17" || pgErr.Code == "23514"):
			// 42P17: the range overlaps a partition of another interval
			// (the setting changed): its rows go there. 23514: the
			// default partition already holds rows of this range (the
			// job ran late): they stay there, and the next intervals get
			// partitions of their own.
			continue
		case errors.As(err, &pgErr) && (pgErr.Code == "42P07" || pgErr.Code == "23505"):
			// Created at the same moment by another run (outside the
			// lease, e.g. by hand): IF NOT EXISTS does not cover a
			// concurrent CREATE.
			continue
		case err != nil:
			return st, fmt.Errorf("partitions: create %s: %w", d.partitionName(time.UnixMilli(from)), err)
		}
		st.Created++
	}
	rows, err := db.QueryContext(ctx, `SELECT n.nspname, c.relname, coalesce(pg_get_expr(c.relpartbound, c.oid), '')
  FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE i.inhparent = $1::regclass ORDER BY c.relname`, d.tables.Events)
	if err != nil {
		return st, fmt.Errorf("partitions: list: %w", err)
	}
	type part struct{ name string }
	var expired []part
	for rows.Next() {
		var nsp, rel, bound string
		if err := rows.Scan(&nsp, &rel, &bound); err != nil {
			rows.Close()
			return st, err
		}
		m := partitionBoundRE.FindStringSubmatch(bound)
		if m == nil {
			continue // DEFAULT: never dropped
		}
		hi, err := boundTime(m[2])
		if err != nil {
			rows.Close()
			return st, err
		}
		if !hi.After(cutoff) {
			expired = append(expired, part{name: quoteIdent(nsp) + "." + quoteIdent(rel)})
		}
	}
	if err := rows.Close(); err != nil {
		return st, err
	}
	for _, e := range expired {
		removed, err := d.retirePartition(ctx, db, p.Retention, e.name)
		var pgErr *pgconn.PgError
		switch {
		case errors.As(err, &pgErr) && pgErr.Code == "55P03":
			st.Kept++ // lock not granted in time: next run
		case errors.As(err, &pgErr) && pgErr.Code == "42P01":
			// Gone since the listing: another run (outside the lease,
			// e.g. by hand) retired it first.
		case err != nil:
			return st, fmt.Errorf("partitions: retire %s: %w", e.name, err)
		case removed:
			st.Removed++
		default:
			st.Kept++
		}
	}
	return st, nil
}

// partitionStorageParams returns " WITH (…)" holding the storage parameters
// (reloptions) of the newest range partition of the outbox, or "" when it
// has none. PostgreSQL refuses storage parameters on a partitioned table and
// a new partition does not inherit them, so an operator's per-table
// autovacuum settings (docs/postgresql.md: autovacuum_vacuum_threshold …),
// set on the partitions, are carried to each partition created after them.
func (d *Dialect) partitionStorageParams(ctx context.Context, db wsql.Beginner) (string, error) {
	var list string // one name=value a line: every driver scans text
	err := scanOne(ctx, db, &list, `SELECT array_to_string(coalesce(c.reloptions, '{}') || coalesce((
         SELECT array_agg('toast.' || o) FROM pg_class t, unnest(t.reloptions) AS o WHERE t.oid = c.reltoastrelid), '{}'), E'\n')
  FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
 WHERE i.inhparent = $1::regclass AND pg_get_expr(c.relpartbound, c.oid) <> 'DEFAULT'
 ORDER BY c.relname DESC LIMIT 1`, d.tables.Events)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("partitions: read the storage parameters of the newest partition: %w", err)
	}
	var parts []string
	for _, o := range strings.Split(list, "\n") {
		if o == "" {
			continue
		}
		k, v, ok := strings.Cut(o, "=")
		if !ok || !storageParamName.MatchString(k) {
			return "", fmt.Errorf("partitions: storage parameter %q of the newest partition is not name=value", o)
		}
		parts = append(parts, k+" = "+quoteLiteral(v))
	}
	if len(parts) == 0 {
		return "", nil
	}
	return " WITH (" + strings.Join(parts, ", ") + ")", nil
}

// storageParamName is what PostgreSQL prints as a storage parameter's name
// in reloptions (toast.autovacuum_… included).
var storageParamName = regexp.MustCompile(`^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)?$`)

// retirePartition drops or detaches the partition part, in one
// transaction, when it holds no row that is not PROCESSED.
//
// Locks: ACCESS EXCLUSIVE on the parent then on the partition, in that
// order (the order an insert or a claim takes them in: parent first, so no
// deadlock), for at most partitionLockTimeout. DROP and DETACH need the
// parent's ACCESS EXCLUSIVE lock anyway; taking it before the check means
// no insert, claim, mark or DLQ move can touch the partition between the
// check and the DROP: an insert with a non-v7 id of this old range, or a
// recovery returning a row to PENDING, waits for the commit and then goes
// (or fails to find the row) in the state after it. The traffic of the
// whole outbox waits for the lock, for the duration of the check: three
// probes of partial indexes (due_idx, in_process_idx, failed_idx), each
// empty on a done partition.
func (d *Dialect) retirePartition(ctx context.Context, db wsql.Beginner, mode, part string) (removed bool, err error) {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{})
	if err != nil {
		return false, err
	}
	defer func() {
		if err != nil || !removed {
			_ = tx.Rollback()
		}
	}()
	if _, err = tx.ExecContext(ctx, "SET LOCAL lock_timeout = '"+partitionLockTimeout+"'"); err != nil {
		return false, err
	}
	if _, err = tx.ExecContext(ctx, "LOCK TABLE "+d.tables.Events+", "+part+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		return false, err
	}
	// One probe per status other than PROCESSED (the CHECK constraint
	// allows no other), each answered by that status's partial index.
	var busy bool
	if err = scanOne(ctx, tx, &busy, `SELECT EXISTS (SELECT 1 FROM `+part+` WHERE status = 'PENDING')
    OR EXISTS (SELECT 1 FROM `+part+` WHERE status = 'IN_PROCESS')
    OR EXISTS (SELECT 1 FROM `+part+` WHERE status = 'FAILED')`); err != nil {
		return false, err
	}
	if busy {
		return false, nil
	}
	if mode == oncebox.PartitionRetentionDetach {
		_, err = tx.ExecContext(ctx, "ALTER TABLE "+d.tables.Events+" DETACH PARTITION "+part)
	} else {
		_, err = tx.ExecContext(ctx, "DROP TABLE "+part)
	}
	if err != nil {
		return false, err
	}
	if err = tx.Commit(); err != nil {
		return false, err
	}
	return true, nil
}

// quoteIdent quotes a catalog name as an SQL identifier.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// scanOne scans the one column of the first row of q into dst.
func scanOne(ctx context.Context, db wsql.ContextExecutor, dst any, q string, args ...any) error {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Close(); err != nil {
			return err
		}
		return sql.ErrNoRows
	}
	return rows.Scan(dst)
}
