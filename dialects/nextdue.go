package dialects

import (
	"context"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
)

// NextDueReader is the part of a Relay that tells the relay when a type's
// next row comes due: the earliest next_retry_at after a time (the
// relay's last claim) among its PENDING rows (a retry's, or a delayed event's: docs/delay.md). The relay
// cuts an idle sleep there, so that such a row is claimed at its time and
// not at the end of a sleep of up to max-fixed-delay. Every dialect of this
// module implements it; a Relay that does not is polled at its pace.
type NextDueReader interface {
	// NextDue returns the earliest next_retry_at after after of the
	// PENDING rows of eventType, and false when it has none. It is one
	// read of the first entry of a range of the claim index; it takes no
	// lock.
	NextDue(ctx context.Context, db wsql.ContextExecutor, eventType string, after time.Time) (at time.Time, ok bool, err error)
}
