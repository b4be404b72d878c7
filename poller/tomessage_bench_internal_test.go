package poller

import (
	"context"
	"testing"

	"github.com/oncebox/watermill-oncebox/dialects"
)

// BenchmarkToMessage rebuilds the message of a claimed row shaped like the
// bench's relay backlog: the metadata as PostgreSQL's jsonb returns what the
// publisher wrote (one header of the caller's, the event id and type).
func BenchmarkToMessage(b *testing.B) {
	e := dialects.ClaimedEvent{
		Topic:       "bench",
		MessageUUID: "6f1c2a34-5b6d-4e7f-8a9b-0c1d2e3f4a5b",
		Payload:     []byte(`{"order_id":"o-1","amount":4200,"currency":"EUR"}`),
		Metadata: []byte(`{"tenant": "acme", "oncebox_event_id": "0193a0c4-8f5e-7c3a-9b1d-2e4f6a8c0b1d", ` +
			`"oncebox_event_type": "bench"}`),
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := toMessage(ctx, &e); err != nil {
			b.Fatal(err)
		}
	}
}
