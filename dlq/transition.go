package dlq

import (
	"errors"
	"fmt"

	"github.com/oncebox/watermill-oncebox"
)

// allowedFrom maps each status an operator may set to the statuses a row may
// have to be changed to it. IN_PROCESS is missing: only the transfer job
// sets it.
var allowedFrom = map[oncebox.DLQStatus][]oncebox.DLQStatus{
	oncebox.DLQStatusToRetry:  {oncebox.DLQStatusMoved, oncebox.DLQStatusResolved},
	oncebox.DLQStatusResolved: {oncebox.DLQStatusMoved, oncebox.DLQStatusToRetry},
	oncebox.DLQStatusMoved:    {oncebox.DLQStatusToRetry, oncebox.DLQStatusResolved},
}

// Allowed reports whether an operator may change a row from status from to
// status to:
//
//	MOVED    → TO_RETRY, RESOLVED
//	TO_RETRY → MOVED (cancel the retry), RESOLVED
//	RESOLVED → TO_RETRY, MOVED (reopen)
//
// Nothing may set IN_PROCESS, and a row IN_PROCESS may not be changed. A
// status set to itself is not a change: the Store treats it as a no-op, and
// Allowed reports false for it.
func Allowed(from, to oncebox.DLQStatus) bool {
	for _, f := range allowedFrom[to] {
		if f == from {
			return true
		}
	}
	return false
}

// Sentinel errors of the Store; test for them with errors.Is.
var (
	// ErrNotFound: no DLQ row has the id.
	ErrNotFound = errors.New("oncebox: dlq: row not found")
	// ErrInProcess: the row is being transferred back to the outbox; it can
	// be neither changed nor deleted.
	ErrInProcess = errors.New("oncebox: dlq: row is IN_PROCESS")
	// ErrInvalidTransition is wrapped by every *TransitionError.
	ErrInvalidTransition = errors.New("oncebox: dlq: status change not allowed")
	// ErrTooManyIDs: a Many call was given more than MaxIDs ids.
	ErrTooManyIDs = errors.New("oncebox: dlq: too many ids")
)

// TransitionError is a refused status change of one row.
type TransitionError struct {
	// ID is the row; zero for a target no row may take (IN_PROCESS).
	ID oncebox.EventID
	// From is the row's status, "" for a refused target.
	From oncebox.DLQStatus
	// To is the status asked for.
	To oncebox.DLQStatus
}

// Error names the row and both statuses.
func (e *TransitionError) Error() string {
	if e.From == "" {
		return fmt.Sprintf("oncebox: dlq: status %s cannot be set: only the transfer job sets IN_PROCESS", e.To)
	}
	return fmt.Sprintf("oncebox: dlq: row %s: status change from %s to %s not allowed", e.ID, e.From, e.To)
}

// Unwrap returns ErrInvalidTransition.
func (e *TransitionError) Unwrap() error { return ErrInvalidTransition }

// checkTarget validates a status asked for and returns the statuses a row
// may have to take it.
func checkTarget(to oncebox.DLQStatus) ([]oncebox.DLQStatus, error) {
	if !knownStatus(to) {
		return nil, fmt.Errorf("%w: dlq: unknown status %q", oncebox.ErrInvalidInput, to)
	}
	from, ok := allowedFrom[to]
	if !ok {
		return nil, &TransitionError{To: to}
	}
	return from, nil
}

func knownStatus(s oncebox.DLQStatus) bool {
	switch s {
	case oncebox.DLQStatusMoved, oncebox.DLQStatusToRetry, oncebox.DLQStatusInProcess, oncebox.DLQStatusResolved:
		return true
	}
	return false
}
