// The SQLite tests run without the race detector (scripts/test.sh runs
// them in a second pass): -race instruments modernc.org/sqlite's engine,
// transpiled C, and slows it past the relay's heartbeat timeout
// (docs/sqlite.md, "What was tested"). oncebox's own code is race-checked
// by the suite on PostgreSQL and MariaDB.

//go:build !race

package conformance_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects/sqlite"
	"github.com/oncebox/watermill-oncebox/migrate"
	"github.com/oncebox/watermill-oncebox/poller"
	"github.com/oncebox/watermill-oncebox/publisher"
)

// "Several relay instances" on SQLite are several processes (or several
// pools) on one file: each claim is a write, and SQLite runs one write at
// a time, so the instances' claims are serialized by the file's write
// lock and never overlap. These tests run two relays on one file while
// events are published, and check that every event is delivered exactly
// once: none claimed twice, none lost.

const relayEventType = "order-created"

// deliveries is a message.Publisher that records the event ids it was
// given, with how many times each.
type deliveries struct {
	mu  sync.Mutex
	got map[string]int
}

func newDeliveries() *deliveries { return &deliveries{got: map[string]int{}} }

func (d *deliveries) Publish(_ string, msgs ...*message.Message) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, m := range msgs {
		d.got[m.Metadata.Get(oncebox.HeaderEventID)]++
	}
	return nil
}

func (d *deliveries) Close() error { return nil }

func (d *deliveries) snapshot() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]int, len(d.got))
	for k, v := range d.got {
		out[k] = v
	}
	return out
}

// relayConfig is the relays' configuration: fast polling on the real
// clock, the instance's own id.
func relayConfig(d *sqlite.Dialect, instance string) poller.Config {
	return poller.Config{
		Dialect:    d,
		InstanceID: instance,
		Oncebox: oncebox.Config{Outbox: oncebox.OutboxConfig{
			Events:           map[string]oncebox.EventSettings{relayEventType: {}},
			StrictEventTypes: true,
			Defaults: oncebox.EventSettings{Polling: oncebox.PollingSettings{
				MinFixedDelay: time.Millisecond, MaxFixedDelay: 20 * time.Millisecond, Multiplier: 2}},
		}},
	}
}

// runRelay runs a relay on db until stop is called; stop returns Run's
// error.
func runRelay(t testing.TB, db *sql.DB, pub message.Publisher, cfg poller.Config) (stop func() error) {
	t.Helper()
	p, err := poller.New(wsql.BeginnerFromStdSQL(db), pub, cfg, watermill.NopLogger{})
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() { errc <- p.Run(context.Background()) }()
	<-p.Running()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() {
			closeErr := p.Close()
			runErr = <-errc
			if runErr == nil {
				runErr = closeErr
			}
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// publishEvents commits n events in transactions of batch on db and
// returns their ids.
func publishEvents(t testing.TB, db *sql.DB, d *sqlite.Dialect, n, batch int) []string {
	t.Helper()
	ctx := context.Background()
	var ids []string
	for n > 0 {
		k := min(n, batch)
		n -= k
		tx, err := db.BeginTx(ctx, nil)
		require.NoError(t, err)
		pub, err := publisher.NewPublisher(wsql.TxFromStdSQL(tx), publisher.Config{Dialect: d}, nil)
		require.NoError(t, err)
		msgs := make([]*message.Message, k)
		for i := range msgs {
			msgs[i] = message.NewMessage(watermill.NewUUID(), []byte(`{"n":1}`))
		}
		require.NoError(t, pub.Publish(relayEventType, msgs...))
		require.NoError(t, tx.Commit())
		for _, m := range msgs {
			id, err := oncebox.EventIDOf(m)
			require.NoError(t, err)
			ids = append(ids, id.String())
		}
	}
	return ids
}

// processed counts the PROCESSED rows.
func processed(t testing.TB, db *sql.DB, d *sqlite.Dialect) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRow("SELECT count(*) FROM "+d.Tables().Events+" WHERE status = 'PROCESSED'").Scan(&n))
	return n
}

// waitFor polls cond every 20 ms until it holds or d has passed.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("not within %s: %s", d, what)
		}
	}
}

// requireExactlyOnce checks that every id was delivered once, in all the
// relays' deliveries together, and nothing else was.
func requireExactlyOnce(t testing.TB, ids []string, got ...map[string]int) {
	t.Helper()
	all := map[string]int{}
	for _, g := range got {
		for id, n := range g {
			all[id] += n
		}
	}
	require.Len(t, all, len(ids), "no event lost, no unknown event")
	for _, id := range ids {
		require.Equal(t, 1, all[id], "event %s delivered once", id)
	}
}

// Two relays on two pools (two *sql.DB, as two instances in one process
// would have) on one file, while a third pool publishes.
func TestSQLiteTwoRelaysOnTwoPoolsDeliverEveryEventOnce(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "oncebox.db")
	d, err := sqlite.New(oncebox.TablesConfig{})
	require.NoError(t, err)
	pubDB := openSQLite(t, path)
	require.NoError(t, migrate.Migrate(context.Background(), wsql.BeginnerFromStdSQL(pubDB), d))

	a, b := newDeliveries(), newDeliveries()
	stopA := runRelay(t, openSQLite(t, path), a, relayConfig(d, "relay-a"))
	stopB := runRelay(t, openSQLite(t, path), b, relayConfig(d, "relay-b"))
	const total = 3000
	ids := publishEvents(t, pubDB, d, total, 50)
	waitFor(t, 2*time.Minute, "every event PROCESSED", func() bool { return processed(t, pubDB, d) == total })
	require.NoError(t, stopA())
	require.NoError(t, stopB())
	ga, gb := a.snapshot(), b.snapshot()
	t.Logf("relay-a delivered %d events, relay-b %d", len(ga), len(gb))
	requireExactlyOnce(t, ids, ga, gb)
}

// The child relay of TestSQLiteTwoRelaysInTwoProcessesDeliverEveryEventOnce
// reads these: the file, the number of events to wait for, and where to
// write the ids it delivered.
const (
	childFileEnv  = "ONCEBOX_SQLITE_CHILD_FILE"
	childTotalEnv = "ONCEBOX_SQLITE_CHILD_TOTAL"
	childOutEnv   = "ONCEBOX_SQLITE_CHILD_OUT"
)

// Two relays in two OS processes on one file: this test's process runs
// one relay and publishes, and runs the test binary again
// (TestSQLiteChildRelay) for the other.
func TestSQLiteTwoRelaysInTwoProcessesDeliverEveryEventOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path, out := filepath.Join(dir, "oncebox.db"), filepath.Join(dir, "child.ids")
	d, err := sqlite.New(oncebox.TablesConfig{})
	require.NoError(t, err)
	pubDB := openSQLite(t, path)
	require.NoError(t, migrate.Migrate(context.Background(), wsql.BeginnerFromStdSQL(pubDB), d))
	const total = 3000

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	child := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestSQLiteChildRelay$", "-test.count=1")
	child.Env = append(os.Environ(), childFileEnv+"="+path, childTotalEnv+"="+strconv.Itoa(total), childOutEnv+"="+out)
	var childOut strings.Builder
	child.Stdout, child.Stderr = &childOut, &childOut
	require.NoError(t, child.Start())

	mine := newDeliveries()
	stop := runRelay(t, openSQLite(t, path), mine, relayConfig(d, "relay-parent"))
	ids := publishEvents(t, pubDB, d, total, 50)
	waitFor(t, 2*time.Minute, "every event PROCESSED", func() bool { return processed(t, pubDB, d) == total })
	require.NoError(t, stop())
	require.NoError(t, child.Wait(), "the child relay: %s", childOut.String())

	f, err := os.Open(out)
	require.NoError(t, err, "the child's deliveries: %s", childOut.String())
	defer f.Close()
	theirs := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		theirs[sc.Text()]++
	}
	require.NoError(t, sc.Err())
	got := mine.snapshot()
	t.Logf("this process's relay delivered %d events, the child's %d", len(got), len(theirs))
	requireExactlyOnce(t, ids, got, theirs)
}

// TestSQLiteChildRelay is the second process of
// TestSQLiteTwoRelaysInTwoProcessesDeliverEveryEventOnce; run on its own
// (without the environment it reads) it does nothing.
func TestSQLiteChildRelay(t *testing.T) {
	path := os.Getenv(childFileEnv)
	if path == "" {
		t.Skip("the second process of TestSQLiteTwoRelaysInTwoProcessesDeliverEveryEventOnce only")
	}
	total, err := strconv.Atoi(os.Getenv(childTotalEnv))
	require.NoError(t, err)
	d, err := sqlite.New(oncebox.TablesConfig{})
	require.NoError(t, err)
	db := openSQLite(t, path)
	mine := newDeliveries()
	stop := runRelay(t, db, mine, relayConfig(d, "relay-child"))
	waitFor(t, 2*time.Minute, "every event PROCESSED", func() bool { return processed(t, db, d) == total })
	require.NoError(t, stop())
	var b strings.Builder
	for id, n := range mine.snapshot() {
		for range n {
			fmt.Fprintln(&b, id)
		}
	}
	require.NoError(t, os.WriteFile(os.Getenv(childOutEnv), []byte(b.String()), 0o600))
}
