package service

import (
	"context"
	stdsql "database/sql"
	"errors"
	"fmt"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"

	"github.com/oncebox/watermill-oncebox/middleware"
	"github.com/oncebox/watermill-oncebox/publisher"
)

// ErrNoInboxTx is the error of a message that reached a handler of
// AddPgxHandler or AddStdHandler without the inbox's transaction of the
// kind the handler takes: an inbox in NonTransactional mode
// (WithInboxConfig), or a handle whose transactions are not pgx's (or not
// database/sql's) where New could not tell. The handler is not called, and
// Run stops with the error.
var ErrNoInboxTx = errors.New("oncebox: service: no inbox transaction for the handler")

// PgxHandlerFunc is a consumer handler that runs in the inbox's
// transaction, tx, on a pgx pool (sql.BeginnerFromPgx): what it writes
// through tx, and the events it publishes through PgxPublisher(tx), commit
// together with the inbox's record of msg, or not at all. It must not
// commit or roll back tx. ctx is msg.Context().
type PgxHandlerFunc func(ctx context.Context, tx pgx.Tx, msg *message.Message) error

// StdHandlerFunc is PgxHandlerFunc's twin on a *sql.DB
// (sql.BeginnerFromStdSQL).
type StdHandlerFunc func(ctx context.Context, tx *stdsql.Tx, msg *message.Message) error

// AddPgxHandler adds to r the consumer handler name of topic, read from
// sub, with the consuming side of the service built in: the poison queue,
// inbox.retry and the inbox (Middleware) wrap h inside every middleware of
// the router, and h receives the inbox's transaction. No router middleware
// is needed, so none can be forgotten; a router that has
// router.AddMiddleware(svc.Middleware) all the same gives h the
// transaction that one opened (each message is still recorded once).
//
//	svc.AddPgxHandler(router, "ship-order", "order-placed", sub,
//		func(ctx context.Context, tx pgx.Tx, msg *message.Message) error {
//			_, err := tx.Exec(ctx, "INSERT INTO shipments (order_id) VALUES ($1)", orderID(msg))
//			return err
//		})
//
// An error or a panic of h rolls back all it wrote and published with the
// inbox's record; inbox.retry runs it again on a fresh transaction, and the
// poison queue parks what the retries gave up on.
//
// It returns Watermill's handler (for a handler's own middlewares) and
// refuses, before the router runs, a nil argument, an empty name or topic,
// a name the router already has, a service without inbox.enabled
// (ErrConsumerOff) and a service whose database handle is a *sql.DB (use
// AddStdHandler). It needs the inbox in Transactional mode, the default:
// otherwise the first message stops Run with ErrNoInboxTx.
func (s *Service) AddPgxHandler(r *message.Router, name, topic string, sub message.Subscriber, h PgxHandlerFunc) (*message.Handler, error) {
	call := func(ctx context.Context, tx wsql.Tx, msg *message.Message) error {
		switch t := tx.(type) {
		case *wsql.PgxTx:
			return h(ctx, t.Tx, msg)
		case wsql.PgxTx:
			return h(ctx, t.Tx, msg)
		}
		return fmt.Errorf("%w: AddPgxHandler %q: the inbox's transaction is a %T, not pgx's: use AddStdHandler", ErrNoInboxTx, name, tx)
	}
	return s.addTxHandler("AddPgxHandler", handlePgx, r, name, topic, sub, h == nil, call)
}

// AddStdHandler is AddPgxHandler's twin on a *sql.DB
// (sql.BeginnerFromStdSQL): h receives the inbox's *sql.Tx. It refuses a
// service whose database handle is a pgx pool (use AddPgxHandler).
func (s *Service) AddStdHandler(r *message.Router, name, topic string, sub message.Subscriber, h StdHandlerFunc) (*message.Handler, error) {
	call := func(ctx context.Context, tx wsql.Tx, msg *message.Message) error {
		switch t := tx.(type) {
		case *wsql.StdSQLTx:
			return h(ctx, t.Tx, msg)
		case wsql.StdSQLTx:
			return h(ctx, t.Tx, msg)
		}
		return fmt.Errorf("%w: AddStdHandler %q: the inbox's transaction is a %T, not database/sql's: use AddPgxHandler", ErrNoInboxTx, name, tx)
	}
	return s.addTxHandler("AddStdHandler", handleStd, r, name, topic, sub, h == nil, call)
}

// PgxPublisher returns the outbox publisher over tx, a pgx transaction (the
// one a PgxHandlerFunc receives, or the caller's own): its events commit or
// roll back with tx. It is Publisher(sql.TxFromPgx(tx)).
func (s *Service) PgxPublisher(tx pgx.Tx) (*publisher.Publisher, error) {
	if tx == nil {
		return nil, fmt.Errorf("oncebox: service: PgxPublisher: tx is nil")
	}
	return s.Publisher(wsql.TxFromPgx(tx))
}

// StdPublisher returns the outbox publisher over tx, a database/sql
// transaction (the one a StdHandlerFunc receives, or the caller's own). It
// is Publisher(sql.TxFromStdSQL(tx)).
func (s *Service) StdPublisher(tx *stdsql.Tx) (*publisher.Publisher, error) {
	if tx == nil {
		return nil, fmt.Errorf("oncebox: service: StdPublisher: tx is nil")
	}
	return s.Publisher(wsql.TxFromStdSQL(tx))
}

// handleKind is the kind of transaction a database handle begins.
type handleKind int

const (
	handleUnknown handleKind = iota // a wrapper of the caller's: found out per message
	handlePgx
	handleStd
)

func kindOf(db wsql.Beginner) handleKind {
	switch db.(type) {
	case wsql.PgxBeginner, *wsql.PgxBeginner:
		return handlePgx
	case wsql.StdSQLBeginner, *wsql.StdSQLBeginner:
		return handleStd
	}
	return handleUnknown
}

func (s *Service) addTxHandler(method string, want handleKind, r *message.Router, name, topic string, sub message.Subscriber,
	nilHandler bool, call func(context.Context, wsql.Tx, *message.Message) error) (h *message.Handler, err error) {
	var errs []error
	for _, arg := range []struct {
		unset bool
		what  string
	}{{r == nil, "the router is nil"}, {name == "", "the name is empty"}, {topic == "", "the topic is empty"},
		{sub == nil, "the subscriber is nil"}, {nilHandler, "the handler is nil"}} {
		if arg.unset {
			errs = append(errs, errors.New(arg.what))
		}
	}
	if s.consumer == nil {
		errs = append(errs, ErrConsumerOff)
	}
	if s.consumer != nil && s.inboxMode == middleware.NonTransactional {
		errs = append(errs, errors.New("the inbox is NonTransactional (WithInboxConfig): there is no transaction to give; use router.AddConsumerHandler"))
	}
	switch got := kindOf(s.db); {
	case got == handlePgx && want == handleStd:
		errs = append(errs, errors.New("the service's database handle is a pgx pool (sql.BeginnerFromPgx), whose transactions are pgx.Tx: use AddPgxHandler"))
	case got == handleStd && want == handlePgx:
		errs = append(errs, errors.New("the service's database handle is a *sql.DB (sql.BeginnerFromStdSQL), whose transactions are *sql.Tx: use AddStdHandler"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("oncebox: service: %s %q: %w", method, name, err)
	}

	inner := func(msg *message.Message) ([]*message.Message, error) {
		tx, ok := middleware.TxFromContext(msg.Context())
		if !ok {
			return nil, s.refuse(fmt.Errorf("%w: %s %q: the inbox runs without a transaction (InboxConfig.Mode NonTransactional); "+
				"a handler that takes the transaction needs Transactional, the default", ErrNoInboxTx, method, name))
		}
		if err := call(msg.Context(), tx, msg); err != nil {
			if errors.Is(err, ErrNoInboxTx) {
				return nil, s.refuse(err)
			}
			return nil, err
		}
		return nil, nil
	}
	consume := s.Middleware(inner)
	handle := func(msg *message.Message) error {
		// An inbox outside (router.AddMiddleware(svc.Middleware)) has
		// already recorded msg in its transaction: a second inbox here
		// would record it again in a transaction of its own and wait for
		// the first one's row lock, which is held until this returns.
		if _, ok := middleware.TxFromContext(msg.Context()); ok {
			_, err := inner(msg)
			return err
		}
		_, err := consume(msg)
		return err
	}
	defer func() {
		// Watermill panics on a name it already has; no panic reaches the
		// caller.
		if p := recover(); p != nil {
			var dup message.DuplicateHandlerNameError
			if e, ok := p.(error); ok && errors.As(e, &dup) {
				h, err = nil, fmt.Errorf("oncebox: service: %s %q: the router already has a handler of that name", method, name)
				return
			}
			panic(p)
		}
	}()
	return r.AddConsumerHandler(name, topic, sub, handle), nil
}

// refuse stops the service with err (Run returns it), as a misused inbox
// does, and returns err: a handler that cannot get its transaction would
// fail every message the same way.
func (s *Service) refuse(err error) error {
	select {
	case s.misuse <- err:
	default:
	}
	return err
}
