package mysql_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mysqldialect "github.com/oncebox/watermill-oncebox/dialects/mysql"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/internal/dbtest"
	"github.com/oncebox/watermill-oncebox/migrate"
	"github.com/oncebox/watermill-oncebox/poller"
)

// mysqlTarget is the MySQL/MariaDB target of internal/dbtest.
func mysqlTarget(t *testing.T) dbtest.Target {
	t.Helper()
	for _, tg := range dbtest.Targets() {
		if tg.Name == "mysql" {
			return tg
		}
	}
	t.Fatal("no mysql target in dbtest.Targets")
	return dbtest.Target{}
}

var liveT0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func newID(t testing.TB) oncebox.EventID {
	t.Helper()
	id, err := oncebox.NewEventID()
	require.NoError(t, err)
	return id
}

// insertEvents commits n events of eventType created at at, each with its id
// in the metadata as the publisher writes it, and returns their ids.
func insertEvents(t testing.TB, e *dbtest.Env, eventType string, n int, at time.Time) []oncebox.EventID {
	t.Helper()
	var ids []oncebox.EventID
	for n > 0 {
		k := min(n, 1000)
		n -= k
		rows := make([]dialects.EventRow, k)
		for i := range rows {
			id := newID(t)
			ids = append(ids, id)
			meta, _ := json.Marshal(map[string]string{oncebox.HeaderEventID: id.String(), "k": "v"})
			rows[i] = dialects.EventRow{ID: id, EventType: eventType, Topic: "topic-" + eventType, Key: "key",
				MessageUUID: watermill.NewUUID(), Payload: []byte(`{"n":1}`), Metadata: string(meta), CreatedAt: at}
		}
		require.NoError(t, e.Dialect.InsertEvents(context.Background(), e.Beginner, rows))
	}
	return ids
}

func mysqlErrNumber(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

func TestMySQLMigrateTwiceAndConcurrently(t *testing.T) {
	t.Parallel()
	tg := mysqlTarget(t)
	ctx := context.Background()

	e := tg.New(t)
	require.NoError(t, migrate.Migrate(ctx, e.Beginner, e.Dialect), "second run")
	require.NoError(t, migrate.Migrate(ctx, e.Beginner, e.Dialect), "third run")
	require.Equal(t, 4, e.Count(t, e.Tables.Migrations, ""), "migrations 1 to 4")

	// Four instances starting at once on empty tables.
	c := tg.NewEmpty(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = migrate.Migrate(ctx, c.Beginner, c.Dialect)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "instance %d", i)
	}
	require.Equal(t, 4, c.Count(t, c.Tables.Migrations, ""))
	for _, table := range []string{c.Tables.Events, c.Tables.DLQ, c.Tables.Inbox, c.Tables.Jobs, c.Tables.Instances} {
		require.Equal(t, 0, c.Count(t, table, ""))
	}

	// A migration that crashed after its DDL (which commits implicitly) but
	// before recording its version is completed by the next run.
	_, err := c.DB.ExecContext(ctx, "DELETE FROM "+c.Tables.Migrations)
	require.NoError(t, err)
	require.NoError(t, migrate.Migrate(ctx, c.Beginner, c.Dialect))
	require.Equal(t, 4, c.Count(t, c.Tables.Migrations, ""), "migration 3's ALTER is skipped, not a duplicate column")

	// The session lock was released: another connection takes it at once.
	var free int
	require.NoError(t, c.DB.QueryRowContext(ctx, "SELECT IS_FREE_LOCK(?)", c.Dialect.(*mysqldialect.Dialect).MigrationLockSQL()[0].Args[0]).Scan(&free))
	require.Equal(t, 1, free)
}

func TestMySQLMigrationLockTimeoutIsAnError(t *testing.T) {
	t.Parallel()
	tg := mysqlTarget(t)
	ctx := context.Background()
	e := tg.NewEmpty(t)
	lock := e.Dialect.(*mysqldialect.Dialect).MigrationLockSQL()
	require.Len(t, lock, 2)
	// Another session holds the lock; this one gives up at once.
	holder, err := e.DB.Conn(ctx)
	require.NoError(t, err)
	defer holder.Close()
	var got int
	require.NoError(t, holder.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", lock[0].Args[0]).Scan(&got))
	require.Equal(t, 1, got)
	c, err := e.DB.Conn(ctx)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.ExecContext(ctx, lock[0].SQL, lock[0].Args[0], 0)
	require.NoError(t, err, "GET_LOCK returns 0 on timeout, no error")
	_, err = c.ExecContext(ctx, lock[1].SQL)
	require.Error(t, err, "the check turns the timeout into an error")
	t.Logf("lock not taken: %v", err)
}

func TestMySQLTransferReArmsAndMergesRowsOfOneEvent(t *testing.T) {
	t.Parallel()
	e := mysqlTarget(t).New(t)
	d := e.Dialect
	ctx := context.Background()
	// The event is in the outbox, PROCESSED (consumer and producer share the
	// tables), and two handlers parked it; a third row has no event id.
	ids := insertEvents(t, e, "a", 1, liveT0)
	eid := ids[0]
	tok := newID(t)
	_, err := d.Claim(ctx, e.Beginner, dialects.ClaimParams{EventType: "a", Limit: 1, Token: tok, Now: liveT0})
	require.NoError(t, err)
	_, err = d.MarkProcessed(ctx, e.Beginner, tok, ids, liveT0)
	require.NoError(t, err)
	r1, r2, r3 := newID(t), newID(t), newID(t)
	for i, r := range []dialects.DLQRow{
		{ID: r1, EventID: &eid, HandlerName: "h1", EventType: "a", Topic: "consumed", MessageUUID: "m", Payload: []byte("old"), Metadata: `{"x":"1"}`, Error: "e", FailedAt: liveT0},
		{ID: r2, EventID: &eid, HandlerName: "h2", EventType: "a", Topic: "consumed", MessageUUID: "m", Payload: []byte("new"), Metadata: `{"x":"2"}`, Error: "e", FailedAt: liveT0.Add(time.Second)},
		{ID: r3, HandlerName: "h1", EventType: "b", Topic: "consumed-b", MessageUUID: "m3", Metadata: `{}`, Error: "e", FailedAt: liveT0},
	} {
		// The affected counts, which PoisonUpsert does not read.
		upsert := d.(*mysqldialect.Dialect).DLQUpsertConsumerSQL
		require.EqualValues(t, 1, e.Exec(t, upsert(r)), "row %d new", i)
		require.EqualValues(t, 2, e.Exec(t, upsert(r)), "row %d again: one more attempt", i)
	}
	require.Equal(t, 3, e.Count(t, e.Tables.DLQ, "retry_count = 2"))
	// A message without event id and the same UUID under another handler is
	// another row; byte-exact keys keep 'm3 ' apart from 'm3'.
	other := dialects.DLQRow{ID: newID(t), HandlerName: "h1", EventType: "b", Topic: "consumed-b", MessageUUID: "m3 ", Metadata: `{}`, FailedAt: liveT0}
	require.EqualValues(t, 1, e.Exec(t, d.(*mysqldialect.Dialect).DLQUpsertConsumerSQL(other)))
	deleted, err := d.DLQDelete(ctx, e.Beginner, other.ID)
	require.NoError(t, err)
	require.True(t, deleted)

	n, err := d.DLQSetStatusWhere(ctx, e.Beginner, dialects.DLQFilter{Source: oncebox.DLQSourceConsumer}, oncebox.DLQStatusToRetry,
		[]oncebox.DLQStatus{oncebox.DLQStatusMoved}, liveT0.Add(time.Minute))
	require.NoError(t, err)
	require.EqualValues(t, 3, n)
	moved, err := d.TransferDLQToOutbox(ctx, e.Beginner, liveT0.Add(time.Hour), 10)
	require.NoError(t, err)
	require.Equal(t, 3, moved)
	require.Equal(t, 0, e.Count(t, e.Tables.DLQ, ""))
	require.Equal(t, 2, e.Count(t, e.Tables.Events, ""))
	var status, topic string
	var payload, meta []byte
	var token *oncebox.EventID
	require.NoError(t, e.DB.QueryRow("SELECT status, topic, payload, metadata, claim_token FROM "+e.Tables.Events+" WHERE id = ?",
		e.ID(eid)).Scan(&status, &topic, &payload, &meta, &token))
	require.Equal(t, "PENDING", status, "re-armed")
	require.Nil(t, token)
	require.Equal(t, "new", string(payload), "the latest moved row wins")
	require.JSONEq(t, `{"x":"2"}`, string(meta), "the event id and type are the row's columns, not its metadata")
	require.NoError(t, e.DB.QueryRow("SELECT topic, metadata FROM "+e.Tables.Events+" WHERE id = ?", e.ID(r3)).Scan(&topic, &meta))
	require.Equal(t, "consumed-b", topic, "no event id: the DLQ row's own id")
	require.JSONEq(t, `{}`, string(meta))
}

func TestMySQLInbox(t *testing.T) {
	t.Parallel()
	e := mysqlTarget(t).New(t)
	d := e.Dialect
	ctx := context.Background()
	record := func(consumer, id string) bool {
		t.Helper()
		isNew, err := d.InboxRecord(ctx, e.Beginner, consumer, id, liveT0)
		require.NoError(t, err)
		return isNew
	}
	require.True(t, record("", "k"))
	require.False(t, record("", "k"))
	require.True(t, record("", "k "), "keys compare byte for byte, not PAD SPACE")
	require.True(t, record("", "K"), "and case-sensitively")
	require.True(t, record("other", "k"))
	long := strings.Repeat("é", 127) + "x" // 255 bytes
	require.True(t, record("", long))
	require.Equal(t, 1, e.Count(t, e.Tables.Inbox, "event_id = ?", long), "stored whole")

	tx, err := e.DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	fresh, err := d.InboxRecordMany(ctx, wsql.TxFromStdSQL(tx), "", []string{"k", "n1", "k ", "n2"}, liveT0)
	require.NoError(t, err)
	require.Equal(t, []string{"n1", "n2"}, fresh)
	_, err = d.InboxRecordMany(ctx, wsql.TxFromStdSQL(tx), "", []string{strings.Repeat("x", 256)}, liveT0)
	require.ErrorIs(t, err, oncebox.ErrInvalidInput, "nothing is truncated silently")
	require.NoError(t, tx.Commit())

	// Large batches run in chunks.
	var ids []string
	for i := range 12_000 {
		ids = append(ids, fmt.Sprint("bulk-", i))
	}
	tx, err = e.DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	fresh, err = d.InboxRecordMany(ctx, wsql.TxFromStdSQL(tx), "", ids, liveT0)
	require.NoError(t, err)
	require.Len(t, fresh, 12_000)
	require.NoError(t, tx.Commit())

	n, err := d.InboxDeleteBefore(ctx, e.Beginner, liveT0.Add(time.Second), 5000)
	require.NoError(t, err)
	require.EqualValues(t, 5000, n)
}

// interposer runs before, once, ahead of the first statement of tx whose
// text starts with prefix.
type interposer struct {
	wsql.Tx
	prefix string
	before func()
	once   sync.Once
}

func (i *interposer) ExecContext(ctx context.Context, query string, args ...any) (wsql.Result, error) {
	if strings.HasPrefix(query, i.prefix) && strings.Count(query, "(?,?,?)") > 1 {
		i.once.Do(i.before)
	}
	return i.Tx.ExecContext(ctx, query, args...)
}

var _ wsql.ContextExecutor = (*interposer)(nil)

func TestMySQLInboxRecordManyConcurrentInsertFallsBackRowByRow(t *testing.T) {
	t.Parallel()
	e := mysqlTarget(t).New(t)
	d := e.Dialect
	ctx := context.Background()
	var a, b []string
	for i := range 100 {
		a = append(a, fmt.Sprint("id-", i))
		b = append(b, fmt.Sprint("id-", i+50))
	}
	txB, err := e.DB.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	require.NoError(t, err)
	var newA []string
	// B has read which ids exist (none); A inserts and commits before B's
	// insert: B's INSERT IGNORE affects fewer rows than it tried.
	ib := &interposer{Tx: wsql.TxFromStdSQL(txB), prefix: "INSERT IGNORE", before: func() {
		txA, err := e.DB.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		require.NoError(t, err)
		newA, err = d.InboxRecordMany(ctx, wsql.TxFromStdSQL(txA), "", a, liveT0)
		require.NoError(t, err)
		require.NoError(t, txA.Commit())
	}}
	newB, err := d.InboxRecordMany(ctx, ib, "", b, liveT0)
	require.NoError(t, err)
	require.NoError(t, txB.Commit())
	require.ElementsMatch(t, a, newA)
	require.ElementsMatch(t, b[50:], newB, "only the ids B really inserted")
	require.Equal(t, 150, e.Count(t, e.Tables.Inbox, ""))
}

// TestMySQLInboxRecordManyRace races transactions over overlapping ids and
// checks that every id is new for exactly one committed transaction, at
// READ COMMITTED and at REPEATABLE READ (the caller's transaction may run
// at either). Deadlocked transactions roll back and retry, as a message
// handler's would be redelivered.
func TestMySQLInboxRecordManyRace(t *testing.T) {
	t.Parallel()
	for _, level := range []sql.IsolationLevel{sql.LevelReadCommitted, sql.LevelRepeatableRead} {
		t.Run(level.String(), func(t *testing.T) {
			t.Parallel()
			e := mysqlTarget(t).New(t)
			d := e.Dialect
			ctx := context.Background()
			const workers, rounds, span = 6, 30, 40
			var mu sync.Mutex
			newFor := map[string]int{}
			var deadlocks, waits atomic.Int64
			var wg sync.WaitGroup
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rnd := rand.New(rand.NewSource(int64(w)))
					for r := range rounds {
						start := rnd.Intn(100)
						ids := make([]string, 0, span)
						for i := range span {
							ids = append(ids, fmt.Sprintf("r%d-%03d", r%5, start+i))
						}
						rnd.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
						for {
							tx, err := e.DB.BeginTx(ctx, &sql.TxOptions{Isolation: level})
							if !assertNoErr(t, err) {
								return
							}
							fresh, err := d.InboxRecordMany(ctx, wsql.TxFromStdSQL(tx), "", ids, liveT0)
							if err == nil {
								err = tx.Commit()
							} else {
								_ = tx.Rollback()
							}
							switch mysqlErrNumber(err) {
							case 1213:
								deadlocks.Add(1)
								continue
							case 1205:
								waits.Add(1)
								continue
							}
							if !assertNoErr(t, err) {
								return
							}
							mu.Lock()
							for _, id := range fresh {
								newFor[id]++
							}
							mu.Unlock()
							break
						}
					}
				}()
			}
			wg.Wait()
			total := e.Count(t, e.Tables.Inbox, "")
			require.Len(t, newFor, total, "every stored id was new for a committed transaction")
			for id, n := range newFor {
				require.Equal(t, 1, n, "id %s new for exactly one transaction", id)
			}
			t.Logf("InboxRecordMany at %s: %d ids, %d deadlocks (retried), %d lock wait timeouts", level, total, deadlocks.Load(), waits.Load())
		})
	}
}

func assertNoErr(t *testing.T, err error) bool {
	t.Helper()
	return assertNoErrMsg(t, err, "")
}

func assertNoErrMsg(t *testing.T, err error, msg string) bool {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v", msg, err)
		return false
	}
	return true
}

// capturingLogger records the errors the poller logs.
type capturingLogger struct {
	mu   *sync.Mutex
	errs *[]string
}

func newCapturingLogger() capturingLogger {
	return capturingLogger{mu: &sync.Mutex{}, errs: &[]string{}}
}

func (l capturingLogger) Error(msg string, err error, _ watermill.LogFields) {
	l.mu.Lock()
	defer l.mu.Unlock()
	*l.errs = append(*l.errs, fmt.Sprintf("%s: %v", msg, err))
}
func (l capturingLogger) Info(string, watermill.LogFields)                 {}
func (l capturingLogger) Debug(string, watermill.LogFields)                {}
func (l capturingLogger) Trace(string, watermill.LogFields)                {}
func (l capturingLogger) With(watermill.LogFields) watermill.LoggerAdapter { return l }
func (l capturingLogger) errors() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), *l.errs...)
}

// recordingPublisher counts deliveries per event id.
type recordingPublisher struct {
	mu  sync.Mutex
	got map[string]int
}

func (r *recordingPublisher) Publish(_ string, msgs ...*message.Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range msgs {
		r.got[m.Metadata.Get(oncebox.HeaderEventID)]++
	}
	return nil
}

func (r *recordingPublisher) Close() error { return nil }

func (r *recordingPublisher) delivered() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

// pollErrors records the database errors the poller reports.
type pollErrors struct {
	poller.NopHooks
	mu   sync.Mutex
	errs []string
}

func (h *pollErrors) PollDone(i poller.PollInfo) {
	if i.Err != nil {
		h.mu.Lock()
		h.errs = append(h.errs, i.Err.Error())
		h.mu.Unlock()
	}
}

func (h *pollErrors) JobDone(j poller.JobInfo) {
	if j.Err != nil {
		h.mu.Lock()
		h.errs = append(h.errs, j.Job+": "+j.Err.Error())
		h.mu.Unlock()
	}
}

func TestMySQLFourPollersDeliverEveryEventOnce(t *testing.T) {
	t.Parallel()
	e := mysqlTarget(t).New(t)
	const total = 5_000
	ids := insertEvents(t, e, "order-created", total, time.Now().UTC().Add(-time.Second))
	rec := &recordingPublisher{got: map[string]int{}}
	logger := newCapturingLogger()
	hooks := &pollErrors{}
	var ps []*poller.Poller
	errc := make(chan error, 4)
	for i := range 4 {
		cfg := poller.Config{Dialect: e.Dialect, EventTypes: []string{"order-created"}, InstanceID: fmt.Sprint("instance-", i), Hooks: hooks}
		cfg.Oncebox.Outbox.Defaults.Polling = oncebox.PollingSettings{MinFixedDelay: time.Millisecond,
			MaxFixedDelay: 20 * time.Millisecond, Multiplier: 2}
		cfg.Oncebox.Outbox.Defaults.BatchSize = 50
		p, err := poller.New(e.Beginner, rec, cfg, logger)
		require.NoError(t, err)
		go func() { errc <- p.Run(context.Background()) }()
		<-p.Running()
		ps = append(ps, p)
	}
	start := time.Now()
	require.Eventually(t, func() bool { return rec.delivered() == total }, 90*time.Second, 10*time.Millisecond, "every event delivered")
	require.Eventually(t, func() bool { return e.Count(t, e.Tables.Events, "status = 'PROCESSED'") == total },
		30*time.Second, 10*time.Millisecond, "every row PROCESSED")
	elapsed := time.Since(start)
	for _, p := range ps {
		require.NoError(t, p.Close())
	}
	for range ps {
		require.NoError(t, <-errc)
	}
	rec.mu.Lock()
	for _, id := range ids {
		require.Equal(t, 1, rec.got[id.String()], "event %s delivered once", id)
	}
	rec.mu.Unlock()
	all := append(logger.errors(), hooks.errs...)
	for _, msg := range all {
		require.NotContains(t, msg, "Deadlock")
		require.NotContains(t, msg, "1213")
		require.NotContains(t, msg, "Lock wait timeout")
	}
	require.Empty(t, all, "no error logged or reported")
	t.Logf("4 pollers, batch 50: %d events delivered once each in %s, no error", total, elapsed.Round(time.Millisecond))
}

// claimStats is what the isolation experiment saw.
type claimStats struct {
	claimed, duplicates, deadlocks, lockWaits, otherErrs int64
	elapsed                                              time.Duration
}

// runClaimers runs the relay's claim by hand from 4 goroutines, each
// transaction begun at level: SELECT … FOR UPDATE SKIP LOCKED, UPDATE … WHERE
// id IN (…), commit, then mark PROCESSED in a second transaction at the same
// level, until every row is processed.
func runClaimers(t *testing.T, e *dbtest.Env, level sql.IsolationLevel, total int) claimStats {
	d := e.Dialect.(*mysqldialect.Dialect)
	ctx := context.Background()
	var st claimStats
	var mu sync.Mutex
	seen := map[oncebox.EventID]int{}
	var processed atomic.Int64
	var wg sync.WaitGroup
	begin := time.Now()
	deadline := begin.Add(60 * time.Second)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := e.DB.Conn(ctx)
			if !assertNoErr(t, err) {
				return
			}
			defer conn.Close()
			// Fail fast on waits rather than after the default 50 s.
			_, err = conn.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = 2")
			if !assertNoErr(t, err) {
				return
			}
			for processed.Load() < int64(total) && time.Now().Before(deadline) {
				p := dialects.ClaimParams{EventType: "x", Limit: 25, Token: newID(t), Now: time.Now().UTC()}
				var got []oncebox.EventID
				err := func() error {
					tx, err := conn.BeginTx(ctx, &sql.TxOptions{Isolation: level})
					if err != nil {
						return err
					}
					defer tx.Rollback() //nolint:errcheck
					q := d.EventsClaimSelect(p)
					rows, err := tx.QueryContext(ctx, q.SQL, q.Args...)
					if err != nil {
						return err
					}
					for rows.Next() {
						var ev dialects.ClaimedEvent
						if err := rows.Scan(ev.ScanTargets()...); err != nil {
							rows.Close()
							return err
						}
						got = append(got, ev.ID)
					}
					rows.Close()
					if len(got) == 0 {
						return tx.Commit()
					}
					u := d.EventsClaimUpdate(p, got)
					if _, err := tx.ExecContext(ctx, u.SQL, u.Args...); err != nil {
						return err
					}
					if err := tx.Commit(); err != nil {
						return err
					}
					// The claim is committed: a deadlocked mark is run again,
					// as the relay's does (dialects/run.go), or its rows would
					// stay IN_PROCESS (this harness runs no recovery).
					for {
						err := func() error {
							tx2, err := conn.BeginTx(ctx, &sql.TxOptions{Isolation: level})
							if err != nil {
								return err
							}
							defer tx2.Rollback() //nolint:errcheck
							m := d.EventsMarkProcessed(p.Token, got, time.Now().UTC())
							res, err := tx2.ExecContext(ctx, m.SQL, m.Args...)
							if err != nil {
								return err
							}
							n, _ := res.RowsAffected()
							if err := tx2.Commit(); err != nil {
								return err
							}
							processed.Add(n)
							return nil
						}()
						if mysqlErrNumber(err) != 1213 {
							return err
						}
						mu.Lock()
						st.deadlocks++
						mu.Unlock()
					}
				}()
				mu.Lock()
				switch mysqlErrNumber(err) {
				case 0:
					if err != nil {
						st.otherErrs++
						t.Logf("error: %v", err)
					}
					for _, id := range got {
						seen[id]++
						st.claimed++
						if seen[id] > 1 {
							st.duplicates++
						}
					}
				case 1213:
					st.deadlocks++
				case 1205:
					st.lockWaits++
				default:
					st.otherErrs++
					t.Logf("error: %v", err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	st.elapsed = time.Since(begin)
	return st
}

// TestMySQLClaimIsolation measures the claim at REPEATABLE READ (MariaDB's
// and MySQL's default) and at READ COMMITTED (what the relay forces) on the
// same workload, and asserts what MariaDB 10.11 does. docs/mysql.md quotes
// the numbers this test logs.
func TestMySQLClaimIsolation(t *testing.T) {
	t.Parallel()
	const total = 3_000
	for _, level := range []sql.IsolationLevel{sql.LevelRepeatableRead, sql.LevelReadCommitted} {
		e := mysqlTarget(t).New(t)
		insertEvents(t, e, "x", total, time.Now().UTC().Add(-time.Second))
		st := runClaimers(t, e, level, total)
		left := e.Count(t, e.Tables.Events, "status <> 'PROCESSED'")
		t.Logf("%s: 4 claimers, %d rows, batch 25: %d claimed, %d claimed twice, %d deadlocks, %d lock wait timeouts, %d other errors, %d rows left, %s",
			level, total, st.claimed, st.duplicates, st.deadlocks, st.lockWaits, st.otherErrs, left, st.elapsed.Round(time.Millisecond))
		require.Zero(t, st.duplicates, "%s: SKIP LOCKED never hands a row to two claimers", level)
		require.Zero(t, st.otherErrs, "%s", level)
		require.Zero(t, left, "%s: every row processed (deadlocked claims retried)", level)
		if level == sql.LevelReadCommitted {
			require.Zero(t, st.deadlocks, "READ COMMITTED: record locks only")
			require.Zero(t, st.lockWaits, "READ COMMITTED: record locks only")
		}
	}
}

func TestMySQLWithoutParseTimeTheErrorSaysSo(t *testing.T) {
	t.Parallel()
	tg := mysqlTarget(t)
	e := tg.New(t)
	insertEvents(t, e, "a", 1, liveT0)
	cfg, err := mysql.ParseDSN(tg.DSN)
	require.NoError(t, err)
	cfg.ParseTime = false
	db, err := sql.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	defer db.Close()
	_, err = e.Dialect.Claim(context.Background(), wsql.BeginnerFromStdSQL(db),
		dialects.ClaimParams{EventType: "a", Limit: 1, Token: newID(t), Now: liveT0})
	require.ErrorContains(t, err, "the MySQL DSN needs parseTime=true&loc=UTC")
	require.Equal(t, 1, e.Count(t, e.Tables.Events, "status = 'PENDING'"), "the failed claim rolled back")
}

// A relay started on a DSN without parseTime returns the error from Run
// (the user's trial: 0 of 25 events delivered, errors only in the log, the
// relay "running").
func TestMySQLRelayWithoutParseTimeFailsAtStart(t *testing.T) {
	t.Parallel()
	tg := mysqlTarget(t)
	e := tg.New(t)
	cfg, err := mysql.ParseDSN(tg.DSN)
	require.NoError(t, err)
	cfg.ParseTime = false
	db, err := sql.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	defer db.Close()
	p, err := poller.New(wsql.BeginnerFromStdSQL(db), &recordingPublisher{},
		poller.Config{Dialect: e.Dialect}, nil)
	require.NoError(t, err)
	err = p.Run(context.Background())
	require.ErrorContains(t, err, "parseTime=true")
	<-p.Running()
}

func TestMySQLLargestBatchFinalizes(t *testing.T) {
	t.Parallel()
	e := mysqlTarget(t).New(t)
	d := e.Dialect
	ctx := context.Background()
	insertEvents(t, e, "a", oncebox.MaxBatchSize, liveT0)
	token := newID(t)
	got, err := d.Claim(ctx, e.Beginner, dialects.ClaimParams{EventType: "a", Limit: oncebox.MaxBatchSize, Token: token, Now: liveT0})
	require.NoError(t, err)
	require.Len(t, got, oncebox.MaxBatchSize)
	failed := make([]dialects.FailedEvent, len(got))
	for i, ev := range got {
		failed[i] = dialects.FailedEvent{ID: ev.ID, Status: oncebox.StatusPending, RetryCount: 1 + i%3,
			NextRetryAt: liveT0.Add(time.Duration(i) * time.Millisecond), Error: fmt.Sprint("error ", i)}
	}
	start := time.Now()
	n, err := d.MarkFailed(ctx, e.Beginner, token, failed, liveT0)
	require.NoError(t, err)
	require.EqualValues(t, oncebox.MaxBatchSize, n)
	t.Logf("EventsMarkFailed of %d rows in one statement: %s", n, time.Since(start).Round(time.Millisecond))
	require.Equal(t, 1, e.Count(t, e.Tables.Events, "id = ? AND retry_count = 3 AND last_error = 'error 2000' AND status = 'PENDING'",
		e.ID(got[2000].ID)), "ids[2000]: 1 + 2000%3 = 3")
	var next time.Time
	require.NoError(t, e.DB.QueryRow("SELECT next_retry_at FROM "+e.Tables.Events+" WHERE id = ?", e.ID(got[9999].ID)).Scan(&next))
	require.Equal(t, liveT0.Add(9999*time.Millisecond), next)
}

func TestMySQLMigrateCreatesTheDatabase(t *testing.T) {
	t.Parallel()
	e := mysqlTarget(t).NewEmpty(t)
	ctx := context.Background()
	schema := "oncebox_test_created_" + strings.ReplaceAll(newID(t).String()[24:], "-", "")
	d, err := mysqldialect.New(oncebox.TablesConfig{Schema: schema, Prefix: "p_"})
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := e.DB.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+schema)
		require.NoError(t, err)
	})
	require.NoError(t, migrate.Migrate(ctx, e.Beginner, d))
	require.NoError(t, migrate.Migrate(ctx, e.Beginner, d))
	require.Equal(t, 4, e.Count(t, d.Tables().Migrations, ""), "migrations 1 to 4")
	require.Equal(t, 0, e.Count(t, d.Tables().Events, ""))
	require.Equal(t, schema+".p_outbox_events", d.Tables().Events)
}

// switchPublisher rejects every message, one by one (a poller
// BatchPublisher's per-message results: N rejections are N attempts), until
// ok is set, then records them. A plain publisher failing a whole call with
// one error would be an outage to the relay, which counts no attempt.
type switchPublisher struct {
	recordingPublisher
	ok atomic.Bool
}

func (p *switchPublisher) Publish(topic string, msgs ...*message.Message) error {
	if !p.ok.Load() {
		return errors.New("broker says no")
	}
	return p.recordingPublisher.Publish(topic, msgs...)
}

func (p *switchPublisher) PublishBatch(topic string, msgs ...*message.Message) ([]error, error) {
	results := make([]error, len(msgs))
	if !p.ok.Load() {
		for i := range results {
			results[i] = errors.New("broker says no")
		}
		return results, nil
	}
	return results, p.recordingPublisher.Publish(topic, msgs...)
}

// TestMySQLFourPollersFailToTheDLQAndRetryFromIt runs the relay's failure
// path on four instances at once: every send fails, each event is retried
// once and goes FAILED, the DLQ transfer moves it (MoveToDLQ on four
// instances), then the operator sets every DLQ row TO_RETRY and the DLQ
// retry brings them back (TransferDLQToOutbox on four instances), and every
// event is delivered once. No database error may be reported.
func TestMySQLFourPollersFailToTheDLQAndRetryFromIt(t *testing.T) {
	t.Parallel()
	e := mysqlTarget(t).New(t)
	const total = 2_000
	ids := insertEvents(t, e, "order-created", total, time.Now().UTC().Add(-time.Second))
	pub := &switchPublisher{recordingPublisher: recordingPublisher{got: map[string]int{}}}
	logger := newCapturingLogger()
	hooks := &pollErrors{}
	fast := poller.Schedule{Min: 5 * time.Millisecond, Max: 50 * time.Millisecond, Multiplier: 2}
	one := 1
	off := false
	var ps []*poller.Poller
	errc := make(chan error, 4)
	for i := range 4 {
		cfg := poller.Config{Dialect: e.Dialect, EventTypes: []string{"order-created"}, InstanceID: fmt.Sprint("instance-", i),
			Hooks: hooks, DLQTransfer: fast, DLQRetry: fast, Recovery: poller.Schedule{Min: time.Second, Max: time.Second, Multiplier: 1}}
		cfg.Oncebox.Outbox.Defaults.Polling = oncebox.PollingSettings{MinFixedDelay: time.Millisecond,
			MaxFixedDelay: 20 * time.Millisecond, Multiplier: 2}
		cfg.Oncebox.Outbox.Defaults.BatchSize = 50
		cfg.Oncebox.Outbox.Defaults.MaxRetries = &one
		cfg.Oncebox.Outbox.Defaults.Backoff.Enabled = &off
		cfg.Oncebox.Outbox.DLQ.Enabled = true
		cfg.JobBatchSize = 100
		p, err := poller.New(e.Beginner, pub, cfg, logger)
		require.NoError(t, err)
		go func() { errc <- p.Run(context.Background()) }()
		<-p.Running()
		ps = append(ps, p)
	}
	defer func() {
		for _, p := range ps {
			require.NoError(t, p.Close())
		}
		for range ps {
			require.NoError(t, <-errc)
		}
	}()
	require.Eventually(t, func() bool { return e.Count(t, e.Tables.DLQ, "status = 'MOVED' AND retry_count = 2") == total },
		90*time.Second, 20*time.Millisecond, "every event FAILED after 2 attempts and moved to the DLQ")
	require.Equal(t, 0, e.Count(t, e.Tables.Events, ""))

	pub.ok.Store(true)
	n, err := e.Dialect.DLQSetStatusWhere(context.Background(), e.Beginner, dialects.DLQFilter{}, oncebox.DLQStatusToRetry,
		[]oncebox.DLQStatus{oncebox.DLQStatusMoved}, time.Now().UTC())
	require.NoError(t, err)
	require.EqualValues(t, total, n)
	require.Eventually(t, func() bool { return pub.delivered() == total }, 90*time.Second, 20*time.Millisecond, "every event delivered")
	require.Eventually(t, func() bool { return e.Count(t, e.Tables.Events, "status = 'PROCESSED'") == total },
		30*time.Second, 20*time.Millisecond)
	require.Equal(t, 0, e.Count(t, e.Tables.DLQ, ""))
	pub.mu.Lock()
	for _, id := range ids {
		require.Equal(t, 1, pub.got[id.String()], "event %s delivered once", id)
	}
	pub.mu.Unlock()
	var dbErrs []string
	for _, msg := range logger.errors() {
		if !strings.HasPrefix(msg, "Event send failed") {
			dbErrs = append(dbErrs, msg)
		}
	}
	hooks.mu.Lock()
	dbErrs = append(dbErrs, hooks.errs...)
	hooks.mu.Unlock()
	require.Empty(t, dbErrs, "no database error (deadlock, lock wait timeout) logged or reported")
}
