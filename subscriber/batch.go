package subscriber

import (
	"context"
	"fmt"
	"unicode/utf8"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/internal/clock"
	"github.com/oncebox/watermill-oncebox/middleware"
)

// BatchInbox records batches of ids in the inbox table. Batch consumes go
// straight to the table, never through the cache: the table alone decides
// what is new.
type BatchInbox struct {
	// Dialect builds the SQL. Required.
	Dialect dialects.Dialect
	// Namespace, HandlerNamespaces and SharedNamespace choose the
	// namespace of the ids as middleware.InboxConfig's do: by default the
	// name of the router handler in the ctx given to FilterNew or
	// RecordNew (pass msg.Context() from inside a handler), and "" outside
	// a router handler. See middleware.NamespaceOf.
	Namespace         string
	HandlerNamespaces map[string]string
	SharedNamespace   bool
	// Key returns a message's key. Default: the oncebox_event_id header.
	Key middleware.KeyFunc
	// Clock stamps processed_at. Nil means the real clock; tests pass a
	// fake one (see oncebox.Clock).
	Clock oncebox.Clock
}

// FilterNew records the keys of msgs in one statement inside tx, the
// caller's transaction, and returns the messages whose key was new, in their
// order; a key repeated within the batch keeps its first message. Handle the
// returned messages in the same transaction and commit: a partly redelivered
// batch is then handled right with no code in the handler, and a rollback
// forgets the ids with the work. A message without a usable key fails the
// whole call with oncebox.ErrMissingEventID, naming it; nothing is recorded.
func (b BatchInbox) FilterNew(ctx context.Context, tx wsql.ContextExecutor, msgs []*message.Message) ([]*message.Message, error) {
	key := b.Key
	if key == nil {
		key = middleware.KeyFromMetadata(oncebox.HeaderEventID)
	}
	keys := make([]string, len(msgs))
	for i, m := range msgs {
		if m == nil {
			return nil, fmt.Errorf("%w: batch message %d is nil", oncebox.ErrInvalidInput, i)
		}
		k := key(m)
		if k == "" || len(k) > middleware.MaxKeyLength {
			return nil, fmt.Errorf("%w: batch message %d (uuid %s) has no usable key", oncebox.ErrMissingEventID, i, m.UUID)
		}
		keys[i] = k
	}
	fresh, err := b.RecordNew(ctx, tx, keys)
	if err != nil {
		return nil, err
	}
	out := make([]*message.Message, 0, len(fresh))
	for i, m := range msgs {
		if fresh[keys[i]] {
			out = append(out, m)
			delete(fresh, keys[i]) // a repeated key keeps its first message
		}
	}
	return out, nil
}

// RecordNew records keys (no repeats) inside tx (one statement on
// PostgreSQL) and returns the set of
// those that were new.
func (b BatchInbox) RecordNew(ctx context.Context, tx wsql.ContextExecutor, keys []string) (map[string]bool, error) {
	if b.Dialect == nil {
		return nil, fmt.Errorf("%w: BatchInbox.Dialect is nil", oncebox.ErrInvalidConfig)
	}
	if tx == nil {
		return nil, fmt.Errorf("%w: batch inbox", oncebox.ErrNoTransaction)
	}
	fresh := make(map[string]bool, len(keys))
	if len(keys) == 0 {
		return fresh, nil
	}
	unique := make([]string, 0, len(keys))
	seen := make(map[string]bool, len(keys))
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			unique = append(unique, k)
		}
	}
	ns := middleware.NamespaceOf(ctx, b.Namespace, b.HandlerNamespaces, b.SharedNamespace)
	if len(ns) > middleware.MaxKeyLength || !utf8.ValidString(ns) {
		return nil, fmt.Errorf("%w: batch inbox: namespace %q (the handler's name, or Namespace or HandlerNamespaces) "+
			"must be valid UTF-8 of at most %d bytes", oncebox.ErrInvalidConfig, ns, middleware.MaxKeyLength)
	}
	got, err := b.Dialect.InboxRecordMany(ctx, tx, ns, unique, clock.Or(b.Clock).Now().UTC())
	if err != nil {
		return nil, fmt.Errorf("oncebox: batch inbox: record %d keys under namespace %q: %w", len(keys), ns, err)
	}
	for _, k := range got {
		fresh[k] = true
	}
	return fresh, nil
}
