package sqlkit

import (
	"github.com/oncebox/watermill-oncebox/dialects"
)

// BacklogSQL is the backlog count of every dialect; nullTime is a NULL of
// the timestamp type.
func BacklogSQL(t dialects.Tables, nullTime string) string {
	return "SELECT 'outbox', event_type, status, count(*), min(next_retry_at) FROM " + t.Events +
		" GROUP BY event_type, status" +
		" UNION ALL SELECT 'dlq', source, status, count(*), " + nullTime + " FROM " + t.DLQ +
		" GROUP BY source, status"
}
