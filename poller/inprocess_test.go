package poller_test

import (
	"context"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/inprocess"
	"github.com/oncebox/watermill-oncebox/internal/dbtest"
	"github.com/oncebox/watermill-oncebox/poller"
	"github.com/oncebox/watermill-oncebox/publisher"
)

// On a database without NOTIFY (MariaDB here, SQLite alike), a *sql.DB
// opened through inprocess wakes the relay of the process once a
// transaction that wrote events commits: never before the commit, never
// for a rollback. The fake clock never moves, so an event the relay sends
// was sent because of a wake-up.
func TestInProcessCommitWakesTheRelayOverDatabaseSQL(t *testing.T) {
	t.Parallel()
	env := dbtest.TargetNamed(t, "mysql").New(t)
	db, err := inprocess.OpenDB("mysql", dbtest.MySQLDSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, ok := inprocess.HubOf(db)
	require.True(t, ok, "HubOf finds the hub of a *sql.DB opened through OpenDB")

	clock := clockwork.NewFakeClockAt(t0)
	h := &wakeHooks{}
	rec := newRecorder()
	cfg := poller.Config{Dialect: env.Dialect, Clock: clock, Hooks: h}
	cfg.Oncebox.Outbox.Events = map[string]oncebox.EventSettings{"order-created": {}}
	cfg.Oncebox.Outbox.StrictEventTypes = true
	p, err := poller.New(wsql.BeginnerFromStdSQL(db), rec, cfg, nil)
	require.NoError(t, err)
	start(t, p)
	eventually(t, "listener up and first poll done", func() bool {
		ups, _, _ := h.state()
		return ups == 1 && h.pollsOf("order-created") == 1
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, clock.BlockUntilContext(ctx, 3)) // the loop, recovery, clean-up

	publish := func() (*wsql.StdSQLTx, string) {
		tx, err := db.BeginTx(ctx, nil)
		require.NoError(t, err)
		pub, err := publisher.NewPublisher(wsql.TxFromStdSQL(tx), publisher.Config{Dialect: env.Dialect, Clock: clock}, nil)
		require.NoError(t, err)
		msg := message.NewMessage(watermill.NewUUID(), []byte(`{"n":1}`))
		require.NoError(t, pub.Publish("order-created", msg))
		return &wsql.StdSQLTx{Tx: tx}, msg.Metadata.Get(oncebox.HeaderEventID)
	}

	// Written, not committed: nothing is woken.
	tx, id := publish()
	time.Sleep(200 * time.Millisecond)
	_, _, woken := h.state()
	require.Empty(t, woken, "no wake-up before the commit")

	// Rolled back: nothing is woken.
	require.NoError(t, tx.Rollback())
	time.Sleep(200 * time.Millisecond)
	_, _, woken = h.state()
	require.Empty(t, woken, "a rollback wakes nothing")
	require.Zero(t, rec.deliveries()[id])

	// Committed: the loop is woken once and relays the event.
	tx, id = publish()
	require.NoError(t, tx.Commit())
	eventually(t, "the committed event is relayed", func() bool { return rec.deliveries()[id] == 1 })
	_, _, woken = h.state()
	require.Equal(t, []string{woke("order-created", poller.WokeLoop)}, woken)
}
