package poller

import (
	"context"
	"strings"
	"testing"

	oncebox "github.com/oncebox/watermill-oncebox"

	"github.com/oncebox/watermill-oncebox/dialects"
)

// BenchmarkToMessage rebuilds the message of a claimed row shaped like the
// bench's relay backlog: the metadata as PostgreSQL's jsonb returns what the
// publisher writes (one header of the caller's; the event id and type come
// from the row's columns), and as it wrote it before issue 28 (the id and
// type in the metadata too).
func BenchmarkToMessage(b *testing.B) {
	for _, c := range []struct{ name, metadata string }{
		{"narrow", `{"tenant": "acme"}`},
		{"with-id-and-type", `{"tenant": "acme", "oncebox_event_id": "0193a0c4-8f5e-7c3a-9b1d-2e4f6a8c0b1d", "oncebox_event_type": "bench"}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			e := dialects.ClaimedEvent{
				ID:          mustID(b, "0193a0c4-8f5e-7c3a-9b1d-2e4f6a8c0b1d"),
				Topic:       "bench",
				MessageUUID: "6f1c2a34-5b6d-4e7f-8a9b-0c1d2e3f4a5b",
				Payload:     []byte(`{"order_id":"o-1","amount":4200,"currency":"EUR"}`),
				Metadata:    []byte(c.metadata),
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := toMessage(ctx, &e, "bench"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestToMessageAddsTheEventIDAndTypeFromTheColumns: the metadata the
// publisher stores no longer holds the event id and type; the message the
// relay sends has them, from the row's id and the claimed type, whatever
// the metadata says (a row stored before, with the same values; JSON null;
// none at all).
func TestToMessageAddsTheEventIDAndTypeFromTheColumns(t *testing.T) {
	id := mustID(t, "0193a0c4-8f5e-7c3a-9b1d-2e4f6a8c0b1d")
	for _, md := range []string{`{"tenant":"acme"}`, `{"tenant":"acme","oncebox_event_id":"0193a0c4-8f5e-7c3a-9b1d-2e4f6a8c0b1d","oncebox_event_type":"orders"}`, `null`, ``} {
		msg, err := toMessage(context.Background(), &dialects.ClaimedEvent{ID: id, MessageUUID: "m", Metadata: []byte(md)}, "orders")
		if err != nil {
			t.Fatalf("metadata %q: %v", md, err)
		}
		if got := msg.Metadata.Get(oncebox.HeaderEventID); got != id.String() {
			t.Errorf("metadata %q: event id header %q, want %q", md, got, id)
		}
		if got := msg.Metadata.Get(oncebox.HeaderEventType); got != "orders" {
			t.Errorf("metadata %q: event type header %q, want orders", md, got)
		}
		if strings.HasPrefix(md, `{"tenant"`) && msg.Metadata.Get("tenant") != "acme" {
			t.Errorf("metadata %q: the caller's header is lost: %v", md, msg.Metadata)
		}
	}
}

func mustID(tb testing.TB, s string) oncebox.EventID {
	tb.Helper()
	id, err := oncebox.ParseEventID(s)
	if err != nil {
		tb.Fatal(err)
	}
	return id
}
