package mysql

import (
	"context"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

func (d *Dialect) DLQDeleteID(id oncebox.EventID) dialects.Query { return d.dlqDeleteID(id) }

func (d *Dialect) DLQToRetryProbe() dialects.Query { return d.dlqToRetryProbe() }

func (d *Dialect) DLQTransferInsert(rows []dialects.EventRow, now time.Time) dialects.Query {
	return d.dlqTransferInsert(rows, now)
}

func (d *Dialect) DLQTransferSelect(limit int) dialects.Query { return d.dlqTransferSelect(limit) }

func (d *Dialect) EventsClaimCandidates(p dialects.ClaimParams) dialects.Query {
	return d.eventsClaimCandidates(p)
}

func (d *Dialect) EventsClaimWalk(p dialects.ClaimParams) dialects.Query { return d.eventsClaimWalk(p) }

func (d *Dialect) EventsClaimLockCandidates(p dialects.ClaimParams, ids []oncebox.EventID) dialects.Query {
	return d.eventsClaimLockCandidates(p, ids)
}

func (d *Dialect) EventsClaimProbe(p dialects.ClaimParams) dialects.Query {
	return d.eventsClaimProbe(p)
}

func (d *Dialect) EventsClaimSelect(p dialects.ClaimParams) dialects.Query {
	return d.eventsClaimSelect(p)
}

func (d *Dialect) EventsClaimUpdate(p dialects.ClaimParams, ids []oncebox.EventID) dialects.Query {
	return d.eventsClaimUpdate(p, ids)
}

func (d *Dialect) EventsCopyToDLQ(ids []oncebox.EventID, now time.Time) dialects.Query {
	return d.eventsCopyToDLQ(ids, now)
}

func (d *Dialect) EventsDelete(id oncebox.EventID) dialects.Query { return d.eventsDelete(id) }

func (d *Dialect) EventsFailedProbe() dialects.Query { return d.eventsFailedProbe() }

func (d *Dialect) EventsInProcessProbe() dialects.Query { return d.eventsInProcessProbe() }

func (d *Dialect) EventsLockClaimed(token oncebox.EventID, ids []oncebox.EventID) dialects.Query {
	return d.eventsLockClaimed(token, ids)
}

func (d *Dialect) EventsMarkProcessed(token oncebox.EventID, ids []oncebox.EventID, now time.Time) dialects.Query {
	return d.eventsMarkProcessed(token, ids, now)
}

func (d *Dialect) EventsMoveSelect(limit int) dialects.Query { return d.eventsMoveSelect(limit) }

func (d *Dialect) InboxInsertMany(consumer string, ids []string, now time.Time) dialects.Query {
	return d.inboxInsertMany(consumer, ids, now)
}

func (d *Dialect) InboxSelectPresent(consumer string, ids []string) dialects.Query {
	return d.inboxSelectPresent(consumer, ids)
}

func (d *Dialect) LeaseInsert(l dialects.Lease) dialects.Query { return d.leaseInsert(l) }

func (d *Dialect) LeaseTake(l dialects.Lease) dialects.Query { return d.leaseTake(l) }

// The DLQ store's builders (dlqstore.go), for the golden tests.

func (d *Dialect) DLQGetSQL(id oncebox.EventID) dialects.Query { return d.dlqGet(id) }

func (d *Dialect) DLQGetStatusSQL(id oncebox.EventID) dialects.Query { return d.dlqGetStatus(id) }

func (d *Dialect) DLQListSQL(f dialects.DLQFilter, after *dialects.DLQKey, limit int) dialects.Query {
	return d.dlqList(f, after, limit)
}

func (d *Dialect) DLQCountSQL(f dialects.DLQFilter) dialects.Query { return d.dlqCount(f) }

func (d *Dialect) DLQSetStatusSQL(id oncebox.EventID, to oncebox.DLQStatus, from []oncebox.DLQStatus, now time.Time) dialects.Query {
	return d.dlqSetStatus(id, to, from, now)
}

func (d *Dialect) DLQSetStatusManySQL(ids []oncebox.EventID, to oncebox.DLQStatus, from []oncebox.DLQStatus, now time.Time) dialects.Query {
	return d.dlqSetStatusMany(ids, to, from, now)
}

func (d *Dialect) DLQSetStatusWhereSQL(f dialects.DLQFilter, to oncebox.DLQStatus, from []oncebox.DLQStatus, now time.Time) dialects.Query {
	return d.dlqSetStatusWhere(f, to, from, now)
}

func (d *Dialect) DLQDeleteSQL(id oncebox.EventID) dialects.Query { return d.dlqDelete(id) }

func (d *Dialect) DLQDeleteManySQL(ids []oncebox.EventID) dialects.Query { return d.dlqDeleteMany(ids) }

func (d *Dialect) DLQDeleteWhereSQL(f dialects.DLQFilter) dialects.Query { return d.dlqDeleteWhere(f) }

// The inbox's, the poison queue's and the publisher's statement builders,
// for the golden tests.

func (d *Dialect) EventsInsertSQL(rows []dialects.EventRow) dialects.Query {
	return d.eventsInsert(rows)
}

func (d *Dialect) MaxRowsPerInsert() int { return d.maxRowsPerInsert() }

func (d *Dialect) InboxInsertSQL(consumer, id string, now time.Time) dialects.Query {
	return d.inboxInsert(consumer, id, now)
}

func (d *Dialect) InboxDeleteBeforeSQL(cutoff time.Time, limit int) dialects.Query {
	return d.inboxDeleteBefore(cutoff, limit)
}

func (d *Dialect) DLQUpsertConsumerSQL(r dialects.DLQRow) dialects.Query {
	return d.dlqUpsertConsumer(r)
}

func (d *Dialect) DLQConsumerPayloadSQL(eventID oncebox.EventID, handler string) dialects.Query {
	return d.dlqConsumerPayload(eventID, handler)
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

// RelayExec runs q as the relay runs its single statements (Relay.Single:
// in a READ COMMITTED transaction of its own, a deadlock victim run again),
// for the live tests.
func RelayExec(ctx context.Context, db wsql.Beginner, q dialects.Query) (int64, error) {
	return relayTx.Exec(ctx, db, q)
}

// NextDueSQL exposes NextDue's statement to the golden tests.
func (d *Dialect) NextDueSQL(eventType string, now time.Time) dialects.Query {
	return d.eventsNextDue(eventType, now)
}

// ConsoleStatements are the console's statement builders (console.go),
// for the golden tests.
func (d *Dialect) ConsoleStatements() sqlkit.ConsoleStatements { return d.console().S }
