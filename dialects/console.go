package dialects

import (
	"context"
	"regexp"
	"time"
	"unicode/utf8"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"

	oncebox "github.com/oncebox/watermill-oncebox"
)

// ConsoleInspector is what the operator's console (package console) asks of
// a dialect beyond Inspector and DLQStore: the outbox's load per event type,
// the relay instances and their claims, the DLQ grouped by fingerprint and
// an outbox row's state. Only reads: every status change goes through the
// DLQ store. A dialect that does not implement it gets a console without
// these views. PostgreSQL, MySQL and SQLite implement it.
type ConsoleInspector interface {
	// ConsoleTypes returns, per event type that has rows PENDING,
	// IN_PROCESS or FAILED or rows PROCESSED since processedSince, the
	// counts and the oldest next_retry_at of a PENDING row due at now.
	ConsoleTypes(ctx context.Context, db wsql.ContextExecutor, now, processedSince time.Time) ([]ConsoleType, error)
	// ConsoleInstances returns the relay instances that have a heartbeat
	// or hold claims, with the claims each holds.
	ConsoleInstances(ctx context.Context, db wsql.ContextExecutor) ([]ConsoleInstance, error)
	// ConsoleFingerprints groups the DLQ rows matching f by source, event
	// type, error class (ErrorClass: on PostgreSQL the stored error_class
	// column) and status, largest groups first, at most limit groups.
	ConsoleFingerprints(ctx context.Context, db wsql.ContextExecutor, f DLQFilter, limit int) ([]ConsoleFingerprint, error)
	// ConsoleFingerprintIDs returns up to limit ids, in id order after
	// after (nil: from the first), of the DLQ rows of the group whose
	// status is one of statuses.
	ConsoleFingerprintIDs(ctx context.Context, db wsql.ContextExecutor, g ConsoleGroup, statuses []oncebox.DLQStatus, after *oncebox.EventID, limit int) ([]oncebox.EventID, error)
	// ConsoleOutboxEvent reads the outbox row id; found is false when there
	// is none.
	ConsoleOutboxEvent(ctx context.Context, db wsql.ContextExecutor, id oncebox.EventID) (e ConsoleEvent, found bool, err error)
}

// ConsoleType is one event type's line of the console's overview.
type ConsoleType struct {
	EventType string
	Pending   int64
	InProcess int64
	Failed    int64
	// OldestDue is the oldest next_retry_at of a PENDING row due at the
	// time asked; nil when none is due.
	OldestDue *time.Time
	// Processed counts the rows PROCESSED (updated) since the time asked.
	Processed int64
}

// ConsoleInstance is a relay instance: its heartbeat (nil when it holds
// claims without one yet) and its claims. An ID of "" gathers the claims
// taken by a relay that records no instance.
type ConsoleInstance struct {
	ID          string
	HeartbeatAt *time.Time
	Claims      int64
	OldestClaim *time.Time
}

// ConsoleGroup names a fingerprint: rows of one source and event type whose
// errors have one class.
type ConsoleGroup struct {
	Source     oncebox.DLQSource
	EventType  string
	ErrorClass string
}

// ConsoleFingerprint is one (group, status) of ConsoleFingerprints.
type ConsoleFingerprint struct {
	ConsoleGroup
	Status oncebox.DLQStatus
	Count  int64
	// LastMovedAt is the latest moved_at of the group's rows.
	LastMovedAt time.Time
	// SampleError is one of the rows' error texts, unmasked.
	SampleError string
}

// ConsoleEvent is an outbox row as the console shows it after a retry.
type ConsoleEvent struct {
	Status     oncebox.Status
	RetryCount int
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// The masks of ErrorClass, in the order they apply: PostgreSQL's stored
// error_class column (migration 0005) applies the same four expressions.
var (
	classQuoted = regexp.MustCompile(`"[^"]*"|'[^']*'`)
	classUUID   = regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`)
	classHex    = regexp.MustCompile(`0[xX][0-9a-fA-F]+`)
	classNumber = regexp.MustCompile(`[0-9]+`)
)

// ErrorClassChars is how many characters of an error ErrorClass keeps.
const ErrorClassChars = 1000

// ErrorClass is the class of a DLQ row's last error, the fingerprint the
// console groups rows by: its first ErrorClassChars characters with quoted
// values ("…" or '…') replaced by ?, UUIDs by <id>, hexadecimal numbers
// (0x…) by <hex> and decimal numbers by N, so that "order 42: 'abc' timed
// out" and "order 7: 'x' timed out" have one class. PostgreSQL computes
// the same in SQL, once per row (the stored column error_class); the
// other databases' console statements call this.
func ErrorClass(lastError string) string {
	s := lastError
	if utf8.RuneCountInString(s) > ErrorClassChars {
		n := 0
		for i := range s {
			if n == ErrorClassChars {
				s = s[:i]
				break
			}
			n++
		}
	}
	s = classQuoted.ReplaceAllLiteralString(s, "?")
	s = classUUID.ReplaceAllLiteralString(s, "<id>")
	s = classHex.ReplaceAllLiteralString(s, "<hex>")
	return classNumber.ReplaceAllLiteralString(s, "N")
}
