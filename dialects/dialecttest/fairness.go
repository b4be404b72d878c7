package dialecttest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/poller"
)

// More busy discovered types than loops: every type gets a turn while the
// others still have work ("one type never blocks another"). Five types
// with a backlog of 1,000 events each, batches of 5, and loops for two of
// them at once (MaxDiscoveredTypes): a loop runs at least its quantum (the
// defaults' max-fixed-delay, 20ms here), then yields to a waiting type, in
// turn. Before, the first two types kept their loops until drained (a loop
// ended only at an empty poll) and the discovery, which asked for two types,
// never saw the three others: they were relayed only after 2,000 events of
// the first two.
func testMoreBusyDiscoveredTypesThanLoopsAllGetATurn(t *testing.T, tg Target) {
	s := setup(t, tg)
	const perType = 1000
	types := []string{"busy-a", "busy-b", "busy-c", "busy-d", "busy-e"}
	for _, typ := range types {
		s.publish(t, nil, typ, perType)
	}
	var (
		mu    sync.Mutex
		sent  = map[string]int{}
		seen  = map[string]bool{}
		atAll map[string]int // sent per type when the last type got its first call
	)
	rec := newRecorder()
	rec.fn = func(topic string, msgs []*message.Message) error {
		mu.Lock()
		defer mu.Unlock()
		sent[topic] += len(msgs)
		seen[topic] = true
		if atAll == nil && len(seen) == len(types) {
			atAll = map[string]int{}
			for k, v := range sent {
				atAll[k] = v
			}
		}
		return nil
	}
	cfg := fastPolling(s.discoveringConfig(nil))
	cfg.Oncebox.Outbox.Defaults.BatchSize = 5
	cfg.Oncebox.Outbox.MaxDiscoveredTypes = 2 // outbox.max-discovered-types
	s.startPoller(t, nil, rec, cfg)
	eventually(t, "every type relayed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return atAll != nil
	})
	mu.Lock()
	defer mu.Unlock()
	t.Logf("events sent per type when the last type had its first turn: %v", atAll)
	for _, typ := range types {
		require.Less(t, atAll[typ], perType/2,
			"events of %s sent before every type had a turn (%v): no type waits for another to drain", typ, atAll)
	}
}

// A discovered ordered type whose keys are all held (here the key's other
// event waits an hour for its retry) is due for the discovery but its loop
// claims nothing: that must not keep the discovery at min-fixed-delay.
// Over a simulated hour the discovery costs its idle ~72 polls and the
// type's loop at most one claim per discovery poll, as a configured type
// would cost (its own ~72) beside the discovery. Before, every discovery
// poll started the loop and counted as busy: a poll and a claim every
// 250ms, ~28,000 statements an hour.
func testHeldKeysDoNotSpeedTheDiscoveryUp(t *testing.T, tg Target) {
	s := setup(t, tg)
	ids := s.publish(t, s.clock, "held", 2) // one key, "k"
	s.exec(t, "UPDATE "+s.Tables.Events+" SET next_retry_at = "+s.P(1)+", retry_count = 1 WHERE id = "+s.P(2),
		t0.Add(2*time.Hour), s.ID(ids[0]))
	h := &hooks{}
	cfg := s.discoveringConfig(nil)
	cfg.Oncebox.Outbox.Defaults.Ordering = oncebox.OrderingKey
	cfg.Hooks = h
	s.startPoller(t, nil, newRecorder(), cfg)
	count := func() (discovery, held int) {
		for _, p := range h.Snapshot().Polls {
			require.NoError(t, p.Err)
			switch p.EventType {
			case poller.DiscoveryEventType:
				discovery++
			case "held":
				require.Zero(t, p.Claimed, "the key is held")
				held++
			default:
				t.Fatalf("unexpected poll of %q", p.EventType)
			}
		}
		return discovery, held
	}
	stepUntil(t, s.clock, waitersPerPoller, time.Second, time.Hour+time.Minute, func() bool {
		d, held := count()
		return s.clock.Since(t0) >= time.Hour || d+held > 1000
	})
	discovery, held := count()
	msg := fmt.Sprintf("after %s: %d discovery polls, %d claims of the held type", s.clock.Since(t0), discovery, held)
	t.Log(msg)
	require.InDelta(t, 72, discovery, 8, msg)
	require.LessOrEqual(t, held, discovery, msg)
	require.Equal(t, 2, s.status(t, "PENDING"))
}

// An idle discovery poll reads no row that waits for a retry: with 20,000
// PENDING rows of a type not due for an hour, the discovery statement
// probes the claim index per type instead of passing every entry. Measured
// by what the server reports it read: PostgreSQL's buffers (EXPLAIN
// ANALYZE), MariaDB's handler reads (SHOW SESSION STATUS). Before, the
// statement passed every one of the rows: 145 buffers on PostgreSQL (8
// now; 1,898 at 200,000 rows, 21–35 ms, and a parallel seq scan was seen
// too), and 20,010 handler reads on MariaDB (4 now; 100–280 ms at
// 200,000).
func testIdleDiscoveryReadsNoRowWaitingForARetry(t *testing.T, tg Target) {
	s := setup(t, tg)
	s.publish(t, clockwork.NewFakeClockAt(t0.Add(time.Hour)), "retrying", 20000)
	s.publish(t, s.clock, "done", 10)
	s.exec(t, "UPDATE "+s.Tables.Events+" SET status = 'PROCESSED' WHERE event_type = 'done'")
	s.analyze(t)
	q := discoveryStatement(t, s, t0)
	ctx := t.Context()
	conn, err := s.DB.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	var read int
	switch tg.Name {
	case "postgres":
		var plan string
		require.NoError(t, conn.QueryRowContext(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+q.SQL, q.Args...).Scan(&plan))
		var out []struct {
			Plan struct {
				Hit  int `json:"Shared Hit Blocks"`
				Read int `json:"Shared Read Blocks"`
			} `json:"Plan"`
		}
		require.NoError(t, json.Unmarshal([]byte(plan), &out))
		read = out[0].Plan.Hit + out[0].Plan.Read
	case "mysql":
		reads := func() int {
			rows, err := conn.QueryContext(ctx, "SHOW SESSION STATUS WHERE Variable_name IN ('Handler_read_key', 'Handler_read_next', 'Handler_read_prev', 'Handler_read_rnd_next', 'Handler_read_first', 'Handler_read_last')")
			require.NoError(t, err)
			defer rows.Close()
			n := 0
			for rows.Next() {
				var name string
				var v int
				require.NoError(t, rows.Scan(&name, &v))
				n += v
			}
			require.NoError(t, rows.Err())
			return n
		}
		base := reads()
		base = 2*base - reads() // SHOW STATUS reads rows of its own
		rows, err := conn.QueryContext(ctx, q.SQL, q.Args...)
		require.NoError(t, err)
		n := 0
		for rows.Next() {
			n++
		}
		require.NoError(t, rows.Err())
		require.Equal(t, 1, n, "one type")
		require.NoError(t, rows.Close())
		read = reads() - base
	default:
		t.Skipf("no read counter for %s", tg.Name)
	}
	t.Logf("%s: the idle discovery statement read %d (buffers or handler reads) beside 20,000 rows waiting for a retry", tg.Name, read)
	require.Less(t, read, 50, "the rows waiting for a retry are not read")
}

// discoveryStatement is the discovery's statement at now, first page: what
// Dialect.DueTypes sends, caught before it reaches the database.
func discoveryStatement(t *testing.T, s *suite, now time.Time) dialects.Query {
	t.Helper()
	var c statementCatcher
	_, err := s.Dialect.DueTypes(t.Context(), &c, now, "", 100)
	require.ErrorIs(t, err, errCaught)
	require.Len(t, c.caught, 1, "one statement")
	return c.caught[0]
}

// errCaught is what statementCatcher answers to every statement.
var errCaught = errors.New("statement caught")

// statementCatcher is a handle that runs nothing: it keeps each statement
// sent to it and fails it with errCaught.
type statementCatcher struct{ caught []dialects.Query }

func (c *statementCatcher) ExecContext(_ context.Context, query string, args ...any) (wsql.Result, error) {
	c.caught = append(c.caught, dialects.Query{SQL: query, Args: args})
	return nil, errCaught
}

func (c *statementCatcher) QueryContext(_ context.Context, query string, args ...any) (wsql.Rows, error) {
	c.caught = append(c.caught, dialects.Query{SQL: query, Args: args})
	return nil, errCaught
}

// analyze refreshes the planner's statistics of the outbox table.
func (s *suite) analyze(t *testing.T) {
	t.Helper()
	switch s.Target.Name {
	case "postgres":
		s.exec(t, "ANALYZE "+s.Tables.Events)
	case "mysql":
		rows, err := s.DB.QueryContext(t.Context(), "ANALYZE TABLE "+s.Tables.Events)
		require.NoError(t, err)
		require.NoError(t, rows.Close())
	}
}
