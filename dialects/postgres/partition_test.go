package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/dialecttest"
	"github.com/oncebox/watermill-oncebox/dialects/postgres"
	"github.com/oncebox/watermill-oncebox/internal/dbtest"
	"github.com/oncebox/watermill-oncebox/migrate"
	"github.com/oncebox/watermill-oncebox/poller"
)

var partCfg = oncebox.PartitionsConfig{Interval: time.Hour, Ahead: 3}

// partitionedEnv returns a fresh schema whose outbox is partitioned by
// partCfg, and its dialect.
func partitionedEnv(t *testing.T) (*dialecttest.Env, *postgres.Dialect) {
	t.Helper()
	e := dbtest.TargetNamed(t, "postgres").Suite().NewEmpty(t)
	d := e.Dialect.(*postgres.Dialect).WithPartitions(partCfg)
	e.Dialect = d
	require.NoError(t, migrate.Migrate(context.Background(), e.Beginner, d))
	return e, d
}

// partitions lists the partitions of the outbox table, default included.
func partitions(t *testing.T, e *dialecttest.Env) []string {
	t.Helper()
	rows, err := e.DB.Query(`SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = $1::regclass ORDER BY 1`, e.Tables.Events)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		out = append(out, n)
	}
	return out
}

// insertAt inserts a row with a UUIDv7-shaped id of the time at and the
// given status, and returns its id.
func insertAt(t *testing.T, e *dialecttest.Env, at time.Time, n int, status string) string {
	t.Helper()
	id := fmt.Sprintf("%012x7000800000000000%04x", at.UnixMilli(), n)
	_, err := e.DB.Exec(`INSERT INTO `+e.Tables.Events+` (id, event_type, topic, message_uuid, payload, status, next_retry_at, created_at, updated_at)
		VALUES ($1::uuid, 't', 't', $4, '\x00', $2, $3, $3, $3)`, id, status, at, id)
	require.NoError(t, err)
	return id
}

func TestPartitionsCreatedAhead(t *testing.T) {
	t.Parallel()
	e, d := partitionedEnv(t)
	require.Len(t, partitions(t, e), partCfg.Ahead+2, "the migration creates the current interval, Ahead after it, and the default")

	now := time.Now().UTC().Add(5 * time.Hour)
	st, err := d.MaintainPartitions(context.Background(), e.Beginner, partCfg, now, now.Add(-100*time.Hour))
	require.NoError(t, err)
	require.Equal(t, 4, st.Created, "5 hours later: hours 5 to 8 created (hour 4 was skipped: its rows go to the default)")
	require.Len(t, partitions(t, e), partCfg.Ahead+2+4)

	st, err = d.MaintainPartitions(context.Background(), e.Beginner, partCfg, now, now.Add(-100*time.Hour))
	require.NoError(t, err)
	require.Equal(t, dialects.PartitionStats{}, st, "a second run changes nothing")

	// Inserts never fail across a boundary: one row per hour over the
	// created range, one before it, one far after it, one non-v7 id: the
	// rows outside the ranges go to the default partition.
	base := time.Now().UTC()
	for h := -2; h <= 12; h++ {
		insertAt(t, e, base.Add(time.Duration(h)*time.Hour), 1, "PENDING")
	}
	_, err = e.DB.Exec(`INSERT INTO ` + e.Tables.Events + ` (id, event_type, topic, message_uuid, payload, next_retry_at, created_at, updated_at)
		VALUES ('ffffffff-ffff-4fff-bfff-ffffffffffff', 't', 't', 'x', '\x00', now(), now(), now())`)
	require.NoError(t, err)
}

// TestPartitionsCarryTheStorageParameters: PostgreSQL refuses autovacuum
// settings on the partitioned table and a new partition does not inherit
// them; the maintenance creates each partition with those of the newest one.
func TestPartitionsCarryTheStorageParameters(t *testing.T) {
	t.Parallel()
	e, d := partitionedEnv(t)
	_, err := e.DB.Exec(`ALTER TABLE ` + e.Tables.Events + ` SET (autovacuum_vacuum_threshold = 1000)`)
	require.ErrorContains(t, err, "autovacuum_vacuum_threshold", "PostgreSQL refuses it on the partitioned table: why the partitions must carry them")
	parts := partitions(t, e) // by name: the default, then the ranges in time order
	newest := parts[len(parts)-1]
	require.Contains(t, newest, "_p")
	schema, _, _ := strings.Cut(e.Tables.Events, ".")
	_, err = e.DB.Exec(`ALTER TABLE ` + schema + `.` + newest +
		` SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 1000, toast.autovacuum_enabled = false)`)
	require.NoError(t, err)

	now := time.Now().UTC().Add(5 * time.Hour)
	st, err := d.MaintainPartitions(context.Background(), e.Beginner, partCfg, now, now.Add(-100*time.Hour))
	require.NoError(t, err)
	require.Equal(t, 4, st.Created)
	rows, err := e.DB.Query(`SELECT c.relname, coalesce(array_to_string(c.reloptions, ','), ''),
		       coalesce((SELECT array_to_string(t.reloptions, ',') FROM pg_class t WHERE t.oid = c.reltoastrelid), '')
		  FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		 WHERE i.inhparent = $1::regclass AND c.relname > $2 AND c.relname NOT LIKE '%default' ORDER BY 1`, e.Tables.Events, newest)
	require.NoError(t, err)
	defer rows.Close()
	n := 0
	for rows.Next() {
		var name, opts, toast string
		require.NoError(t, rows.Scan(&name, &opts, &toast))
		require.Equal(t, "autovacuum_vacuum_scale_factor=0.02,autovacuum_vacuum_threshold=1000", opts, name)
		require.Equal(t, "autovacuum_enabled=false", toast, name)
		n++
	}
	require.NoError(t, rows.Err())
	require.Equal(t, 4, n)
}

func TestPartitionsRetention(t *testing.T) {
	t.Parallel()
	e, d := partitionedEnv(t)
	ctx := context.Background()
	base := time.Now().UTC()
	// One partition per status: hours 0..3 are the migrated partitions.
	processed := insertAt(t, e, base, 1, "PROCESSED")
	_ = processed
	pending := insertAt(t, e, base.Add(time.Hour), 1, "PENDING")
	inProcess := insertAt(t, e, base.Add(2*time.Hour), 1, "IN_PROCESS")
	failed := insertAt(t, e, base.Add(3*time.Hour), 1, "FAILED")
	insertAt(t, e, base.Add(3*time.Hour), 2, "PROCESSED")

	later := base.Add(30 * time.Hour)
	cutoff := later.Add(-24 * time.Hour) // every migrated partition is past it
	before := len(partitions(t, e))
	st, err := d.MaintainPartitions(ctx, e.Beginner, partCfg, later, cutoff)
	require.NoError(t, err)
	require.Equal(t, 1, st.Removed, "only the partition of PROCESSED rows is dropped")
	require.Equal(t, 3, st.Kept, "PENDING, IN_PROCESS and FAILED partitions kept")
	require.Len(t, partitions(t, e), before+st.Created-1)

	var n int
	require.NoError(t, e.DB.QueryRow(`SELECT count(*) FROM `+e.Tables.Events).Scan(&n))
	require.Equal(t, 4, n)

	// The rows still processing finish: their partitions go at the next run.
	_, err = e.DB.Exec(`UPDATE `+e.Tables.Events+` SET status = 'PROCESSED' WHERE id IN ($1, $2)`, pending, inProcess)
	require.NoError(t, err)
	st, err = d.MaintainPartitions(ctx, e.Beginner, partCfg, later, cutoff)
	require.NoError(t, err)
	require.Equal(t, 2, st.Removed)
	require.Equal(t, 1, st.Kept, "the FAILED row's partition stays")
	require.NoError(t, e.DB.QueryRow(`SELECT count(*) FROM `+e.Tables.Events+` WHERE id = $1`, failed).Scan(&n))
	require.Equal(t, 1, n)
}

func TestPartitionsDetach(t *testing.T) {
	t.Parallel()
	e, d := partitionedEnv(t)
	base := time.Now().UTC()
	insertAt(t, e, base, 1, "PROCESSED")
	cfg := partCfg
	cfg.Retention = oncebox.PartitionRetentionDetach
	later := base.Add(30 * time.Hour)
	st, err := d.MaintainPartitions(context.Background(), e.Beginner, cfg, later, later.Add(-24*time.Hour))
	require.NoError(t, err)
	require.Equal(t, 4, st.Removed, "the four migrated partitions, all done (three empty)")
	var n int
	require.NoError(t, e.DB.QueryRow(`SELECT count(*) FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
		WHERE c.relname LIKE '%_p%' AND c.relkind = 'r' AND NOT c.relispartition AND s.nspname = split_part($1, '.', 1)`, e.Tables.Events).Scan(&n))
	require.Equal(t, 4, n, "detached tables remain")
}

func TestPartitionsRetentionRace(t *testing.T) {
	t.Parallel()
	e, d := partitionedEnv(t)
	base := time.Now().UTC()
	insertAt(t, e, base, 1, "PROCESSED")
	later := base.Add(30 * time.Hour)
	var wg sync.WaitGroup
	stats := make([]dialects.PartitionStats, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			stats[i], errs[i] = d.MaintainPartitions(context.Background(), e.Beginner, partCfg, later, later.Add(-24*time.Hour))
		})
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.Equal(t, 4, stats[0].Removed+stats[1].Removed, "each partition dropped once")
}

// TestPartitionsMigrationCoversNow: the migration's first partition holds
// the interval of now. It once rounded (numeric division cast to bigint)
// instead of flooring, so in the second half of an interval it started one
// interval late and the rows of now went to the default partition. The
// interval is chosen so that now lies 55–90% into it, where rounding and
// flooring differ, at whatever time the test runs.
func TestPartitionsMigrationCoversNow(t *testing.T) {
	t.Parallel()
	var iv time.Duration
	for m := 2; m < 10000; m++ {
		d := time.Duration(m) * time.Minute
		frac := float64(time.Now().UnixMilli()%d.Milliseconds()) / float64(d.Milliseconds())
		if frac >= 0.55 && frac <= 0.9 && d-time.Duration(frac*float64(d)) > 30*time.Second {
			iv = d
			break
		}
	}
	require.NotZero(t, iv)
	e := dbtest.TargetNamed(t, "postgres").Suite().NewEmpty(t)
	d := e.Dialect.(*postgres.Dialect).WithPartitions(oncebox.PartitionsConfig{Interval: iv, Ahead: 1})
	e.Dialect = d
	require.NoError(t, migrate.Migrate(context.Background(), e.Beginner, d))
	id := insertAt(t, e, time.Now().UTC(), 1, "PENDING")
	var part string
	require.NoError(t, e.DB.QueryRow(`SELECT tableoid::regclass::text FROM `+e.Tables.Events+` WHERE id = $1`, id).Scan(&part))
	require.NotContains(t, part, "_default", "interval %s: a row of now went to the default partition", iv)
}

// Two maintenance runs at once (outside the lease: by hand, or two relays
// whose clocks disagree about the lease) create each partition once and
// fail neither: a concurrent CREATE of the same partition is passed over.
func TestPartitionsMaintenanceRace(t *testing.T) {
	t.Parallel()
	e, d := partitionedEnv(t)
	before := len(partitions(t, e))
	now := time.Now().UTC().Add(10 * time.Hour)
	var wg sync.WaitGroup
	stats := make([]dialects.PartitionStats, 4)
	errs := make([]error, 4)
	for i := range stats {
		wg.Go(func() {
			stats[i], errs[i] = d.MaintainPartitions(context.Background(), e.Beginner, partCfg, now, now.Add(-100*time.Hour))
		})
	}
	wg.Wait()
	created := 0
	for i := range stats {
		require.NoError(t, errs[i], "run %d", i)
		created += stats[i].Created
	}
	require.Equal(t, partCfg.Ahead+1, created, "hours 10 to 13 created once in all")
	require.Len(t, partitions(t, e), before+partCfg.Ahead+1)
}

// Two relays with outbox.partitions on: the maintenance runs under the
// clean-up lease on one of them at a time; every run succeeds, the
// partitions of the interval ahead are created once in all, and the hook
// (poller.PartitionHooks, the metrics) hears of each run.
func TestPartitionsMaintainedByOneOfTwoRelays(t *testing.T) {
	t.Parallel()
	e, d := partitionedEnv(t)
	// A minute past an hour: the loop below moves the clock a second every
	// 20 ms for up to 30 s (25 minutes), never into the next hour, whose
	// partition would be a fifth creation (a run started near the end of an
	// hour failed with 5).
	clock := clockwork.NewFakeClockAt(time.Now().UTC().Add(48 * time.Hour).Truncate(time.Hour).Add(time.Minute))
	hooks := []*partitionHooks{{}, {}}
	for i, h := range hooks {
		cfg := poller.Config{Dialect: d, Clock: clock, InstanceID: fmt.Sprintf("relay-%d", i), Hooks: h,
			CleanUp: poller.Schedule{Min: time.Second, Max: time.Second, Multiplier: 1}}
		cfg.Oncebox.Outbox.Partitions = partCfg
		cfg.Oncebox.Outbox.Events = map[string]oncebox.EventSettings{"t": {}}
		cfg.Oncebox.Outbox.StrictEventTypes = true
		p, err := poller.New(e.Beginner, gochannel.NewGoChannel(gochannel.Config{}, watermill.NopLogger{}), cfg, nil)
		require.NoError(t, err)
		errc := make(chan error, 1)
		go func() { errc <- p.Run(context.Background()) }()
		<-p.Running()
		t.Cleanup(func() { require.NoError(t, p.Close()); require.NoError(t, <-errc) })
	}
	// The clean-up job's first run comes after its schedule's minimum on
	// the fake clock: the clock moves a second at each check.
	require.Eventually(t, func() bool {
		clock.Advance(time.Second)
		return hooks[0].count()+hooks[1].count() >= 2
	}, 30*time.Second, 20*time.Millisecond)
	created := 0
	for _, h := range hooks {
		h.mu.Lock()
		for _, r := range h.runs {
			require.NoError(t, r.err)
			created += r.st.Created
		}
		h.mu.Unlock()
	}
	require.Equal(t, partCfg.Ahead+1, created, "48 hours on: the interval of now and 3 ahead, created once")
}

type partitionHooks struct {
	poller.NopHooks
	mu   sync.Mutex
	runs []struct {
		st  dialects.PartitionStats
		err error
	}
}

func (h *partitionHooks) PartitionsMaintained(st dialects.PartitionStats, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.runs = append(h.runs, struct {
		st  dialects.PartitionStats
		err error
	}{st, err})
}

func (h *partitionHooks) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.runs)
}
