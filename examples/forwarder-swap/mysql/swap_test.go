package main

import (
	"context"
	stdSQL "database/sql"
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	kafkawm "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/components/forwarder"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox/kafka"
)

// forwarderSQLTopic is the forwarder's topic in Watermill's example:
// watermill-sql keeps it in `watermill_eventsToForward`, its offsets in
// `watermill_offsets_eventsToForward`.
const forwarderSQLTopic = "eventsToForward"

// TestSwapFromTheForwarder follows docs/migrating-from-forwarder.md on a live
// system. The lottery publishes continuously through Watermill's forwarder
// (the example's code); the forwarder is stopped mid-flight while the old
// code still writes to its table; the new code (oncebox's publisher and
// relay) is deployed while the lottery goes on; a forwarder drains its table
// until the guide's draining query finds nothing, and is stopped; the
// lottery goes on through oncebox. At the prize sender every committed
// lottery has exactly one prize and no rolled-back one has any.
func TestSwapFromTheForwarder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	drainQuery := guideQuery(t, "MySQL")

	a, cleanup, err := newApp(ctx, options{dsn: mysqlDSN(), config: "oncebox.yaml", errorProbability: 0.3})
	require.NoError(t, err)
	defer cleanup()
	stopPrizeSender, err := a.runPrizeSenderService(ctx)
	require.NoError(t, err)
	defer func() { require.NoError(t, stopPrizeSender()) }()

	// Before: the example's forwarder, relaying to the same Kafka topic.
	stopForwarder, err := startForwarder(a)
	require.NoError(t, err)

	// The lottery runs all along; each lottery goes through the code deployed
	// when it starts.
	var useOncebox atomic.Bool
	var mu sync.Mutex
	path := map[int]string{}
	var onceboxDone atomic.Int64
	lotteryCtx, stopLottery := context.WithCancel(ctx)
	lotteryErr := make(chan error, 1)
	go func() {
		lotteryErr <- a.runLotteryService(lotteryCtx, 5*time.Millisecond,
			func(ctx context.Context, id int, user string, logger watermill.LoggerAdapter) error {
				if useOncebox.Load() {
					err := a.persistDataAndPublishEventInTransaction(ctx, id, user, logger)
					mu.Lock()
					path[id] = "oncebox"
					mu.Unlock()
					onceboxDone.Add(1)
					return err
				}
				mu.Lock()
				path[id] = "forwarder"
				mu.Unlock()
				return persistDataAndPublishEventThroughForwarder(ctx, a, id, user, logger)
			})
	}()
	waitUntil(t, ctx, "the forwarder delivers", func() bool { return a.record.HandledCount() >= 20 })

	// 1. The forwarder stops mid-flight; the old code keeps writing to its
	// table, so a backlog builds up that nobody relays.
	require.NoError(t, stopForwarder())
	committedAtStop := len(a.record.CommittedIDs())
	waitUntil(t, ctx, "a backlog builds up", func() bool { return len(a.record.CommittedIDs()) >= committedAtStop+20 })
	backlog := countBacklog(t, a.db, drainQuery)
	require.Positive(t, backlog, "the forwarder's table must hold events nobody relayed yet")

	// 2. Deploy the new code: oncebox's relay, then oncebox's publisher.
	stopRelay, err := a.runRelay(ctx)
	require.NoError(t, err)
	useOncebox.Store(true)
	// The lottery that was running when the code changed may still commit
	// through the forwarder's table: wait for one that started after it.
	waitUntil(t, ctx, "the new code publishes", func() bool { return onceboxDone.Load() >= 1 })

	// 3. Drain the forwarder's table: a forwarder runs next to oncebox's
	// relay until the guide's query finds nothing, then stops for good.
	stopForwarder, err = startForwarder(a)
	require.NoError(t, err)
	waitUntil(t, ctx, "the forwarder's table drains", func() bool { return countBacklog(t, a.db, drainQuery) == 0 })
	require.NoError(t, stopForwarder())
	require.Zero(t, countBacklog(t, a.db, drainQuery), "nothing may reach the forwarder's table after the new code is deployed")
	for _, table := range []string{"watermill_eventsToForward", "watermill_offsets_eventsToForward"} {
		_, err := a.db.ExecContext(ctx, "DROP TABLE `"+table+"`")
		require.NoError(t, err)
	}

	// 4. The lottery goes on through oncebox alone.
	waitUntil(t, ctx, "oncebox publishes on its own", func() bool { return onceboxDone.Load() >= 40 })
	stopLottery()
	require.NoError(t, <-lotteryErr)
	require.NoError(t, a.waitForDeliveries(ctx, 20*time.Second))
	require.NoError(t, stopRelay())

	s, err := a.summarize(ctx)
	require.NoError(t, err)
	t.Log(s)
	byPath := map[string]int{}
	for _, id := range a.record.CommittedIDs() {
		byPath[path[id]]++
	}
	// duplicates_skipped counts the events the restarted forwarder sent a
	// second time: its subscriber acks a batch in one transaction, which
	// the stop rolled back.
	t.Logf("committed through the forwarder: %d (backlog when it stopped: %d), through oncebox: %d", byPath["forwarder"], backlog, byPath["oncebox"])
	require.Positive(t, byPath["forwarder"])
	require.Positive(t, byPath["oncebox"])
	require.Equal(t, s.Published, s.Delivered)
	require.Zero(t, s.Lost, "lost")
	require.Zero(t, s.Doubled, "doubled")
	require.Zero(t, s.Phantom, "delivered from a rolled-back transaction")
}

// startForwarder starts Watermill's forwarder as the example does: a
// watermill-sql subscriber on the forwarder's topic, and watermill-kafka's
// publisher in place of Google Cloud Pub/Sub's. stop closes both.
func startForwarder(a *app) (stop func() error, err error) {
	sqlSubscriber, err := sql.NewSubscriber(
		sql.BeginnerFromStdSQL(a.db),
		sql.SubscriberConfig{
			SchemaAdapter:    sql.DefaultMySQLSchema{},
			OffsetsAdapter:   sql.DefaultMySQLOffsetsAdapter{},
			InitializeSchema: true,
		},
		a.logger,
	)
	if err != nil {
		return nil, err
	}
	kafkaPublisher, err := kafkawm.NewPublisher(kafkawm.PublisherConfig{
		Brokers:               a.brokers,
		Marshaler:             kafkawm.DefaultMarshaler{},
		OverwriteSaramaConfig: kafka.RecommendedSaramaConfig(),
	}, a.logger)
	if err != nil {
		return nil, errors.Join(err, sqlSubscriber.Close())
	}
	fwd, err := forwarder.NewForwarder(sqlSubscriber, kafkaPublisher, a.logger, forwarder.Config{
		ForwarderTopic: forwarderSQLTopic,
	})
	if err != nil {
		return nil, errors.Join(err, sqlSubscriber.Close(), kafkaPublisher.Close())
	}
	done := make(chan error, 1)
	go func() { done <- fwd.Run(context.Background()) }()
	<-fwd.Running() // the subscriber has created the forwarder's tables
	return func() error {
		closeErr := fwd.Close()
		return errors.Join(closeErr, <-done, kafkaPublisher.Close())
	}, nil
}

// persistDataAndPublishEventThroughForwarder is the example's third approach
// as Watermill wrote it (with its errors handled): the winner and the
// enveloped event in one transaction, the event in the forwarder's table.
func persistDataAndPublishEventThroughForwarder(ctx context.Context, a *app, lotteryID int, pickedUser string, logger watermill.LoggerAdapter) (err error) {
	tx, err := a.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err == nil {
			err = tx.Commit()
			return
		}
		if rbErr := tx.Rollback(); rbErr != nil && !errors.Is(rbErr, stdSQL.ErrTxDone) {
			err = errors.Join(err, rbErr)
		}
	}()
	_, err = tx.ExecContext(ctx, `INSERT INTO lotteries (lottery_id, winner) VALUES(?, ?)`, lotteryID, pickedUser)
	if err != nil {
		return err
	}
	var publisher message.Publisher
	publisher, err = sql.NewPublisher(sql.TxFromStdSQL(tx), sql.PublisherConfig{SchemaAdapter: sql.DefaultMySQLSchema{}}, logger)
	if err != nil {
		return err
	}
	publisher = forwarder.NewPublisher(publisher, forwarder.PublisherConfig{ForwarderTopic: forwarderSQLTopic})
	payload, err := json.Marshal(LotteryConcludedEvent{LotteryID: lotteryID})
	if err != nil {
		return err
	}
	if err = publisher.Publish(lotteryConcludedEvent, message.NewMessage(watermill.NewULID(), payload)); err != nil {
		return err
	}
	return a.simulateError()
}

// guideQuery returns the draining query for db ("MySQL" or "PostgreSQL")
// from docs/migrating-from-forwarder.md: the test runs the guide's text,
// so the guide cannot drift from what was verified.
func guideQuery(t *testing.T, db string) string {
	t.Helper()
	guide, err := os.ReadFile("../../../docs/migrating-from-forwarder.md")
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)```sql\n(-- forwarder backlog, " + db + "\n.*?)```").FindSubmatch(guide)
	require.NotNil(t, m, "the guide has no draining query for %s", db)
	return string(m[1])
}

// countBacklog runs the draining query: the events in the forwarder's table
// that it has not acked.
func countBacklog(t *testing.T, db *stdSQL.DB, query string) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRow(query).Scan(&n))
	return n
}

// waitUntil polls cond until it holds, failing the test when ctx ends.
func waitUntil(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("gave up waiting until %s: %v", what, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
