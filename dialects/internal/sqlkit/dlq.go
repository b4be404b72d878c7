package sqlkit

import (
	"strconv"
	"strings"

	"github.com/oncebox/watermill-oncebox/dialects"
)

// DlqColumns is the select list of DLQGet, in the order of
// DLQRecord.ScanTargets.
const DlqColumns = "id, event_id, source, handler_name, event_type, topic, partition_key, message_uuid, " +
	"payload, metadata, status, retry_count, last_error, created_at, first_failed_at, last_failed_at, " +
	"moved_at, updated_at"

// DlqListColumns is the select list of DLQList, in the order of
// DLQRecord.ListScanTargets: DlqColumns with the payload replaced by
// payload (an expression cutting it to DLQListPayloadBytes) and the full
// size, size, appended.
func DlqListColumns(payload, size string) string {
	if payload != "payload" {
		payload += " AS payload"
	}
	return strings.Replace(DlqColumns, "payload,", payload+",", 1) + ", " + size + " AS payload_size"
}

// DlqListCap is DLQListPayloadBytes in SQL.
var DlqListCap = strconv.Itoa(dialects.DLQListPayloadBytes)
