package sqlkit

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/internal/metadata"
)

// TransferRow is a TO_RETRY DLQ row locked by a transfer.
type TransferRow struct {
	ID          oncebox.EventID
	EventID     *oncebox.EventID
	EventType   string
	Topic       string
	Key         *string
	MessageUUID string
	Payload     []byte
	Metadata    []byte
	CreatedAt   time.Time
	MovedAt     time.Time
}

// TransferEvents turns picked DLQ rows into outbox rows: one per event id,
// from the latest moved row (moved_at, then id, descending), in the order of
// the event ids.
func TransferEvents(picked []TransferRow) ([]dialects.EventRow, error) {
	latest := map[oncebox.EventID]*TransferRow{}
	for i := range picked {
		r := &picked[i]
		eid := r.ID
		if r.EventID != nil {
			eid = *r.EventID
		}
		cur, ok := latest[eid]
		if !ok || r.MovedAt.After(cur.MovedAt) ||
			(r.MovedAt.Equal(cur.MovedAt) && string(r.ID[:]) > string(cur.ID[:])) {
			latest[eid] = r
		}
	}
	out := make([]dialects.EventRow, 0, len(latest))
	for eid, r := range latest {
		meta := map[string]json.RawMessage{}
		if len(r.Metadata) > 0 {
			if err := json.Unmarshal(r.Metadata, &meta); err != nil {
				return nil, fmt.Errorf("oncebox: DLQ row %s: metadata is not a JSON object: %w", r.ID, err)
			}
			if meta == nil {
				meta = map[string]json.RawMessage{}
			}
		}
		// The outbox row keeps the event id and type in its columns; the
		// relay adds them when it sends (a consumed message's copies of
		// them are dropped here).
		for _, k := range metadata.InColumns {
			delete(meta, k)
		}
		m, err := json.Marshal(meta)
		if err != nil {
			return nil, err
		}
		var key string
		if r.Key != nil {
			key = *r.Key
		}
		out = append(out, dialects.EventRow{ID: eid, EventType: r.EventType, Topic: r.Topic, Key: key,
			MessageUUID: r.MessageUUID, Payload: r.Payload, Metadata: string(m), CreatedAt: r.CreatedAt})
	}
	// Event id order: concurrent transfers touch outbox rows in one order.
	sort.Slice(out, func(i, j int) bool { return string(out[i].ID[:]) < string(out[j].ID[:]) })
	return out, nil
}

func StatusArgs(ss []oncebox.DLQStatus) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}
