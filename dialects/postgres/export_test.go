package postgres

import (
	"time"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
)

func (d *Dialect) DLQTransferToOutbox(now time.Time, limit int) dialects.Query {
	return d.dLQTransferToOutbox(now, limit)
}

func (d *Dialect) EventsClaim(p dialects.ClaimParams) dialects.Query { return d.eventsClaim(p) }

func (d *Dialect) EventsMarkProcessed(token oncebox.EventID, ids []oncebox.EventID, now time.Time) dialects.Query {
	return d.eventsMarkProcessed(token, ids, now)
}

func (d *Dialect) EventsMoveToDLQ(now time.Time, limit int) dialects.Query {
	return d.eventsMoveToDLQ(now, limit)
}

func (d *Dialect) InboxInsertMany(consumer string, ids []string, now time.Time) dialects.Query {
	return d.inboxInsertMany(consumer, ids, now)
}

func (d *Dialect) LeaseAcquire(l dialects.Lease) dialects.Query { return d.leaseAcquire(l) }

func (d *Dialect) EventsMarkProcessedClaims(claims []dialects.ClaimIDs, now time.Time) dialects.Query {
	return d.eventsMarkProcessedClaims(claims, now)
}
