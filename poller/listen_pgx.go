package poller

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/registry"
	"github.com/oncebox/watermill-oncebox/inprocess"
)

// listenerPingEvery is how long the listener waits for a notification
// before it pings its connection (or, watching the queue, reads its usage,
// which pings it too): a peer that vanished without closing the TCP
// connection would otherwise leave it deaf until TCP keepalive gives up
// (pgx's 5-minute keepalive, then the kernel's probes). Ten minutes keeps an
// idle instance at six statements an hour (the idle budget: docs/design.md,
// "Pacing"); the loops poll at their pace meanwhile, so a deaf listener
// costs latency, never an event.
const listenerPingEvery = 10 * time.Minute

// PgxListener returns a Listener that takes one connection out of pool for
// each session (it does not return to the pool: LISTEN is session state)
// and closes it when the session ends. The poller builds it itself when its
// db is sql.BeginnerFromPgx over a *pgxpool.Pool; pass it in
// Config.Listener to listen through another pool, e.g. when the relay reads
// through database/sql, or over a direct DSN when pool goes through
// PgBouncer. It speaks PostgreSQL (LISTEN, the notification queue's usage)
// through the PostgreSQL dialect. Each session, once LISTEN is in, checks
// that it hears: a probe notification sent through pool must reach it
// within 5s, or the session ends with ErrListenerDeaf (the pool goes
// through a transaction pooler; the poller then polls only).
func PgxListener(pool *pgxpool.Pool) Listener {
	d, err := registry.New("postgres", oncebox.TablesConfig{})
	return pgxListener{pool: pool, d: d, err: err}
}

// pgxListener listens through d, a dialect that can notify: LISTEN and the
// notification queue's reading name no table, so the poller's dialect and
// one of default tables do alike. err is the failure to build d, returned
// by every session.
type pgxListener struct {
	pool *pgxpool.Pool
	d    dialects.OutboxWriter
	err  error
}

// Listen implements Listener.
func (l pgxListener) Listen(ctx context.Context, channel string, ready func(), notify func(string)) error {
	return l.ListenAndWatch(ctx, channel, 0, ready, notify, nil)
}

// ListenAndWatch implements QueueWatcher: the readings run on the
// listening connection itself (no pool connection, no MaxConcurrentQueries
// slot), between two waits; a notification that arrives meanwhile is
// buffered by pgx and returned by the next wait. The reading after ten
// minutes without a notification stands for the ping.
func (l pgxListener) ListenAndWatch(ctx context.Context, channel string, every time.Duration,
	ready func(), notify func(string), usage func(float64)) error {
	if l.err != nil {
		return fmt.Errorf("oncebox: listener: %w", l.err)
	}
	pc, err := l.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("oncebox: listener: acquire a connection: %w", err)
	}
	conn := pc.Hijack()
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	// The dialect's statements run on the hijacked connection itself,
	// through watermill-sql's pgx adapter.
	db := wsql.BeginnerFromPgx(conn)
	if err := l.d.Listen(ctx, db, channel); err != nil {
		return fmt.Errorf("oncebox: listener: LISTEN %s: %w", channel, err)
	}
	if err := l.probe(ctx, conn, channel, notify); err != nil || ctx.Err() != nil {
		return err
	}
	ready()
	var (
		lastRead time.Time
		heard    bool // a notification arrived since the last reading
	)
	read := func() error {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		u, err := l.d.NotifyQueueUsage(rctx, db)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("oncebox: listener: read the notification queue usage: %w", err)
		}
		lastRead, heard = time.Now(), false
		usage(u)
		return nil
	}
	if usage != nil {
		if err := read(); err != nil {
			return err
		}
	}
	for {
		if ctx.Err() != nil {
			// A reading cut short by ctx returns nil (read): without this
			// check the loop would read again at once, for ever.
			return nil
		}
		wait := listenerPingEvery
		if usage != nil && heard {
			if wait = every - time.Since(lastRead); wait <= 0 {
				if err := read(); err != nil {
					return err
				}
				continue
			}
		}
		waitCtx, cancel := context.WithTimeout(ctx, wait)
		n, err := conn.WaitForNotification(waitCtx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, context.DeadlineExceeded) && usage != nil:
			// pgconn keeps the connection after a timeout (it closes it on
			// any other error); the reading tells whether it is still alive.
			if err := read(); err != nil {
				return err
			}
		case errors.Is(err, context.DeadlineExceeded):
			pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err = conn.Ping(pingCtx)
			cancel()
			if err != nil && ctx.Err() == nil {
				return fmt.Errorf("oncebox: listener: ping: %w", err)
			}
		case err != nil:
			return fmt.Errorf("oncebox: listener: wait for a notification: %w", err)
		case strings.HasPrefix(n.Payload, probePrefix): // another listener's probe
		default:
			heard = true
			notify(n.Payload)
		}
	}
}

// ErrListenerDeaf is the error of a listener session whose probe
// notification, sent through the pool from another connection, never
// reached the listening connection: the pool goes through a transaction
// pooler (PgBouncer with pool_mode = transaction), where the LISTEN ran on
// a server connection that went back to the pooler's pool with the
// statement. The poller then logs it once and polls only
// (docs/postgresql.md, "PgBouncer").
var ErrListenerDeaf = errors.New("oncebox: listener: a probe notification sent through the pool did not reach " +
	"the listening connection: it goes through a transaction pooler (PgBouncer's pool_mode = transaction), " +
	"where LISTEN cannot work; give poller.Config.Listener a PgxListener over a pool on a direct DSN")

// listenerProbeTimeout is how long a new listener session waits for its
// probe notification. Over a direct connection it arrives in milliseconds.
const listenerProbeTimeout = 5 * time.Second

// probePrefix starts the payload of a probe notification. An event type
// holds no control character (oncebox.Config's validation), so no
// publisher's notification starts with it; listeners drop the probes of
// others.
const probePrefix = "\x01oncebox-probe "

// probe sends a notification on channel through the pool (another
// connection than conn) and waits for it on conn: through a transaction
// pooler it never arrives (ErrListenerDeaf). A publisher's notification
// that arrives first proves the connection hears just as well; it is
// passed to notify. It returns nil when ctx ends.
func (l pgxListener) probe(ctx context.Context, conn *pgx.Conn, channel string, notify func(string)) error {
	payload := probePrefix + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := l.d.Notify(ctx, wsql.BeginnerFromPgx(l.pool), channel, payload); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("oncebox: listener: send the probe notification: %w", err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, listenerProbeTimeout)
	defer cancel()
	for {
		n, err := conn.WaitForNotification(waitCtx)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, context.DeadlineExceeded):
			return ErrListenerDeaf
		case err != nil:
			return fmt.Errorf("oncebox: listener: wait for the probe notification: %w", err)
		case n.Payload == payload:
			return nil
		case strings.HasPrefix(n.Payload, probePrefix): // another listener's probe
		default:
			notify(n.Payload)
			return nil
		}
	}
}

// defaultListener is the Listener the poller builds when Config.Listener is
// nil: PgxListener over db's pool, listening through d, when db is
// watermill-sql's PgxBeginner over a *pgxpool.Pool and d can notify; nil
// (polling only) otherwise.
func defaultListener(db any, d dialects.Dialect) Listener {
	if !d.CanNotify() {
		// No NOTIFY: a database opened through package inprocess wakes the
		// relay on the commits of this process.
		if hub, ok := inprocess.HubFor(db); ok {
			return hub
		}
		return nil
	}
	var conn wsql.Conn
	switch b := db.(type) {
	case wsql.PgxBeginner:
		conn = b.Conn
	case *wsql.PgxBeginner:
		conn = b.Conn
	}
	if pool, ok := conn.(*pgxpool.Pool); ok {
		return pgxListener{pool: pool, d: d}
	}
	return nil
}
