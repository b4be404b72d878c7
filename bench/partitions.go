package main

import (
	"context"
	"fmt"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects/postgres"
	"github.com/oncebox/watermill-oncebox/internal/metadata"
	"github.com/oncebox/watermill-oncebox/migrate"
)

// partitionsHours is the span of the partitions scenario's history: its
// rows are spread evenly over it, one partition per hour.
const partitionsHours = 10

// runPartitions compares a plain outbox with one partitioned by the hour
// (outbox.partitions, issue 28, item 4) holding the same 1,000,000 rows
// spread over the last 10 hours: 900,000 PROCESSED (the history kept for
// outbox.clean-up.ttl) and 100,000 PENDING in the last hour. For each
// layout: the table's and its indexes' size; the raw claim-and-mark loop
// draining the PENDING rows (rows/s); and the retention of the 9 oldest
// hours — on the plain table the clean-up's DeleteProcessed, 1,000 rows a
// statement, as the job runs it; on the partitioned one the job's
// MaintainPartitions, which drops the 9 expired partitions — its time and
// bytes of WAL, and the size left after it (no VACUUM in between).
func runPartitions(ctx context.Context, e *env) ([]row, error) {
	defer e.dropSchema()
	n := e.n(1_000_000, 20_000)
	pending := n / 10
	now := time.Now().UTC()
	base := now.Add(-partitionsHours * time.Hour).Truncate(time.Hour)
	var rows []row
	for _, partitioned := range []bool{false, true} {
		layout := "plain table"
		if partitioned {
			layout = "partitioned by hour"
		}
		fmt.Fprintf(stderr, "bench: partitions: %s, %d rows…\n", layout, n)
		d, err := e.freshSchema(ctx)
		if err != nil {
			return nil, err
		}
		db := wsql.BeginnerFromPgx(e.pool)
		pc := oncebox.PartitionsConfig{Interval: time.Hour, Ahead: 3, Retention: oncebox.PartitionRetentionDrop}
		if partitioned {
			d = d.WithPartitions(pc)
			if err := migrate.Migrate(ctx, db, d); err != nil {
				return nil, fmt.Errorf("partition the outbox: %w", err)
			}
			// The partitions of the history: the job creates the interval
			// of its now and 3 ahead; run it as it would have run then.
			for h := 0; h <= partitionsHours; h++ {
				at := base.Add(time.Duration(h) * time.Hour)
				if _, err := d.MaintainPartitions(ctx, db, pc, at, at.Add(-1000*time.Hour)); err != nil {
					return nil, fmt.Errorf("partitions of %s: %w", at, err)
				}
			}
		}
		if err := fillHistory(ctx, e.pool, d, base, n, pending); err != nil {
			return nil, err
		}
		if _, err := e.pool.Exec(ctx, "VACUUM ANALYZE "+d.Tables().Events); err != nil {
			return nil, err
		}
		heap, idx, err := outboxSize(ctx, e.pool, d)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row{Case: layout + ": outbox size, " + fmt.Sprint(n) + " rows", Value: float64(heap+idx) / (1 << 20), Unit: "MB",
			Note: fmt.Sprintf("heap %.1f MB, indexes %.1f MB", float64(heap)/(1<<20), float64(idx)/(1<<20))})

		start := time.Now()
		done := 0
		for {
			k, err := claimAndMark(ctx, e.pool, d, writesBatch)
			if err != nil {
				return nil, fmt.Errorf("%s: claim: %w", layout, err)
			}
			if k == 0 {
				break
			}
			done += k
		}
		took := time.Since(start)
		if done != pending {
			return nil, fmt.Errorf("%s: claimed %d of %d PENDING rows", layout, done, pending)
		}
		rows = append(rows, row{Case: layout + ": raw claim-and-mark loop over the PENDING rows", Value: float64(done) / took.Seconds(), Unit: "rows/s",
			Note: fmt.Sprintf("%d rows among %d, batch %d, in %.2fs", done, n, writesBatch, took.Seconds())})

		var before string
		if err := e.pool.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&before); err != nil {
			return nil, err
		}
		cutoff := base.Add((partitionsHours - 1) * time.Hour)
		start = time.Now()
		removed := 0
		how := ""
		if partitioned {
			st, err := d.MaintainPartitions(ctx, db, pc, now, cutoff)
			if err != nil {
				return nil, fmt.Errorf("%s: retention: %w", layout, err)
			}
			how = fmt.Sprintf("MaintainPartitions: %d partitions dropped, %d kept", st.Removed, st.Kept)
		} else {
			for {
				k, err := d.DeleteProcessed(ctx, db, cutoff, writesBatch)
				if err != nil {
					return nil, fmt.Errorf("%s: retention: %w", layout, err)
				}
				if k == 0 {
					break
				}
				removed += int(k)
			}
			how = fmt.Sprintf("DeleteProcessed, %d rows a statement: %d rows deleted", writesBatch, removed)
		}
		took = time.Since(start)
		var wal float64
		if err := e.pool.QueryRow(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::float8", before).Scan(&wal); err != nil {
			return nil, err
		}
		heapAfter, idxAfter, err := outboxSize(ctx, e.pool, d)
		if err != nil {
			return nil, err
		}
		var left int
		if err := e.pool.QueryRow(ctx, "SELECT count(*) FROM "+d.Tables().Events).Scan(&left); err != nil {
			return nil, err
		}
		rows = append(rows, row{Case: layout + ": retention of the 9 oldest hours", Value: took.Seconds(), Unit: "s",
			Note: fmt.Sprintf("%s; %.1f MB of WAL; %d rows left; outbox %.1f MB after (heap %.1f, indexes %.1f), no VACUUM",
				how, wal/(1<<20), left, float64(heapAfter+idxAfter)/(1<<20), float64(heapAfter)/(1<<20), float64(idxAfter)/(1<<20))})
	}
	return rows, nil
}

// fillHistory inserts n rows of relayEventType whose UUIDv7 ids and
// created_at are spread evenly from base over partitionsHours hours: the
// last pending of them PENDING and due, the others PROCESSED at their
// creation.
func fillHistory(ctx context.Context, pool *pgxpool.Pool, d *postgres.Dialect, base time.Time, n, pending int) error {
	const placeholder = "00000000-0000-0000-0000-000000000000"
	md := metadata.Encode(map[string]string{"tenant": "acme"},
		oncebox.HeaderEventID, placeholder, oncebox.HeaderEventType, relayEventType)
	span := int64(partitionsHours * time.Hour / time.Millisecond)
	q := `INSERT INTO ` + d.Tables().Events + ` (id, event_type, topic, partition_key, message_uuid, payload, metadata,
       status, retry_count, next_retry_at, created_at, updated_at)
SELECT id, $1, $1, NULL, gen_random_uuid()::text, $2::bytea, replace($3::text, $4::text, id::text)::jsonb,
       CASE WHEN i >= $7::bigint - $8::bigint THEN 'PENDING' ELSE 'PROCESSED' END, 0, at, at, at
  FROM (SELECT i, to_timestamp(($5::bigint + i * $6::bigint / $7::bigint) / 1000.0) AS at,
               (lpad(to_hex($5::bigint + i * $6::bigint / $7::bigint), 12, '0') || '7' || lpad(to_hex(i % 4096), 3, '0')
                || substr(replace(gen_random_uuid()::text, '-', ''), 17))::uuid AS id
          FROM generate_series(0, $7::bigint - 1) AS i) AS g`
	tag, err := pool.Exec(ctx, q, relayEventType, orderPayload, md, placeholder, base.UnixMilli(), span, n, pending)
	if err != nil {
		return fmt.Errorf("fill a history of %d events: %w", n, err)
	}
	if tag.RowsAffected() != int64(n) {
		return fmt.Errorf("fill a history of %d events: inserted %d", n, tag.RowsAffected())
	}
	return nil
}

// outboxSize returns the bytes of the outbox table's heap (with its TOAST)
// and of its indexes, partitions included.
func outboxSize(ctx context.Context, pool *pgxpool.Pool, d *postgres.Dialect) (heap, idx int64, err error) {
	// The table and its partitions (pg_partition_tree gives nothing for a
	// plain table); a partitioned parent itself has no storage.
	err = pool.QueryRow(ctx, `SELECT coalesce(sum(pg_table_size(c.oid)), 0)::bigint, coalesce(sum(pg_indexes_size(c.oid)), 0)::bigint
  FROM pg_class c
 WHERE c.oid = $1::regclass OR c.oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = $1::regclass)`, d.Tables().Events).Scan(&heap, &idx)
	return heap, idx, err
}
