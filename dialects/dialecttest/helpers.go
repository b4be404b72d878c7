package dialecttest

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/internal/pollertest"
	"github.com/oncebox/watermill-oncebox/poller"
	"github.com/oncebox/watermill-oncebox/publisher"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// suite is one test's database and fake clock.
type suite struct {
	*Env
	clock *clockwork.FakeClock
	// deleted: the target runs with outbox.finalize: delete
	// (Target.Finalize); audit is then the table of the ids the finalize
	// deleted (finalizeaudit.go).
	deleted bool
	audit   string
}

// setup marks the subtest parallel and gives it fresh, migrated tables.
func setup(t *testing.T, tg Target) *suite {
	t.Helper()
	t.Parallel()
	s := &suite{Env: tg.New(t), clock: clockwork.NewFakeClockAt(t0)}
	if tg.Finalize == oncebox.FinalizeDelete {
		s.finalizeDelete(t)
	}
	return s
}

// begin starts a transaction on the components' handle.
func (s *suite) begin(t *testing.T) wsql.Tx {
	t.Helper()
	tx, err := s.Beginner.BeginTx(context.Background(), nil)
	require.NoError(t, err)
	return tx
}

// publish commits n events of eventType created at clock's time (the real
// clock when nil), in transactions of at most 1,000, and returns their ids.
func (s *suite) publish(t *testing.T, clock clockwork.Clock, eventType string, n int) []oncebox.EventID {
	t.Helper()
	var ids []oncebox.EventID
	for n > 0 {
		k := min(n, 1000)
		n -= k
		tx := s.begin(t)
		pub, err := publisher.NewPublisher(tx, publisher.Config{Dialect: s.Dialect, Clock: clock}, nil)
		require.NoError(t, err)
		msgs := make([]*message.Message, k)
		for i := range msgs {
			msgs[i] = message.NewMessage(watermill.NewUUID(), []byte(`{"n":1}`))
			oncebox.SetKey(msgs[i], "k")
		}
		require.NoError(t, pub.Publish(eventType, msgs...))
		require.NoError(t, tx.Commit())
		for _, m := range msgs {
			id, err := oncebox.EventIDOf(m)
			require.NoError(t, err)
			ids = append(ids, id)
		}
	}
	return ids
}

// status counts the outbox rows in status.
//
// With outbox.finalize: delete, PROCESSED also counts the rows the
// finalize deleted (finalizeaudit.go).
func (s *suite) status(t *testing.T, status string) int {
	t.Helper()
	n := s.Count(t, s.Tables.Events, "status = "+s.P(1), status)
	if status == string(oncebox.StatusProcessed) && s.deleted {
		n += s.Count(t, s.audit, "1 = 1")
	}
	return n
}

// cfg is c with the target's outbox.finalize: every poller a test builds
// goes through it.
func (s *suite) cfg(c poller.Config) poller.Config {
	if s.deleted {
		c.Oncebox.Outbox.Finalize = oncebox.FinalizeDelete
	}
	return c
}

// exec runs q on the database and returns the rows it affected.
func (s *suite) exec(t *testing.T, q string, args ...any) int64 {
	t.Helper()
	return s.Exec(t, dialects.Query{SQL: q, Args: args})
}

// inList returns "P(from), P(from+1), …" for n parameters and the encoded ids.
func (s *suite) inList(from int, ids []oncebox.EventID) (string, []any) {
	ps := make([]string, len(ids))
	args := make([]any, len(ids))
	for i, id := range ids {
		ps[i] = s.P(from + i)
		args[i] = s.ID(id)
	}
	return strings.Join(ps, ", "), args
}

// pollerConfig is a poller of types, and of those types only (strict
// mode: no discovery of others), on the fake clock.
func (s *suite) pollerConfig(types ...string) poller.Config {
	events := make(map[string]oncebox.EventSettings, len(types))
	for _, t := range types {
		events[t] = oncebox.EventSettings{}
	}
	return poller.Config{Dialect: s.Dialect, Clock: s.clock,
		Oncebox: oncebox.Config{Outbox: oncebox.OutboxConfig{Events: events, StrictEventTypes: true}}}
}

// fastPolling is a config for throughput tests on the real clock.
func fastPolling(c poller.Config) poller.Config {
	c.Clock = nil
	c.Oncebox.Outbox.Defaults.Polling = oncebox.PollingSettings{MinFixedDelay: time.Millisecond,
		MaxFixedDelay: 20 * time.Millisecond, Multiplier: 2}
	return c
}

// startPoller runs a poller until the test ends.
func (s *suite) startPoller(t *testing.T, db wsql.Beginner, pub message.Publisher, cfg poller.Config) {
	t.Helper()
	s.startPollerLogged(t, db, pub, cfg, watermill.NopLogger{})
}

// startPollerLogged is startPoller with a logger of the test's.
func (s *suite) startPollerLogged(t *testing.T, db wsql.Beginner, pub message.Publisher, cfg poller.Config, logger watermill.LoggerAdapter) {
	t.Helper()
	if db == nil {
		db = s.Beginner
	}
	p, err := poller.New(db, pub, s.cfg(cfg), logger)
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() { errc <- p.Run(context.Background()) }()
	<-p.Running()
	t.Cleanup(func() {
		require.NoError(t, p.Close())
		require.NoError(t, <-errc)
	})
}

// recorder is a message.Publisher that records what it was given. fn, when
// set, decides the fate of each call before it is recorded.
type recorder struct {
	mu  sync.Mutex
	got map[string][]sent // event id -> deliveries
	fn  func(topic string, msgs []*message.Message) error
}

type sent struct {
	topic string
	msg   *message.Message
}

func newRecorder() *recorder { return &recorder{got: map[string][]sent{}} }

func (r *recorder) Publish(topic string, msgs ...*message.Message) error {
	if r.fn != nil {
		if err := r.fn(topic, msgs); err != nil {
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range msgs {
		id := m.Metadata.Get(oncebox.HeaderEventID)
		r.got[id] = append(r.got[id], sent{topic: topic, msg: m})
	}
	return nil
}

func (r *recorder) Close() error { return nil }

// delivered is the number of distinct event ids delivered.
func (r *recorder) delivered() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

// of returns the deliveries of id.
func (r *recorder) of(id oncebox.EventID) []sent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sent(nil), r.got[id.String()]...)
}

// hooks records what a poller reports.
type hooks = pollertest.Hooks

// runs sums the runs of job over hs: ran, skipped (lease taken) and rows.
// A run that failed fails the test.
func runs(t *testing.T, job string, hs ...*hooks) (ran, skipped, rows int) {
	t.Helper()
	for _, h := range hs {
		for _, j := range h.Snapshot().Jobs {
			if j.Job != job {
				continue
			}
			require.NoError(t, j.Err, "job %s", job)
			if j.Skipped {
				skipped++
			} else {
				ran++
				rows += j.Rows
			}
		}
	}
	return
}

var stepUntil = pollertest.StepUntil

var eventually = pollertest.Eventually

func newID(t *testing.T) oncebox.EventID {
	t.Helper()
	id, err := oncebox.NewEventID()
	require.NoError(t, err)
	return id
}

// Waiting goroutines of an idle poller with one event type on the fake
// clock: the poll loop, recovery and clean-up; with the DLQ enabled also the
// DLQ transfer, the DLQ retry and the DLQ clean-up. A poller that discovers
// types nobody configured has one more: the discovery.
const (
	waitersPerPoller    = 3
	waitersPerPollerDLQ = 6
)
