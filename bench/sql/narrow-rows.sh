#!/usr/bin/env bash
# narrow-rows.sh: issue 28, item 3 — what narrower outbox rows save on
# PostgreSQL, measured with raw SQL so that only the row's shape differs.
#
#   bench/sql/narrow-rows.sh [N] [ROUNDS]      (default 100000 rows, 3 rounds)
#
# PGDSN (default postgres://root@127.0.0.1:5432/test) names the database; use
# a cluster of our own with autovacuum on (scripts/pgcluster.sh create ob_x
# prints its PRIMARY_DSN). Three shapes of the outbox table, each with the
# columns and partial indexes of migrations 1-5:
#
#   A  today before the change: metadata repeats the event id and type
#      {"tenant":"acme","oncebox_event_id":"<uuid>","oncebox_event_type":"order-created"}
#   B  the change built: metadata without them  {"tenant":"acme"}
#   C  B + typed columns: status smallint (0..3), message_uuid uuid
#      (measured, not built: docs/postgresql.md says why)
#
# Per round and shape: a fresh table, N rows inserted in one statement (WAL
# of the insert), a CHECKPOINT, then the relay's claim + mark PROCESSED in
# batches of 1,000, one autocommit statement each, as the dialect issues them
# (WAL and time of the drain); the table's size after the insert. Prints one
# line per round and shape; take the medians. WAL is the server's: run it on
# a quiet cluster.
set -euo pipefail
N=${1:-100000}
ROUNDS=${2:-3}
DSN=${PGDSN:-postgres://root@127.0.0.1:5432/test}
BATCH=1000
export PGOPTIONS="-c client_min_messages=warning"
PSQL=(psql "$DSN" -X -q -v ON_ERROR_STOP=1 -At)

ddl() { # $1 shape
	local status_t="varchar(16) NOT NULL DEFAULT 'PENDING'" uuid_t="varchar(255)"
	local pending="'PENDING'" inproc="'IN_PROCESS'" processed="'PROCESSED'" failed="'FAILED'"
	if [ "$1" = C ]; then
		status_t="smallint NOT NULL DEFAULT 0" uuid_t="uuid"
		pending=0 inproc=1 processed=2 failed=3
	fi
	cat <<SQL
DROP TABLE IF EXISTS narrow_$1;
CREATE TABLE narrow_$1 (
    id uuid PRIMARY KEY, event_type varchar(255) NOT NULL, topic varchar(255) NOT NULL,
    partition_key varchar(255), message_uuid $uuid_t NOT NULL, payload bytea NOT NULL,
    metadata jsonb NOT NULL DEFAULT '{}', status $status_t, retry_count integer NOT NULL DEFAULT 0,
    next_retry_at timestamptz NOT NULL, created_at timestamptz NOT NULL, updated_at timestamptz NOT NULL,
    claim_token uuid, claimed_at timestamptz, first_failed_at timestamptz, last_error text,
    claimed_by varchar(255));
CREATE INDEX narrow_$1_due ON narrow_$1 (event_type, next_retry_at, id) WHERE status = $pending;
CREATE INDEX narrow_$1_inproc ON narrow_$1 (claimed_at) WHERE status = $inproc;
CREATE INDEX narrow_$1_processed ON narrow_$1 (updated_at) WHERE status = $processed;
CREATE INDEX narrow_$1_failed ON narrow_$1 (updated_at) WHERE status = $failed;
CREATE INDEX narrow_$1_key ON narrow_$1 (event_type, partition_key, status, id)
 WHERE partition_key IS NOT NULL AND status IN ($pending, $inproc, $failed);
SQL
}

insert() { # $1 shape
	local meta="jsonb_build_object('tenant','acme')" muuid="gen_random_uuid()::text"
	if [ "$1" = A ]; then
		meta="jsonb_build_object('tenant','acme','oncebox_event_id',u::text,'oncebox_event_type','order-created')"
	fi
	[ "$1" = C ] && muuid="gen_random_uuid()"
	cat <<SQL
INSERT INTO narrow_$1 (id, event_type, topic, message_uuid, payload, metadata, next_retry_at, created_at, updated_at)
SELECT u, 'order-created', 'order-created', $muuid,
       convert_to('{"order_id":"0192f4a0-0000-7000-8000-000000000000","total":4200,"currency":"EUR"}', 'UTF8'),
       $meta, now() - interval '1 second' + i * interval '1 microsecond', now(), now()
  FROM (SELECT i, (lpad(to_hex(i), 12, '0') || '7000' || '8000' || md5(i::text))::text AS h FROM generate_series(1, $N) i) s,
       LATERAL (SELECT (substr(h,1,8)||'-'||substr(h,9,4)||'-'||substr(h,13,4)||'-'||substr(h,17,4)||'-'||substr(h,21,12))::uuid AS u) v;
SQL
}

drain() { # $1 shape: the dialect's EventsClaim and MarkProcessed, batch by batch
	local pending="'PENDING'" inproc="'IN_PROCESS'" processed="'PROCESSED'"
	[ "$1" = C ] && pending=0 inproc=1 processed=2
	local batches=$(((N + BATCH - 1) / BATCH))
	for ((b = 0; b < batches; b++)); do
		cat <<SQL
WITH due AS (SELECT id FROM narrow_$1 WHERE status = $pending AND event_type = 'order-created' AND next_retry_at <= now()
              ORDER BY next_retry_at, id LIMIT $BATCH FOR UPDATE SKIP LOCKED)
UPDATE narrow_$1 e SET status = $inproc, claim_token = gen_random_uuid(), claimed_at = now(), claimed_by = 'host-1', updated_at = now()
  FROM due WHERE e.id = due.id
RETURNING e.id, e.topic, e.partition_key, e.message_uuid, e.payload, e.metadata, e.retry_count, e.next_retry_at, e.first_failed_at \g /dev/null
UPDATE narrow_$1 SET status = $processed, updated_at = now() WHERE status = $inproc;
SQL
	done
}

lsn() { "${PSQL[@]}" -c "SELECT pg_current_wal_lsn()"; }
walsince() { "${PSQL[@]}" -c "SELECT round(pg_wal_lsn_diff(pg_current_wal_lsn(), '$1') / $N)"; }

echo "shape round insert_wal_B/event drain_wal_B/event drain_rows/s table_MB(after insert)"
for ((r = 1; r <= ROUNDS; r++)); do
	for s in A B C; do
		ddl "$s" | "${PSQL[@]}"
		"${PSQL[@]}" -c CHECKPOINT
		before=$(lsn)
		insert "$s" | "${PSQL[@]}"
		ins=$(walsince "$before")
		size=$("${PSQL[@]}" -c "SELECT round(pg_total_relation_size('narrow_$s') / 1048576.0, 1)")
		"${PSQL[@]}" -c "VACUUM ANALYZE narrow_$s" -c CHECKPOINT
		before=$(lsn)
		t0=$(date +%s.%N)
		drain "$s" | "${PSQL[@]}"
		t1=$(date +%s.%N)
		wal=$(walsince "$before")
		left=$("${PSQL[@]}" -c "SELECT count(*) FROM narrow_$s WHERE status <> $([ "$s" = C ] && echo 2 || echo "'PROCESSED'")")
		[ "$left" = 0 ] || { echo "narrow-rows: $left rows of narrow_$s not drained" >&2; exit 1; }
		echo "$s $r $ins $wal $(echo "$N / ($t1 - $t0)" | bc) $size"
	done
done
for s in A B C; do "${PSQL[@]}" -c "DROP TABLE IF EXISTS narrow_$s"; done
