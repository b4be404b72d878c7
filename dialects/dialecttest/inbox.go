package dialecttest

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/middleware"
	"github.com/oncebox/watermill-oncebox/subscriber"
)

// inboxSuite adds a table of the handler's effects, written in the inbox's
// transaction, next to the oncebox tables.
type inboxSuite struct {
	*suite
	effectsTable string
}

func setupInbox(t *testing.T, tg Target) *inboxSuite {
	t.Helper()
	s := setup(t, tg)
	table := strings.TrimSuffix(s.Tables.Events, "outbox_events") + "effects"
	s.exec(t, "CREATE TABLE "+table+" (event_id VARCHAR(64), note VARCHAR(16))")
	if tg.Name == "oracle" { // the target drops only the oncebox tables there
		t.Cleanup(func() { _, _ = s.DB.ExecContext(context.Background(), "DROP TABLE "+table+" PURGE") })
	}
	return &inboxSuite{suite: s, effectsTable: table}
}

func (s *inboxSuite) inbox(t *testing.T, mutate ...func(*middleware.InboxConfig)) *middleware.Inbox {
	t.Helper()
	return s.inboxOn(t, s.Beginner, mutate...)
}

// inboxOn is inbox over db.
func (s *inboxSuite) inboxOn(t *testing.T, db wsql.Beginner, mutate ...func(*middleware.InboxConfig)) *middleware.Inbox {
	t.Helper()
	cfg := middleware.InboxConfig{Dialect: s.Dialect}
	for _, m := range mutate {
		m(&cfg)
	}
	in, err := middleware.NewInbox(db, cfg, watermill.NopLogger{})
	require.NoError(t, err)
	return in
}

func (s *inboxSuite) effects(t *testing.T, key string) int {
	t.Helper()
	if key == "" { // Oracle stores '' as NULL
		return s.Count(t, s.effectsTable, "event_id IS NULL OR event_id = ''")
	}
	return s.Count(t, s.effectsTable, "event_id = "+s.P(1), key)
}

func (s *inboxSuite) recorded(t *testing.T, key string) int {
	t.Helper()
	return s.Count(t, s.Tables.Inbox, "event_id = "+s.P(1), key)
}

// writeEffect writes one effect row in tx.
func (s *inboxSuite) writeEffect(ctx context.Context, tx wsql.ContextExecutor, key string) error {
	_, err := tx.ExecContext(ctx, "INSERT INTO "+s.effectsTable+" (event_id, note) VALUES ("+s.P(1)+", "+s.P(2)+")", key, "done")
	return err
}

// event returns a message carrying the oncebox event id key.
func event(key string) *message.Message {
	msg := message.NewMessage(watermill.NewUUID(), []byte(`{"order":"o-1"}`))
	msg.Metadata.Set(oncebox.HeaderEventID, key)
	return msg
}

// counter is a handler that counts its runs and writes one effect row in the
// inbox's transaction when it has one.
type counter struct {
	mu   sync.Mutex
	runs map[string]int
	fail func(key string, run int) error
}

func newCounter() *counter { return &counter{runs: map[string]int{}} }

func (c *counter) handle(s *inboxSuite) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		key := msg.Metadata.Get(oncebox.HeaderEventID)
		c.mu.Lock()
		c.runs[key]++
		run := c.runs[key]
		c.mu.Unlock()
		if tx, ok := middleware.TxFromContext(msg.Context()); ok {
			if err := s.writeEffect(msg.Context(), tx, key); err != nil {
				return nil, err
			}
		}
		if c.fail != nil {
			if err := c.fail(key, run); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}
}

func (c *counter) count(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs[key]
}

func testInbox(t *testing.T, tg Target) {
	s := setupInbox(t, tg)

	t.Run("a redelivery is skipped", func(t *testing.T) {
		c := newCounter()
		h := s.inbox(t).Middleware(c.handle(s))
		key := newID(t).String()
		for range 3 {
			_, err := h(event(key))
			require.NoError(t, err)
		}
		require.Equal(t, 1, c.count(key))
		require.Equal(t, 1, s.effects(t, key))
		require.Equal(t, 1, s.recorded(t, key))
	})

	t.Run("a failed handler rolls back the id and its writes", func(t *testing.T) {
		c := newCounter()
		c.fail = func(_ string, run int) error {
			if run == 1 {
				return errors.New("downstream timeout")
			}
			return nil
		}
		h := s.inbox(t).Middleware(c.handle(s))
		key := newID(t).String()
		_, err := h(event(key))
		require.EqualError(t, err, "downstream timeout", "the error nacks the message")
		require.Zero(t, s.recorded(t, key), "the id rolled back")
		require.Zero(t, s.effects(t, key), "the handler's write rolled back with it")
		_, err = h(event(key)) // the redelivery runs again
		require.NoError(t, err)
		_, err = h(event(key)) // and a later duplicate is skipped
		require.NoError(t, err)
		require.Equal(t, 2, c.count(key))
		require.Equal(t, 1, s.effects(t, key), "effectively once")
		require.Equal(t, 1, s.recorded(t, key))
	})

	t.Run("a panic rolls back and nacks", func(t *testing.T) {
		h := s.inbox(t).Middleware(func(msg *message.Message) ([]*message.Message, error) {
			tx, _ := middleware.TxFromContext(msg.Context())
			require.NoError(t, s.writeEffect(msg.Context(), tx, msg.Metadata.Get(oncebox.HeaderEventID)))
			panic("boom")
		})
		key := newID(t).String()
		_, err := h(event(key))
		require.ErrorContains(t, err, "handler panicked: boom")
		require.Zero(t, s.recorded(t, key))
		require.Zero(t, s.effects(t, key))
	})

	t.Run("non-transactional is at most once", func(t *testing.T) {
		c := newCounter()
		c.fail = func(string, int) error { return errors.New("smtp 451") }
		h := s.inbox(t, func(cfg *middleware.InboxConfig) { cfg.Mode = middleware.NonTransactional }).Middleware(c.handle(s))
		key := newID(t).String()
		_, err := h(event(key))
		require.EqualError(t, err, "smtp 451")
		require.Equal(t, 1, s.recorded(t, key), "the id was committed before the handler ran")
		_, err = h(event(key))
		require.NoError(t, err, "the redelivery is skipped and acked")
		require.Equal(t, 1, c.count(key), "at most once")
		require.Zero(t, s.effects(t, key), "no transaction is given to the handler")
	})

	t.Run("namespaces and keys from the message UUID", func(t *testing.T) {
		c := newCounter()
		byUUID := s.inbox(t, func(cfg *middleware.InboxConfig) { cfg.Key = middleware.KeyFromUUID() }).Middleware(c.handle(s))
		msg := event("ignored")
		_, err := byUUID(msg)
		require.NoError(t, err)
		_, err = byUUID(msg.Copy())
		require.NoError(t, err)
		require.Equal(t, 1, c.count("ignored"))
		require.Equal(t, 1, s.recorded(t, msg.UUID))

		key := newID(t).String()
		for _, ns := range []string{"billing", "shipping", "billing"} {
			h := s.inbox(t, func(cfg *middleware.InboxConfig) { cfg.Namespace = ns }).Middleware(c.handle(s))
			_, err := h(event(key))
			require.NoError(t, err)
		}
		require.Equal(t, 2, c.count(key), "each namespace handles the event once")
	})

	t.Run("a missing key goes to the poison path unless allowed", func(t *testing.T) {
		c := newCounter()
		h := s.inbox(t).Middleware(c.handle(s))
		for _, key := range []string{"", string(make([]byte, 300)), "bad\xff"} {
			_, err := h(event(key))
			require.ErrorIs(t, err, oncebox.ErrMissingEventID, "%q", key)
		}
		require.Zero(t, c.count(""))
		h = s.inbox(t, func(cfg *middleware.InboxConfig) { cfg.AllowMissingKey = true }).Middleware(c.handle(s))
		for range 2 {
			_, err := h(event(""))
			require.NoError(t, err)
		}
		require.Equal(t, 2, c.count(""), "handled without dedup")
		require.Equal(t, 2, s.effects(t, ""), "still in a transaction")
	})
}

// Two instances (two connection pools) get the same message at once: the
// handler runs once, the other waits for the first transaction and skips.
func testInboxConcurrentDuplicatesOnTwoInstances(t *testing.T, tg Target) {
	s := setupInbox(t, tg)
	other := tg.NewEmpty(t) // a second pool on the same server: a second instance
	c := newCounter()
	c.fail = func(string, int) error {
		time.Sleep(20 * time.Millisecond) // hold the transaction open
		return nil
	}
	instances := []message.HandlerFunc{
		s.inbox(t).Middleware(c.handle(s)),
		s.inboxOn(t, other.Beginner).Middleware(c.handle(s)),
	}
	for round := range 10 {
		key := newID(t).String()
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make([]error, len(instances))
		for i, h := range instances {
			wg.Go(func() {
				<-start
				_, errs[i] = h(event(key))
			})
		}
		close(start)
		wg.Wait()
		require.NoError(t, errors.Join(errs...), "round %d", round)
		require.Equal(t, 1, c.count(key), "round %d: exactly one handler ran", round)
		require.Equal(t, 1, s.effects(t, key), "round %d", round)
		require.Equal(t, 1, s.recorded(t, key), "round %d", round)
	}
}

func testBatchInbox(t *testing.T, tg Target) {
	s := setupInbox(t, tg)
	batch := subscriber.BatchInbox{Dialect: s.Dialect, Clock: s.clock}
	m1, m2, m3 := event(newID(t).String()), event(newID(t).String()), event(newID(t).String())

	tx := s.begin(t)
	fresh, err := batch.FilterNew(context.Background(), tx, []*message.Message{m1, m2})
	require.NoError(t, err)
	require.Equal(t, []*message.Message{m1, m2}, fresh)
	require.NoError(t, tx.Commit())

	// A partly redelivered batch, with a key repeated inside it.
	tx = s.begin(t)
	m3dup := m3.Copy()
	fresh, err = batch.FilterNew(context.Background(), tx, []*message.Message{m2, m3, m1, m3dup})
	require.NoError(t, err)
	require.Equal(t, []*message.Message{m3}, fresh)
	require.NoError(t, tx.Rollback()) // the work failed: m3 is forgotten with it

	tx = s.begin(t)
	fresh, err = batch.FilterNew(context.Background(), tx, []*message.Message{m3, m1})
	require.NoError(t, err)
	require.Equal(t, []*message.Message{m3}, fresh)
	require.NoError(t, tx.Commit())

	// A missing key fails the whole batch, naming the message; nothing recorded.
	tx = s.begin(t)
	bad := message.NewMessage("no-key", nil)
	_, err = batch.FilterNew(context.Background(), tx, []*message.Message{event(newID(t).String()), bad})
	require.ErrorIs(t, err, oncebox.ErrMissingEventID)
	require.ErrorContains(t, err, "batch message 1 (uuid no-key)")
	require.NoError(t, tx.Rollback())
	require.Equal(t, 3, s.Count(t, s.Tables.Inbox, ""))
	require.Equal(t, 3, s.Count(t, s.Tables.Inbox, "processed_at = "+s.P(1), t0), "stamped by the injected clock")

	_, err = subscriber.BatchInbox{}.RecordNew(context.Background(), nil, []string{"x"})
	require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
}

// Two transactions record overlapping batches at once (a rebalance handing
// the same messages to two consumers): every id is new for exactly one.
func testBatchInboxConcurrentOverlappingBatches(t *testing.T, tg Target) {
	s := setupInbox(t, tg)
	ctx := context.Background()
	batch := subscriber.BatchInbox{Dialect: s.Dialect, Namespace: "race"}
	for round := range 5 {
		keys := make([]string, 100)
		for i := range keys {
			keys[i] = newID(t).String()
		}
		sort.Strings(keys)
		// A takes 0..69, B 30..99, C 50..99 and a few of A's: three
		// transactions, overlapping pairwise.
		sets := [][]string{keys[:70], keys[30:], append(append([]string{}, keys[10:20]...), keys[50:]...)}
		got := make([]map[string]bool, len(sets))
		errs := make([]error, len(sets))
		var wg sync.WaitGroup
		start := make(chan struct{})
		// A transaction may fail (MySQL: a deadlock between INSERT IGNOREs
		// of the same keys); it is rolled back whole and the batch comes
		// again, as a nacked batch would. What counts is the committed
		// attempt.
		attempt := func(set []string) (map[string]bool, error) {
			tx, err := s.Beginner.BeginTx(ctx, nil)
			if err != nil {
				return nil, err
			}
			fresh, err := batch.RecordNew(ctx, tx, set)
			if err != nil {
				_ = tx.Rollback()
				return nil, err
			}
			time.Sleep(10 * time.Millisecond) // the work, holding the transaction
			return fresh, tx.Commit()
		}
		for i, set := range sets {
			wg.Go(func() {
				<-start
				for try := 1; ; try++ {
					got[i], errs[i] = attempt(set)
					if errs[i] == nil || try == 5 {
						return
					}
					t.Logf("TRANSIENT: round %d, transaction %d, attempt %d rolled back and redelivered: %v", round, i, try, errs[i])
				}
			})
		}
		close(start)
		wg.Wait()
		require.NoError(t, errors.Join(errs...), "round %d", round)
		owners := map[string]int{}
		for _, g := range got {
			for k, isNew := range g {
				if isNew {
					owners[k]++
				}
			}
		}
		for _, k := range keys {
			require.Equal(t, 1, owners[k], "round %d: key %s new for exactly one transaction", round, k)
		}
		require.Equal(t, 100*(round+1), s.Count(t, s.Tables.Inbox, "consumer = "+s.P(1), "race"))
	}
}
