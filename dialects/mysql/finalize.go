package mysql

import "github.com/oncebox/watermill-oncebox/dialects"

var _ dialects.ConfirmedDeleter = (*Dialect)(nil)

// DeleteConfirmed implements dialects.ConfirmedDeleter (outbox.finalize:
// delete): a copy of d whose MarkProcessed and MarkProcessedClaims run
// eventsMarkProcessed's DELETE, under the same claim-token guard as its
// UPDATE, and return the ids they deleted.
func (d *Dialect) DeleteConfirmed() dialects.Dialect {
	c := *d
	c.deleteConfirmed = true
	return &c
}
