package postgres

import (
	"time"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
)

func (d *Dialect) DLQTransferToOutbox(now time.Time, limit int) dialects.Query {
	return d.dlqTransferToOutbox(now, limit)
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

// The relay's statements (sqlkit.Relay's builders and RecoverStale's),
// under the names the golden tests give them.

func (d *Dialect) EventsDueTypes(now time.Time, after string, limit int) dialects.Query {
	return d.eventsDueTypes(now, after, limit)
}

func (d *Dialect) EventsMarkFailed(token oncebox.EventID, rows []dialects.FailedEvent, now time.Time) dialects.Query {
	return d.eventsMarkFailed(token, rows, now)
}

func (d *Dialect) EventsRelease(token oncebox.EventID, ids []oncebox.EventID, now time.Time) dialects.Query {
	return d.eventsRelease(token, ids, now)
}

func (d *Dialect) EventsRecover(cutoff, now time.Time, limit int) dialects.Query {
	return d.eventsRecover(cutoff, now, limit)
}

func (d *Dialect) EventsDeleteProcessed(cutoff time.Time, limit int) dialects.Query {
	return d.eventsDeleteProcessed(cutoff, limit)
}

func (d *Dialect) LeaseRelease(l dialects.Lease) dialects.Query { return d.leaseRelease(l) }

func (d *Dialect) DLQDeleteResolved(cutoff time.Time, limit int) dialects.Query {
	return d.dlqDeleteResolved(cutoff, limit)
}

func (d *Dialect) InstanceHeartbeat(instance string, at time.Time) dialects.Query {
	return d.instanceHeartbeat(instance, at)
}

func (d *Dialect) InstanceEnd(instance string) dialects.Query { return d.instanceEnd(instance) }

func (d *Dialect) InstancesDeleteBefore(cutoff time.Time) dialects.Query {
	return d.instancesDeleteBefore(cutoff)
}

func (d *Dialect) EventsRecoverStale(p dialects.RecoverParams) dialects.Query {
	return d.eventsRecoverStale(p)
}

func (d *Dialect) DatabaseNow() dialects.Query { return d.databaseNow() }
