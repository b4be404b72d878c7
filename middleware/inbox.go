package middleware

import (
	"context"
	stdsql "database/sql"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/cache"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/internal/clock"
)

// InboxMode is how the inbox records an id relative to the handler.
type InboxMode int

const (
	// Transactional (effectively-once, the default): one transaction records
	// the id, runs the handler (which finds the transaction in its context)
	// and commits. A failed handler rolls the id back with its own writes, so
	// the redelivery runs it again. For effects in the same database.
	Transactional InboxMode = iota
	// NonTransactional (at-most-once): the id is recorded and committed, then
	// the handler runs. A failed handler leaves the id: redeliveries are
	// skipped. For effects that cannot be undone, such as an e-mail, where a
	// repeated effect is worse than a missed one.
	NonTransactional
)

func (m InboxMode) String() string {
	switch m {
	case Transactional:
		return "transactional"
	case NonTransactional:
		return "non-transactional"
	}
	return fmt.Sprintf("InboxMode(%d)", int(m))
}

// MaxKeyLength is the longest deduplication key the inbox stores.
const MaxKeyLength = 255

// KeyFunc returns the deduplication key of a message; "" means it has none.
type KeyFunc func(msg *message.Message) string

// KeyFromMetadata reads the key from the metadata entry name.
func KeyFromMetadata(name string) KeyFunc {
	return func(msg *message.Message) string { return msg.Metadata.Get(name) }
}

// KeyFromUUID uses the Watermill message UUID as the key. The outbox keeps
// it across the relay, but other producers may not keep it across retries.
func KeyFromUUID() KeyFunc {
	return func(msg *message.Message) string { return msg.UUID }
}

// KeyEventIDOrUUID is a KeyFunc: the oncebox_event_id header, or, when
// the message has none, its Watermill UUID. For a consumer that receives
// both oncebox events and messages that other producers sent without an
// event id, such as Watermill's forwarder during a migration to oncebox
// (see docs/migrating-from-forwarder.md): each is deduplicated instead of
// refused with oncebox.ErrMissingEventID. A message UUID deduplicates only
// as well as its producer keeps it across retries (the forwarder does).
func KeyEventIDOrUUID(msg *message.Message) string {
	if id := msg.Metadata.Get(oncebox.HeaderEventID); id != "" {
		return id
	}
	return msg.UUID
}

// InboxConfig configures an Inbox. The database is NewInbox's argument.
type InboxConfig struct {
	// Dialect records the ids (its Inbox role). Required.
	Dialect dialects.Dialect
	// Mode is Transactional (default) or NonTransactional.
	Mode InboxMode
	// Key returns a message's deduplication key. Default: the
	// oncebox_event_id header (KeyFromMetadata(oncebox.HeaderEventID)).
	Key KeyFunc
	// Namespace, when not empty, is the namespace of every handler's ids,
	// in place of the handler's name (see HandlerNamespaces for one
	// handler). By default (empty) each router handler has its own
	// namespace, its name (message.HandlerNameFromCtx): two handlers on one
	// topic each handle every event once. A message handled outside a
	// router handler (the subscriber decorator, Process) has no handler
	// name: its namespace is "" unless this is set.
	Namespace string
	// HandlerNamespaces maps a handler's name to the namespace of its ids,
	// and overrides Namespace and the handler's name for that handler; the
	// namespace may be "". For a renamed handler, map its new name to the
	// old one, or it handles again the events the old name handled that
	// are still redelivered. For the ids recorded before namespaces were
	// per handler, map a handler to "".
	HandlerNamespaces map[string]string
	// SharedNamespace records every handler's ids under Namespace, even
	// when it is empty: one event is handled once per service, by whichever
	// handler gets it first (two handlers on one topic split the events).
	// It is how the inbox worked before namespaces were per handler, whose
	// ids are under "": set it, with Namespace "", to keep deduplicating
	// against them after the upgrade. HandlerNamespaces still overrides it.
	SharedNamespace bool
	// Deprecated: each handler has its own namespace by default now; this
	// field has no effect.
	NamespaceByHandler bool
	// AllowMissingKey lets a message without a usable key through to the
	// handler, without deduplication (and, in Transactional mode, still in a
	// transaction). Default false: such a message fails with
	// oncebox.ErrMissingEventID, so that the poison queue parks it.
	AllowMissingKey bool
	// Cache, if set, is asked before the table: a hit acks the message
	// without touching the database. Ids are added only after the handler
	// succeeded and the transaction committed.
	Cache cache.Cache
	// Clock stamps processed_at. Nil means the real clock; tests pass a
	// fake one (see oncebox.Clock).
	Clock oncebox.Clock
	// TxOptions are the options of the inbox's transactions. Default: READ
	// COMMITTED (the dialect's InboxTxOptions: on Oracle, the default
	// isolation, which is READ COMMITTED).
	TxOptions *stdsql.TxOptions
	// Hooks receives what the inbox does. Default: NopInboxHooks.
	Hooks InboxHooks
	// TracerProvider starts the inbox's span, "oncebox.inbox <handler or
	// namespace>" (kind Consumer), for every message Process sees,
	// duplicates included. The span is a child of the trace context stored
	// in the message's metadata (the producer's), and msg.Context() carries
	// it while the handler runs, so that the handler's spans nest under it
	// (see docs/tracing.md). Default: otel.GetTracerProvider(), a no-op until
	// a global provider is set.
	TracerProvider trace.TracerProvider
	// Propagator reads the producer's trace context from the message's
	// metadata. Default: otel.GetTextMapPropagator().
	Propagator propagation.TextMapPropagator
	// OnMisuse is called once, on a goroutine of its own, when a
	// Transactional inbox finds Watermill's Retry inside it (see
	// ErrRetryInsideInbox); err names the fix. The inbox has stopped by
	// then: the message it was found on failed with err, and every later
	// message is held unacknowledged until its context ends (the router
	// closing). Set it to stop the process or the router, for example
	// func(error) { _ = router.Close() }. Default nil: the inbox logs the
	// misuse once, at ERROR, and holds.
	OnMisuse func(err error)
}

// InboxHooks receives what the inbox does, for metrics and tests. Methods
// are called synchronously: return quickly. Embed NopInboxHooks.
type InboxHooks interface {
	// Consumed is called after a new message was handled successfully.
	Consumed(namespace string)
	// Duplicate is called for a message dropped as a duplicate; cached
	// reports a cache hit.
	Duplicate(namespace string, cached bool)
	// Failed is called when the handler failed (or the key was missing).
	Failed(namespace string, err error)
	// CacheMiss is called when the cache did not know the key (the table
	// decides next).
	CacheMiss(namespace string)
	// CacheError is called when the cache failed; the table decided instead.
	CacheError(err error)
}

// NopInboxHooks implements InboxHooks and does nothing.
type NopInboxHooks struct{}

// Consumed implements InboxHooks.
func (NopInboxHooks) Consumed(string) {}

// Duplicate implements InboxHooks.
func (NopInboxHooks) Duplicate(string, bool) {}

// Failed implements InboxHooks.
func (NopInboxHooks) Failed(string, error) {}

// CacheMiss implements InboxHooks.
func (NopInboxHooks) CacheMiss(string) {}

// CacheError implements InboxHooks.
func (NopInboxHooks) CacheError(error) {}

// Inbox drops messages whose key was already processed. Build it with
// NewInbox and add Middleware to a router or handler; use it for the
// subscriber decorator in package subscriber.
type Inbox struct {
	db     wsql.Beginner // a pool: each message's transaction is opened on it
	config InboxConfig
	d      dialects.Inbox // config.Dialect's role
	logger watermill.LoggerAdapter
	tracer trace.Tracer

	mu           sync.Mutex
	warnedAcked  bool
	topicHandler map[string]string // namespace + topic -> first handler seen
	warnedTopic  map[string]bool
	lastCacheLog time.Time

	stopOnce sync.Once
	stopped  atomic.Pointer[error] // the misuse that stopped the inbox
}

// withDefaults returns c with its zero fields set to their defaults.
func (c InboxConfig) withDefaults() InboxConfig {
	if c.Key == nil {
		c.Key = KeyFromMetadata(oncebox.HeaderEventID)
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.TxOptions == nil && c.Dialect != nil {
		c.TxOptions = c.Dialect.InboxTxOptions()
	}
	if c.Hooks == nil {
		c.Hooks = NopInboxHooks{}
	}
	if c.TracerProvider == nil {
		c.TracerProvider = otel.GetTracerProvider()
	}
	if c.Propagator == nil {
		c.Propagator = otel.GetTextMapPropagator()
	}
	return c
}

// Validate checks c as NewInbox does, zero fields taking their defaults;
// the error names every field at fault and wraps oncebox.ErrInvalidConfig.
func (c InboxConfig) Validate() error {
	if err := errors.Join(c.problems()...); err != nil {
		return fmt.Errorf("%w: inbox: %w", oncebox.ErrInvalidConfig, err)
	}
	return nil
}

// problems lists what is wrong with c, one error per field.
func (c InboxConfig) problems() []error {
	var errs []error
	if c.Dialect == nil {
		errs = append(errs, errors.New("InboxConfig.Dialect is nil"))
	}
	if c.Mode != Transactional && c.Mode != NonTransactional {
		errs = append(errs, fmt.Errorf("InboxConfig.Mode %d is neither Transactional nor NonTransactional", int(c.Mode)))
	}
	if len(c.Namespace) > MaxKeyLength || !utf8.ValidString(c.Namespace) {
		errs = append(errs, fmt.Errorf("InboxConfig.Namespace must be valid UTF-8 of at most %d bytes", MaxKeyLength))
	}
	for handler, ns := range c.HandlerNamespaces {
		if handler == "" {
			errs = append(errs, errors.New("InboxConfig.HandlerNamespaces has an empty handler name"))
		}
		if len(ns) > MaxKeyLength || !utf8.ValidString(ns) {
			errs = append(errs, fmt.Errorf("InboxConfig.HandlerNamespaces[%q] must be valid UTF-8 of at most %d bytes", handler, MaxKeyLength))
		}
	}
	return errs
}

// NewInbox returns an Inbox that opens its transactions on db, a pool
// (sql.BeginnerFromPgx, sql.BeginnerFromStdSQL), not a transaction. config
// is completed with its defaults and validated; the error names every
// argument and field at fault and wraps oncebox.ErrInvalidConfig.
func NewInbox(db wsql.Beginner, config InboxConfig, logger watermill.LoggerAdapter) (*Inbox, error) {
	var errs []error
	if db == nil {
		errs = append(errs, errors.New("db is nil"))
	} else if _, isTx := db.(interface{ Commit() error }); isTx {
		errs = append(errs, errors.New("db is a transaction; the inbox opens its own on a pool"))
	}
	config = config.withDefaults()
	if err := errors.Join(append(errs, config.problems()...)...); err != nil {
		return nil, fmt.Errorf("%w: inbox: %w", oncebox.ErrInvalidConfig, err)
	}
	config.HandlerNamespaces = maps.Clone(config.HandlerNamespaces) // the caller's map may change later
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	return &Inbox{
		db:           db,
		config:       config,
		d:            config.Dialect,
		tracer:       config.TracerProvider.Tracer(tracerName),
		logger:       logger.With(watermill.LogFields{"component": "oncebox-inbox", "mode": config.Mode.String()}),
		topicHandler: map[string]string{},
		warnedTopic:  map[string]bool{},
	}, nil
}

// Middleware is the router middleware: it runs h at most once per key (see
// InboxMode for what "once" means on failure). Duplicates are acked and
// produce no messages.
//
// A Transactional inbox with Watermill's Retry inside it stops (see
// InboxConfig.OnMisuse): given Retry as its handler (the inbox added just
// before Retry), it says so here, when the router builds the handler, and
// refuses the first message with ErrRetryInsideInbox without running it;
// with Retry further inside, the handler's first call of TxFromContext (or
// PgxTxFromContext, StdTxFromContext) finds it, and the message's
// transaction rolls back instead of committing. See NewConsumer for the
// one safe order.
func (i *Inbox) Middleware(h message.HandlerFunc) message.HandlerFunc {
	if i.config.Mode == Transactional && isRetry(h) {
		i.logger.Error("The inbox is built around Watermill's Retry: it will refuse the first message and stop", ErrRetryInsideInbox, nil)
		return func(msg *message.Message) ([]*message.Message, error) {
			if err, held := i.held(msg); held {
				i.config.Hooks.Failed(i.namespace(msg.Context()), err)
				return nil, err
			}
			err := i.misused(msg, "Retry as the inbox's inner handler", nil)
			i.config.Hooks.Failed(i.namespace(msg.Context()), err)
			return nil, err
		}
	}
	return func(msg *message.Message) ([]*message.Message, error) {
		i.checkAckedEarly(msg)
		i.checkSharedTopic(msg.Context())
		var produced []*message.Message
		err := i.Process(msg, func(msg *message.Message) error {
			var err error
			produced, err = h(msg)
			return err
		})
		if err != nil {
			return nil, err
		}
		return produced, nil
	}
}

// Process runs handle for msg unless msg's key was already processed, in
// the configured mode. It returns nil for a duplicate, and handle's error
// (or a database error) otherwise. During handle, msg's context carries the
// transaction in Transactional mode (see TxFromContext); it is restored
// afterwards.
//
// Process also starts the inbox's span, a child of the trace context stored
// in msg's metadata, and msg's context carries it while handle runs.
//
// An inbox stopped by a misuse (InboxConfig.OnMisuse) handles nothing: it
// returns only when msg's context ends, with an error.
func (i *Inbox) Process(msg *message.Message, handle func(*message.Message) error) error {
	orig := msg.Context()
	ns := i.namespace(orig)
	if err, held := i.held(msg); held {
		i.config.Hooks.Failed(ns, err)
		return err
	}
	key := i.config.Key(msg)
	span := i.startSpan(msg, ns, key)
	duplicate, cached, err := i.process(msg, ns, key, handle)
	msg.SetContext(orig)
	endInboxSpan(span, duplicate, cached, err)
	return err
}

// process is Process without the span. It reports whether msg was a
// duplicate, and whether the cache said so.
func (i *Inbox) process(msg *message.Message, ns, key string, handle func(*message.Message) error) (duplicate, cached bool, err error) {
	if err := validKey(key); err != nil {
		if !i.config.AllowMissingKey {
			err = fmt.Errorf("%w: message %s: %v", oncebox.ErrMissingEventID, msg.UUID, err)
			i.config.Hooks.Failed(ns, err)
			return false, false, err
		}
		i.logger.Debug("Message without a usable key handled without deduplication", watermill.LogFields{"message_uuid": msg.UUID})
		return false, false, i.runUnkeyed(msg, handle)
	}
	if len(ns) > MaxKeyLength || !utf8.ValidString(ns) {
		// The handler's name is the namespace by default: one too long for
		// the consumer column fails here, naming it, not in the database.
		err := fmt.Errorf("%w: inbox namespace %q (the handler's name, or InboxConfig.Namespace or HandlerNamespaces) "+
			"must be valid UTF-8 of at most %d bytes: map the handler to a shorter one in InboxConfig.HandlerNamespaces",
			oncebox.ErrInvalidConfig, ns, MaxKeyLength)
		i.config.Hooks.Failed(ns, err)
		return false, false, err
	}
	cacheKey := cacheKeyOf(ns, key)
	if i.config.Cache != nil {
		hit, err := i.config.Cache.Contains(msg.Context(), cacheKey)
		switch {
		case err != nil:
			i.cacheFailed(err)
		case hit:
			i.config.Hooks.Duplicate(ns, true)
			return true, true, nil
		default:
			i.config.Hooks.CacheMiss(ns)
		}
	}
	if i.config.Mode == NonTransactional {
		duplicate, err = i.processAtMostOnce(msg, ns, key, handle)
	} else {
		duplicate, err = i.processInTx(msg, ns, key, handle)
	}
	if err != nil {
		i.config.Hooks.Failed(ns, err)
		return false, false, err
	}
	if duplicate {
		i.config.Hooks.Duplicate(ns, false)
	} else {
		i.config.Hooks.Consumed(ns)
	}
	// Committed either way: by us now, or by whoever processed it first.
	i.cacheAdd(msg.Context(), cacheKey)
	return duplicate, false, nil
}

// processInTx records the key and runs handle in one transaction.
func (i *Inbox) processInTx(msg *message.Message, ns, key string, handle func(*message.Message) error) (duplicate bool, err error) {
	ctx := msg.Context()
	tx, err := i.db.BeginTx(ctx, i.config.TxOptions)
	if err != nil {
		return false, fmt.Errorf("oncebox: inbox: begin: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			if rbErr := tx.Rollback(); rbErr != nil && err != nil {
				err = errors.Join(err, fmt.Errorf("oncebox: inbox: rollback: %w", rbErr))
			}
		}
	}()
	isNew, err := i.record(ctx, tx, ns, key)
	if err != nil || !isNew {
		return !isNew && err == nil, err
	}
	scope := &txScope{tx: tx}
	msg.SetContext(context.WithValue(ctx, txKey{}, scope))
	err = safeHandle(handle, msg)
	msg.SetContext(ctx)
	if retry := scope.retryFound(); retry != "" {
		return false, i.misused(msg, retry, err) // rolled back: not one effect, let alone two
	}
	if err != nil {
		return false, err
	}
	committed = true
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("oncebox: inbox: commit: %w", err)
	}
	return false, nil
}

// processAtMostOnce records and commits the key, then runs handle.
func (i *Inbox) processAtMostOnce(msg *message.Message, ns, key string, handle func(*message.Message) error) (duplicate bool, err error) {
	isNew, err := i.record(msg.Context(), i.db, ns, key)
	if err != nil || !isNew {
		return !isNew && err == nil, err
	}
	if err := safeHandle(handle, msg); err != nil {
		i.logger.Error("Handler failed after its id was recorded: at-most-once, redeliveries will be skipped", err,
			watermill.LogFields{"key": key, "namespace": ns, "message_uuid": msg.UUID,
				"event_id": msg.Metadata.Get(oncebox.HeaderEventID), "event_type": msg.Metadata.Get(oncebox.HeaderEventType)})
		return false, err
	}
	return false, nil
}

// runUnkeyed runs handle without deduplication, in a transaction in
// Transactional mode so that TxFromContext still works.
func (i *Inbox) runUnkeyed(msg *message.Message, handle func(*message.Message) error) error {
	if i.config.Mode == NonTransactional {
		return safeHandle(handle, msg)
	}
	ctx := msg.Context()
	tx, err := i.db.BeginTx(ctx, i.config.TxOptions)
	if err != nil {
		return fmt.Errorf("oncebox: inbox: begin: %w", err)
	}
	scope := &txScope{tx: tx}
	msg.SetContext(context.WithValue(ctx, txKey{}, scope))
	err = safeHandle(handle, msg)
	msg.SetContext(ctx)
	if retry := scope.retryFound(); retry != "" {
		return errors.Join(i.misused(msg, retry, err), tx.Rollback())
	}
	if err != nil {
		return errors.Join(err, tx.Rollback())
	}
	return tx.Commit()
}

// record inserts the key unless present and reports whether it was new.
func (i *Inbox) record(ctx context.Context, db wsql.ContextExecutor, ns, key string) (bool, error) {
	isNew, err := i.d.InboxRecord(ctx, db, ns, key, i.config.Clock.Now().UTC())
	if err != nil {
		return false, fmt.Errorf("oncebox: inbox: record %q: %w", key, err)
	}
	return isNew, nil
}

func (i *Inbox) namespace(ctx context.Context) string {
	return NamespaceOf(ctx, i.config.Namespace, i.config.HandlerNamespaces, i.config.SharedNamespace)
}

// NamespaceOf returns the inbox namespace of a message handled with ctx
// (msg.Context()) under the given settings, as InboxConfig documents them:
// handlers[name] for a handler in handlers, else namespace when it is not
// empty or shared is set, else the handler's name (message.HandlerNameFromCtx,
// "" outside a router handler). The batch inbox (package subscriber) uses it
// too.
func NamespaceOf(ctx context.Context, namespace string, handlers map[string]string, shared bool) string {
	handler := message.HandlerNameFromCtx(ctx)
	if ns, ok := handlers[handler]; ok && handler != "" {
		return ns
	}
	if namespace != "" || shared {
		return namespace
	}
	return handler
}

func (i *Inbox) cacheAdd(ctx context.Context, key string) {
	if i.config.Cache == nil {
		return
	}
	if err := i.config.Cache.Add(context.WithoutCancel(ctx), key); err != nil {
		i.cacheFailed(err)
	}
}

// cacheFailed logs a cache error, at most once every ten seconds so that a
// cache outage does not flood the log; the table keeps deciding.
func (i *Inbox) cacheFailed(err error) {
	i.config.Hooks.CacheError(err)
	i.mu.Lock()
	now := time.Now()
	log := now.Sub(i.lastCacheLog) > 10*time.Second
	if log {
		i.lastCacheLog = now
	}
	i.mu.Unlock()
	if log {
		i.logger.Error("Inbox cache failed; deciding with the inbox table", err, nil)
	}
}

// checkAckedEarly warns once when a message reaches the inbox already acked:
// middleware.InstantAck outside the inbox, or a subscriber that acknowledges
// on receipt. A crash during the handler would then lose the message.
func (i *Inbox) checkAckedEarly(msg *message.Message) {
	select {
	case <-msg.Acked():
	default:
		return
	}
	i.mu.Lock()
	warned := i.warnedAcked
	i.warnedAcked = true
	i.mu.Unlock()
	if !warned {
		i.logger.Info("WARNING: message acked before the inbox ran (middleware.InstantAck outside the inbox, or a "+
			"subscriber that acknowledges on receipt): a crash during the handler loses the message. "+
			"Ack only after the handler returned.", watermill.LogFields{
			"handler": message.HandlerNameFromCtx(msg.Context()), "topic": message.SubscribeTopicFromCtx(msg.Context())})
	}
}

// checkSharedTopic warns once per topic when two handlers of one process
// record their ids under one namespace for the same topic (InboxConfig's
// Namespace, SharedNamespace or HandlerNamespaces say so): the second would
// skip every event the first handled. By default each handler has its own
// namespace, and this never warns.
func (i *Inbox) checkSharedTopic(ctx context.Context) {
	handler, topic := message.HandlerNameFromCtx(ctx), message.SubscribeTopicFromCtx(ctx)
	if handler == "" || topic == "" {
		return
	}
	ns := i.namespace(ctx)
	if ns == handler {
		return
	}
	k := ns + "\x00" + topic
	i.mu.Lock()
	first, seen := i.topicHandler[k]
	if !seen {
		i.topicHandler[k] = handler
	}
	warn := seen && first != handler && !i.warnedTopic[k]
	if warn {
		i.warnedTopic[k] = true
	}
	i.mu.Unlock()
	if warn {
		i.logger.Info("WARNING: two handlers share one inbox namespace for one topic: each event is handled by only one of them. "+
			"Leave InboxConfig.Namespace empty and SharedNamespace false (each handler then has its own namespace), "+
			"or map each handler to its own in HandlerNamespaces.",
			watermill.LogFields{"topic": topic, "handlers": first + ", " + handler, "namespace": ns})
	}
}

func validKey(key string) error {
	switch {
	case key == "":
		return errors.New("the key is empty")
	case len(key) > MaxKeyLength:
		return fmt.Errorf("the key is %d bytes long, more than %d", len(key), MaxKeyLength)
	case !utf8.ValidString(key):
		return errors.New("the key is not valid UTF-8")
	}
	for _, r := range key {
		if r == 0 {
			return errors.New("the key contains NUL")
		}
	}
	return nil
}

// safeHandle turns a handler panic into an error: the transaction rolls back
// and the message is nacked, as for any failure.
func safeHandle(handle func(*message.Message) error, msg *message.Message) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("oncebox: handler panicked: %v", r)
		}
	}()
	return handle(msg)
}

type txKey struct{}

// TxFromContext returns the inbox's transaction from a handler's context
// (msg.Context()) in Transactional mode.
//
// It also looks at its caller's stack for Watermill's Retry between the
// caller and the inbox (a few microseconds): a handler that takes the
// transaction from inside Retry would commit a failed attempt's writes
// with the next attempt's, so the inbox then rolls the message back and
// stops (ErrRetryInsideInbox).
func TxFromContext(ctx context.Context) (wsql.Tx, bool) {
	scope, ok := ctx.Value(txKey{}).(*txScope)
	if !ok {
		return nil, false
	}
	scope.check()
	return scope.tx, true
}

// PgxTxFromContext returns the inbox's transaction as a pgx.Tx, when the
// inbox runs on a pgx pool (sql.BeginnerFromPgx).
func PgxTxFromContext(ctx context.Context) (pgx.Tx, bool) {
	tx, ok := TxFromContext(ctx)
	if !ok {
		return nil, false
	}
	switch t := tx.(type) {
	case *wsql.PgxTx:
		return t.Tx, true
	case wsql.PgxTx:
		return t.Tx, true
	}
	return nil, false
}

// StdTxFromContext returns the inbox's transaction as a *sql.Tx, when the
// inbox runs on a *sql.DB (sql.BeginnerFromStdSQL).
func StdTxFromContext(ctx context.Context) (*stdsql.Tx, bool) {
	tx, ok := TxFromContext(ctx)
	if !ok {
		return nil, false
	}
	switch t := tx.(type) {
	case *wsql.StdSQLTx:
		return t.Tx, true
	case wsql.StdSQLTx:
		return t.Tx, true
	}
	return nil, false
}

// cacheKeyOf is the key of (namespace, key) in the cache, which has one key
// space for every namespace. The namespace's length comes first, so no two
// pairs give the same string: "" with "billing/K" and "billing" with "K"
// would both be "billing/K" if the parts were only joined.
func cacheKeyOf(ns, key string) string {
	return strconv.Itoa(len(ns)) + ":" + ns + "/" + key
}
