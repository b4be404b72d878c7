package sqlite

import (
	"time"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// The statement builders, for the golden tests (package sqlite_test),
// named after what they build.

func (d *Dialect) EventsClaimSQL(p dialects.ClaimParams) dialects.Query { return d.eventsClaim(p) }

func (d *Dialect) EventsClaimProbeSQL(p dialects.ClaimParams) dialects.Query {
	return d.eventsClaimProbe(p)
}

func (d *Dialect) EventsClaimCandidatesSQL(p dialects.ClaimParams) dialects.Query {
	return d.eventsClaimCandidates(p)
}

func (d *Dialect) EventsClaimWalkSQL(p dialects.ClaimParams) dialects.Query {
	return d.eventsClaimWalk(p)
}

func (d *Dialect) EventsClaimLockCandidatesSQL(p dialects.ClaimParams, ids []oncebox.EventID) dialects.Query {
	return d.eventsClaimLockCandidates(p, ids)
}

func (d *Dialect) EventsClaimUpdateSQL(p dialects.ClaimParams, ids []oncebox.EventID) dialects.Query {
	return d.eventsClaimUpdate(p, ids)
}

func (d *Dialect) EventsMarkProcessedSQL(token oncebox.EventID, ids []oncebox.EventID, now time.Time) dialects.Query {
	return d.eventsMarkProcessed(token, ids, now)
}

func (d *Dialect) EventsMarkFailedSQL(token oncebox.EventID, rows []dialects.FailedEvent, now time.Time) dialects.Query {
	return d.eventsMarkFailed(token, rows, now)
}

func (d *Dialect) EventsReleaseSQL(token oncebox.EventID, ids []oncebox.EventID, now time.Time) dialects.Query {
	return d.eventsRelease(token, ids, now)
}

func (d *Dialect) EventsFailedProbeSQL() dialects.Query { return d.eventsFailedProbe() }

func (d *Dialect) EventsCopyToDLQSQL(now time.Time, limit int) dialects.Query {
	return d.eventsCopyToDLQ(now, limit)
}

func (d *Dialect) EventsDeleteMovedSQL(limit int) dialects.Query { return d.eventsDeleteMoved(limit) }

func (d *Dialect) EventsDeleteProcessedSQL(cutoff time.Time, limit int) dialects.Query {
	return d.eventsDeleteProcessed(cutoff, limit)
}

func (d *Dialect) LeaseAcquireSQL(l dialects.Lease) dialects.Query { return d.leaseAcquire(l) }

func (d *Dialect) LeaseReleaseSQL(l dialects.Lease) dialects.Query { return d.leaseRelease(l) }

func (d *Dialect) EventsDueTypesSQL(now time.Time, after string, limit int) dialects.Query {
	return d.eventsDueTypes(now, after, limit)
}

func (d *Dialect) InstanceHeartbeatSQL(instance string, at time.Time) dialects.Query {
	return d.instanceHeartbeat(instance, at)
}

func (d *Dialect) InstanceEndSQL(instance string) dialects.Query { return d.instanceEnd(instance) }

func (d *Dialect) InstancesDeleteBeforeSQL(cutoff time.Time) dialects.Query {
	return d.instancesDeleteBefore(cutoff)
}

func (d *Dialect) EventsInProcessProbeSQL() dialects.Query { return d.eventsInProcessProbe() }

func (d *Dialect) EventsRecoverStaleSQL(p dialects.RecoverParams) dialects.Query {
	return d.eventsRecoverStale(p)
}

func (d *Dialect) DatabaseNowSQL() dialects.Query { return d.databaseNow() }

// The DLQ's statements: the store's (dlqstore.go) and the transfer's.

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

func (d *Dialect) DLQDeleteResolvedSQL(cutoff time.Time, limit int) dialects.Query {
	return d.dlqDeleteResolved(cutoff, limit)
}

func (d *Dialect) DLQToRetryProbeSQL() dialects.Query { return d.dlqToRetryProbe() }

func (d *Dialect) DLQTransferSelectSQL(limit int) dialects.Query { return d.dlqTransferSelect(limit) }

func (d *Dialect) DLQTransferInsertSQL(rows []dialects.EventRow, now time.Time) dialects.Query {
	return d.dlqTransferInsert(rows, now)
}

func (d *Dialect) DLQDeleteIDsSQL(ids []oncebox.EventID) dialects.Query { return d.dlqDeleteIDs(ids) }

// The publisher's, the inbox's and the poison queue's.

func (d *Dialect) EventsInsertSQL(rows []dialects.EventRow) dialects.Query {
	return d.eventsInsert(rows)
}

func (d *Dialect) MaxRowsPerInsert() int { return d.maxRowsPerInsert() }

func (d *Dialect) InboxInsertSQL(consumer, id string, now time.Time) dialects.Query {
	return d.inboxInsert(consumer, id, now)
}

func (d *Dialect) InboxInsertManySQL(consumer string, ids []string, now time.Time) dialects.Query {
	return d.inboxInsertMany(consumer, ids, now)
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

// The migrator's and the inspector's.

func (d *Dialect) MigrationLockSQL() []dialects.Query { return d.migrationLock() }

func (d *Dialect) MigrationUnlockSQL() []dialects.Query { return d.migrationUnlock() }

func (d *Dialect) MigrationsTableCreateSQL() dialects.Query { return d.migrationsTableCreate() }

func (d *Dialect) MigrationsSelectSQL() dialects.Query { return d.migrationsSelect() }

func (d *Dialect) MigrationsInsertSQL(version int, name string, at time.Time) dialects.Query {
	return d.migrationsInsert(version, name, at)
}

func (d *Dialect) BacklogSQL() dialects.Query { return d.backlog() }

func (d *Dialect) EventsListSQL() dialects.Query { return d.eventsList() }

func (d *Dialect) TestSchemaCreateSQL() (dialects.Query, error) { return d.testSchemaCreate() }

// NextDueSQL exposes NextDue's statement to the golden tests.
func (d *Dialect) NextDueSQL(eventType string, now time.Time) dialects.Query {
	return d.eventsNextDue(eventType, now)
}

// ConsoleStatements are the console's statement builders (console.go),
// for the golden tests.
func (d *Dialect) ConsoleStatements() sqlkit.ConsoleStatements { return d.console().S }
