package dlq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/internal/clock"
	"github.com/oncebox/watermill-oncebox/internal/metadata"
)

// Config configures a Store.
type Config struct {
	// Dialect runs the statements (through its dialects.DLQStore methods).
	// Required.
	Dialect dialects.Dialect
	// Clock stamps updated_at on status changes. Nil means the real clock;
	// tests pass a fake one (see oncebox.Clock).
	Clock oncebox.Clock
	// OnAction, if set, is called after every status change or delete that
	// changed at least one row, with the action (ActionRetry, ActionResolve,
	// ActionReopen, ActionDelete) and the number of rows changed. No-ops and
	// failures are not reported. It is called synchronously by the Store
	// method: return quickly. The REST handler and the CLI go through a
	// Store, so both are covered.
	OnAction func(action string, n int)
}

// The actions reported to Config.OnAction.
const (
	// ActionRetry: rows set to TO_RETRY.
	ActionRetry = "retry"
	// ActionResolve: rows set to RESOLVED.
	ActionResolve = "resolve"
	// ActionReopen: rows set back to MOVED.
	ActionReopen = "reopen"
	// ActionDelete: rows deleted.
	ActionDelete = "delete"
)

// actionOf returns the action of a change to status to.
func actionOf(to oncebox.DLQStatus) string {
	switch to {
	case oncebox.DLQStatusToRetry:
		return ActionRetry
	case oncebox.DLQStatusResolved:
		return ActionResolve
	default:
		return ActionReopen
	}
}

// Store reads and changes the rows of the DLQ table. Every method is one
// statement (a single-row change that is refused adds a read to tell why),
// runs on the pool it was given and is safe for concurrent use.
type Store struct {
	db       wsql.ContextExecutor
	d        dialects.DLQStore
	dialect  dialects.Dialect
	clock    oncebox.Clock
	onAction func(action string, n int)
}

// report calls the OnAction hook, if any, for n > 0 rows.
func (s *Store) report(action string, n int) {
	if s.onAction != nil && n > 0 {
		s.onAction(action, n)
	}
}

// withDefaults returns c with its zero fields set to their defaults.
func (c Config) withDefaults() Config {
	c.Clock = clock.Or(c.Clock)
	return c
}

// Validate checks config as NewStore does, zero fields taking their
// defaults; the error names the field at fault and wraps
// oncebox.ErrInvalidConfig.
func (c Config) Validate() error {
	if err := errors.Join(c.withDefaults().problems()...); err != nil {
		return fmt.Errorf("%w: dlq: %w", oncebox.ErrInvalidConfig, err)
	}
	return nil
}

// problems lists what is wrong with c, one error per field.
func (c Config) problems() []error {
	if c.Dialect == nil {
		return []error{errors.New("Config.Dialect is nil")}
	}
	return nil
}

// NewStore returns a Store over db, a pool (sql.BeginnerFromPgx,
// sql.BeginnerFromStdSQL) or a transaction. Errors name the missing field.
func NewStore(db wsql.ContextExecutor, config Config) (*Store, error) {
	var errs []error
	if db == nil {
		errs = append(errs, errors.New("db is nil"))
	}
	config = config.withDefaults()
	errs = append(errs, config.problems()...)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: dlq: %w", oncebox.ErrInvalidConfig, err)
	}
	return &Store{db: db, d: config.Dialect, dialect: config.Dialect, clock: config.Clock, onAction: config.OnAction}, nil
}

// Row is one row of the DLQ table. Times are UTC.
type Row struct {
	// ID is the DLQ row's own id: the event id for a publisher row; for a
	// consumer row an id derived from (handler, event id), or from
	// (handler, message UUID) for a message without an event id. Either
	// way an event retried and parked again keeps its id.
	ID oncebox.EventID
	// EventID is the event's oncebox id, nil for a consumed message without
	// a usable one.
	EventID *oncebox.EventID
	// Source tells an outbox event that exhausted its retries (publisher)
	// from a message whose handler failed (consumer).
	Source oncebox.DLQSource
	// HandlerName is the handler that failed (consumer rows), else "".
	HandlerName string
	EventType   string
	// Topic is the destination (publisher rows) or the consumed topic
	// (consumer rows).
	Topic string
	// Key is the ordering key, "" when none.
	Key         string
	MessageUUID string
	// Payload is the whole payload from Get; from List, at most its first
	// ListPayloadBytes (PayloadTruncated tells).
	Payload []byte
	// PayloadSize is the whole payload's size in bytes.
	PayloadSize int
	// PayloadTruncated is true when Payload is only the first
	// ListPayloadBytes of the payload (List only): Get reads it whole.
	PayloadTruncated bool
	Metadata         map[string]string
	Status           oncebox.DLQStatus
	// RetryCount is the attempts made before the move.
	RetryCount int
	// LastError is the last send or handler error, "" when none.
	LastError     string
	CreatedAt     time.Time
	FirstFailedAt *time.Time
	LastFailedAt  *time.Time
	MovedAt       time.Time
	UpdatedAt     time.Time
}

// Cursor returns the position of r in a listing.
func (r Row) Cursor() Cursor { return Cursor{MovedAt: r.MovedAt, ID: r.ID} }

func fromRecord(rec *dialects.DLQRecord) (Row, error) {
	r := Row{
		ID: rec.ID, EventID: rec.EventID, Source: oncebox.DLQSource(rec.Source), HandlerName: rec.HandlerName,
		EventType: rec.EventType, Topic: rec.Topic, MessageUUID: rec.MessageUUID, Payload: rec.Payload,
		Status: oncebox.DLQStatus(rec.Status), RetryCount: rec.RetryCount, CreatedAt: rec.CreatedAt.UTC(),
		FirstFailedAt: utcPtr(rec.FirstFailedAt), LastFailedAt: utcPtr(rec.LastFailedAt),
		MovedAt: rec.MovedAt.UTC(), UpdatedAt: rec.UpdatedAt.UTC(),
	}
	if rec.Key != nil {
		r.Key = *rec.Key
	}
	if rec.LastError != nil {
		r.LastError = *rec.LastError
	}
	if r.Payload == nil {
		r.Payload = []byte{}
	}
	r.PayloadSize = len(r.Payload)
	r.Metadata = map[string]string{}
	if len(rec.Metadata) > 0 {
		if err := json.Unmarshal(rec.Metadata, &r.Metadata); err != nil {
			return Row{}, fmt.Errorf("oncebox: dlq: row %s: metadata is not a JSON object of strings: %w", rec.ID, err)
		}
		if r.Metadata == nil { // the JSON null
			r.Metadata = map[string]string{}
		}
	}
	// An outbox event's metadata holds neither its id nor its type (the
	// outbox row keeps them in columns, and so does this one): the row
	// shows them as the relay sent them (issue 28: narrower rows).
	if r.Source == oncebox.DLQSourcePublisher && r.EventID != nil {
		r.Metadata = metadata.WithColumns(r.Metadata, *r.EventID, r.EventType)
	}
	return r, nil
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// ListPayloadBytes is the most payload bytes a row of List carries (4 KiB):
// a page is built in memory, so 1,000 rows of megabyte payloads must not be
// read whole. Row.PayloadTruncated and Row.PayloadSize tell a cut payload;
// Get reads it whole.
const ListPayloadBytes = dialects.DLQListPayloadBytes

// listRow is rec as a Row of List: its payload is at most ListPayloadBytes
// (the dialect's DLQList cuts it), PayloadSize its whole size.
func listRow(rec *dialects.DLQRecord) (Row, error) {
	r, err := fromRecord(rec)
	if err != nil {
		return Row{}, err
	}
	r.PayloadSize = int(rec.PayloadSize)
	r.PayloadTruncated = r.PayloadSize > len(r.Payload)
	return r, nil
}

// Get returns the row with id, or an error wrapping ErrNotFound.
func (s *Store) Get(ctx context.Context, id oncebox.EventID) (Row, error) {
	rec, found, err := s.d.DLQGet(ctx, s.db, id)
	if err != nil {
		return Row{}, fmt.Errorf("oncebox: dlq: get %s: %w", id, err)
	}
	if !found {
		return Row{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	r, err := fromRecord(&rec)
	if err != nil {
		return Row{}, fmt.Errorf("oncebox: dlq: get %s: %w", id, err)
	}
	return r, nil
}

// List returns one page of the rows matching f, in (moved_at, id) order, and
// the cursor of the next page: nil when this page is the last. Each row
// carries at most ListPayloadBytes of its payload. Keyset
// pagination: a row moved meanwhile before the cursor is not seen, none is
// seen twice.
func (s *Store) List(ctx context.Context, f Filter, page Page) ([]Row, *Cursor, error) {
	if err := f.Validate(); err != nil {
		return nil, nil, err
	}
	limit, err := page.limit()
	if err != nil {
		return nil, nil, err
	}
	var after *dialects.DLQKey
	if page.After != nil {
		after = &dialects.DLQKey{MovedAt: page.After.MovedAt, ID: page.After.ID}
	}
	recs, err := s.d.DLQList(ctx, s.db, f.dialect(), after, limit+1)
	if err != nil {
		return nil, nil, fmt.Errorf("oncebox: dlq: list: %w", err)
	}
	var rows []Row
	for i := range recs {
		r, err := listRow(&recs[i])
		if err != nil {
			return nil, nil, fmt.Errorf("oncebox: dlq: list: %w", err)
		}
		rows = append(rows, r)
	}
	if len(rows) <= limit {
		return rows, nil, nil
	}
	rows = rows[:limit]
	next := rows[limit-1].Cursor()
	return rows, &next, nil
}

// Count returns the number of rows matching f.
func (s *Store) Count(ctx context.Context, f Filter) (int, error) {
	if err := f.Validate(); err != nil {
		return 0, err
	}
	n, err := s.d.DLQCount(ctx, s.db, f.dialect())
	if err != nil {
		return 0, fmt.Errorf("oncebox: dlq: count: %w", err)
	}
	return n, nil
}

// maxRaces bounds the retries of a single-row change whose row changed
// status between the statement and the read that explains a refusal.
const maxRaces = 3

// SetStatus changes the status of row id to to, if [Allowed]. Setting the
// status the row has is a no-op and returns nil. Errors: ErrNotFound,
// ErrInProcess (the transfer job holds the row), *TransitionError (wraps
// ErrInvalidTransition) for a change not allowed or a target of IN_PROCESS,
// oncebox.ErrInvalidInput for an unknown status. The check is made in the
// statement, so a concurrent transfer or change is never overwritten.
func (s *Store) SetStatus(ctx context.Context, id oncebox.EventID, to oncebox.DLQStatus) error {
	from, err := checkTarget(to)
	if err != nil {
		return err
	}
	for range maxRaces {
		n, err := s.change(ctx, to, func(ctx context.Context, db wsql.ContextExecutor) (int64, error) {
			changed, err := s.d.DLQSetStatus(ctx, db, id, to, from, s.clock.Now().UTC())
			if changed {
				return 1, err
			}
			return 0, err
		})
		changed := n > 0
		if err != nil {
			return fmt.Errorf("oncebox: dlq: set %s to %s: %w", id, to, err)
		}
		if changed {
			s.report(actionOf(to), 1)
			return nil
		}
		cur, found, err := s.d.DLQGetStatus(ctx, s.db, id)
		switch {
		case err != nil:
			return fmt.Errorf("oncebox: dlq: set %s to %s: %w", id, to, err)
		case !found:
			return fmt.Errorf("%w: %s", ErrNotFound, id)
		case cur == to:
			return nil
		case cur == oncebox.DLQStatusInProcess:
			return fmt.Errorf("%w: row %s cannot be set to %s", ErrInProcess, id, to)
		case !Allowed(cur, to):
			return &TransitionError{ID: id, From: cur, To: to}
		}
		// The row changed to an allowed status meanwhile: try again.
	}
	return fmt.Errorf("oncebox: dlq: set %s to %s: the row kept changing, try again", id, to)
}

// SetStatusMany changes the rows of ids to status to and returns how many
// changed. At most MaxIDs ids (else an error wrapping ErrTooManyIDs that
// names the count). The rule is applied in the statement (WHERE status IN
// the statuses [Allowed] to change to to): rows not in such a status (IN_PROCESS,
// already at to, or whose change is not allowed) and ids that do not exist
// are skipped and counted as not changed.
func (s *Store) SetStatusMany(ctx context.Context, ids []oncebox.EventID, to oncebox.DLQStatus) (int, error) {
	from, err := checkTarget(to)
	if err != nil {
		return 0, err
	}
	if err := checkIDs(ids); err != nil || len(ids) == 0 {
		return 0, err
	}
	n, err := s.change(ctx, to, func(ctx context.Context, db wsql.ContextExecutor) (int64, error) {
		return s.d.DLQSetStatusMany(ctx, db, ids, to, from, s.clock.Now().UTC())
	})
	if err != nil {
		return 0, fmt.Errorf("oncebox: dlq: set %d rows to %s: %w", len(ids), to, err)
	}
	s.report(actionOf(to), int(n))
	return int(n), nil
}

// SetStatusWhere changes the rows matching f to status to and returns how
// many changed; the zero Filter matches every row. Rows not in a status
// [Allowed] to change to to are skipped and counted as not changed, as in
// SetStatusMany. One statement: it locks every row it changes until it ends.
func (s *Store) SetStatusWhere(ctx context.Context, f Filter, to oncebox.DLQStatus) (int, error) {
	from, err := checkTarget(to)
	if err != nil {
		return 0, err
	}
	if err := f.Validate(); err != nil {
		return 0, err
	}
	n, err := s.change(ctx, to, func(ctx context.Context, db wsql.ContextExecutor) (int64, error) {
		return s.d.DLQSetStatusWhere(ctx, db, f.dialect(), to, from, s.clock.Now().UTC())
	})
	if err != nil {
		return 0, fmt.Errorf("oncebox: dlq: set rows to %s: %w", to, err)
	}
	s.report(actionOf(to), int(n))
	return int(n), nil
}

// Delete deletes row id. Errors: ErrNotFound, ErrInProcess.
func (s *Store) Delete(ctx context.Context, id oncebox.EventID) error {
	for range maxRaces {
		deleted, err := s.d.DLQDelete(ctx, s.db, id)
		if err != nil {
			return fmt.Errorf("oncebox: dlq: delete %s: %w", id, err)
		}
		if deleted {
			s.report(ActionDelete, 1)
			return nil
		}
		cur, found, err := s.d.DLQGetStatus(ctx, s.db, id)
		switch {
		case err != nil:
			return fmt.Errorf("oncebox: dlq: delete %s: %w", id, err)
		case !found:
			return fmt.Errorf("%w: %s", ErrNotFound, id)
		case cur == oncebox.DLQStatusInProcess:
			return fmt.Errorf("%w: row %s cannot be deleted", ErrInProcess, id)
		}
	}
	return fmt.Errorf("oncebox: dlq: delete %s: the row kept changing, try again", id)
}

// DeleteMany deletes the rows of ids and returns how many it deleted. At
// most MaxIDs ids (else ErrTooManyIDs). Rows IN_PROCESS and ids that do not
// exist are skipped and counted as not deleted.
func (s *Store) DeleteMany(ctx context.Context, ids []oncebox.EventID) (int, error) {
	if err := checkIDs(ids); err != nil || len(ids) == 0 {
		return 0, err
	}
	n, err := s.d.DLQDeleteMany(ctx, s.db, ids)
	if err != nil {
		return 0, fmt.Errorf("oncebox: dlq: delete %d rows: %w", len(ids), err)
	}
	s.report(ActionDelete, int(n))
	return int(n), nil
}

// DeleteWhere deletes the rows matching f and returns how many it deleted;
// the zero Filter matches every row. Rows IN_PROCESS are skipped.
func (s *Store) DeleteWhere(ctx context.Context, f Filter) (int, error) {
	if err := f.Validate(); err != nil {
		return 0, err
	}
	n, err := s.d.DLQDeleteWhere(ctx, s.db, f.dialect())
	if err != nil {
		return 0, fmt.Errorf("oncebox: dlq: delete rows: %w", err)
	}
	s.report(ActionDelete, int(n))
	return int(n), nil
}

func checkIDs(ids []oncebox.EventID) error {
	if len(ids) > MaxIDs {
		return fmt.Errorf("%w: %d ids, at most %d per call", ErrTooManyIDs, len(ids), MaxIDs)
	}
	return nil
}
