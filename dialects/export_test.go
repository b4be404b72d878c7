package dialects

// The statement builders behind each dialect's Dialect methods are
// unexported; the golden tests (package dialects_test) read them through
// these methods, which exist only in the test build.

import (
	"time"

	oncebox "github.com/oncebox/watermill-oncebox"
)

func (d *MySQL) DLQDeleteID(id oncebox.EventID) Query { return d.dLQDeleteID(id) }
func (d *MySQL) DLQToRetryProbe() Query               { return d.dLQToRetryProbe() }
func (d *MySQL) DLQTransferInsert(rows []EventRow, now time.Time) Query {
	return d.dLQTransferInsert(rows, now)
}
func (d *MySQL) DLQTransferSelect(limit int) Query         { return d.dLQTransferSelect(limit) }
func (d *MySQL) EventsClaimCandidates(p ClaimParams) Query { return d.eventsClaimCandidates(p) }
func (d *MySQL) EventsClaimWalk(p ClaimParams) Query       { return d.eventsClaimWalk(p) }
func (d *MySQL) EventsClaimLockCandidates(p ClaimParams, ids []oncebox.EventID) Query {
	return d.eventsClaimLockCandidates(p, ids)
}
func (d *MySQL) EventsClaimProbe(p ClaimParams) Query  { return d.eventsClaimProbe(p) }
func (d *MySQL) EventsClaimSelect(p ClaimParams) Query { return d.eventsClaimSelect(p) }
func (d *MySQL) EventsClaimUpdate(p ClaimParams, ids []oncebox.EventID) Query {
	return d.eventsClaimUpdate(p, ids)
}
func (d *MySQL) EventsCopyToDLQ(ids []oncebox.EventID, now time.Time) Query {
	return d.eventsCopyToDLQ(ids, now)
}
func (d *MySQL) EventsDelete(id oncebox.EventID) Query { return d.eventsDelete(id) }
func (d *MySQL) EventsFailedProbe() Query              { return d.eventsFailedProbe() }
func (d *MySQL) EventsInProcessProbe() Query           { return d.eventsInProcessProbe() }
func (d *MySQL) EventsLockClaimed(token oncebox.EventID, ids []oncebox.EventID) Query {
	return d.eventsLockClaimed(token, ids)
}
func (d *MySQL) EventsMarkProcessed(token oncebox.EventID, ids []oncebox.EventID, now time.Time) Query {
	return d.eventsMarkProcessed(token, ids, now)
}
func (d *MySQL) EventsMoveSelect(limit int) Query { return d.eventsMoveSelect(limit) }
func (d *MySQL) InboxInsertMany(consumer string, ids []string, now time.Time) Query {
	return d.inboxInsertMany(consumer, ids, now)
}
func (d *MySQL) InboxSelectPresent(consumer string, ids []string) Query {
	return d.inboxSelectPresent(consumer, ids)
}
func (d *MySQL) LeaseInsert(l Lease) Query                      { return d.leaseInsert(l) }
func (d *MySQL) LeaseTake(l Lease) Query                        { return d.leaseTake(l) }
func (d *Oracle) DLQToRetryProbe() Query                        { return d.dLQToRetryProbe() }
func (d *Oracle) DLQTransferDelete(ids []oncebox.EventID) Query { return d.dLQTransferDelete(ids) }
func (d *Oracle) DLQTransferInsert(r EventRow, now time.Time) Query {
	return d.dLQTransferInsert(r, now)
}
func (d *Oracle) DLQTransferLock() Query                           { return d.dLQTransferLock() }
func (d *Oracle) DLQTransferRearm(r EventRow, now time.Time) Query { return d.dLQTransferRearm(r, now) }
func (d *Oracle) EventsClaimCandidates(p ClaimParams) Query        { return d.eventsClaimCandidates(p) }
func (d *Oracle) EventsClaimWalk(p ClaimParams) Query              { return d.eventsClaimWalk(p) }
func (d *Oracle) EventsClaimLock(p ClaimParams) Query              { return d.eventsClaimLock(p) }
func (d *Oracle) EventsClaimLockCandidates(p ClaimParams, ids []oncebox.EventID) Query {
	return d.eventsClaimLockCandidates(p, ids)
}
func (d *Oracle) EventsClaimProbe(p ClaimParams) Query { return d.eventsClaimProbe(p) }
func (d *Oracle) EventsClaimUpdate(p ClaimParams, ids []oncebox.EventID) Query {
	return d.eventsClaimUpdate(p, ids)
}
func (d *Oracle) EventsFailedProbe() Query    { return d.eventsFailedProbe() }
func (d *Oracle) EventsInProcessProbe() Query { return d.eventsInProcessProbe() }
func (d *Oracle) EventsLockClaimed(token oncebox.EventID, ids []oncebox.EventID) Query {
	return d.eventsLockClaimed(token, ids)
}
func (d *Oracle) EventsMarkProcessed(token oncebox.EventID, ids []oncebox.EventID, now time.Time) Query {
	return d.eventsMarkProcessed(token, ids, now)
}
func (d *Oracle) EventsMoveCopy(ids []oncebox.EventID, now time.Time) Query {
	return d.eventsMoveCopy(ids, now)
}
func (d *Oracle) EventsMoveDelete(ids []oncebox.EventID) Query { return d.eventsMoveDelete(ids) }
func (d *Oracle) EventsMoveLock() Query                        { return d.eventsMoveLock() }
func (d *Oracle) LeaseAcquire(l Lease) Query                   { return d.leaseAcquire(l) }
func (d *PostgreSQL) DLQTransferToOutbox(now time.Time, limit int) Query {
	return d.dLQTransferToOutbox(now, limit)
}
func (d *PostgreSQL) EventsClaim(p ClaimParams) Query { return d.eventsClaim(p) }
func (d *PostgreSQL) EventsMarkProcessed(token oncebox.EventID, ids []oncebox.EventID, now time.Time) Query {
	return d.eventsMarkProcessed(token, ids, now)
}
func (d *PostgreSQL) EventsMoveToDLQ(now time.Time, limit int) Query {
	return d.eventsMoveToDLQ(now, limit)
}
func (d *PostgreSQL) InboxInsertMany(consumer string, ids []string, now time.Time) Query {
	return d.inboxInsertMany(consumer, ids, now)
}
func (d *PostgreSQL) LeaseAcquire(l Lease) Query { return d.leaseAcquire(l) }

func (d *PostgreSQL) EventsMarkProcessedClaims(claims []ClaimIDs, now time.Time) Query {
	return d.eventsMarkProcessedClaims(claims, now)
}
