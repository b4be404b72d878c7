package oncetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/internal/metadata"
)

// Event is one row of the outbox: what was published and where it stands.
type Event struct {
	// ID is the event's id, the oncebox_event_id header of the message.
	ID oncebox.EventID
	// Type is the event type: the topic given to Publish.
	Type string
	// Topic is the destination topic on the broker.
	Topic string
	// Key is the ordering key (oncebox.SetKey); "" when none was set.
	Key string
	// UUID is the Watermill message's UUID, which the relay keeps.
	UUID string
	// Payload is the message's payload.
	Payload []byte
	// Metadata is the metadata the relay sends: the message's own and the
	// headers oncebox added (oncebox.HeaderEventID and
	// oncebox.HeaderEventType, from the row's columns; trace context).
	Metadata map[string]string
	// Status is PENDING until the relay sent it, then PROCESSED (FAILED
	// after its last refused attempt).
	Status oncebox.Status
	// RetryCount is the number of attempts the broker refused so far.
	RetryCount int
}

// Events returns every row of the outbox in publish order (the order of
// the event ids), whatever their status. db may be the test's transaction
// (sql.TxFromPgx(tx), sql.TxFromStdSQL(tx)), which sees its own uncommitted
// events, or a pool, which sees the committed ones.
func Events(ctx context.Context, db wsql.ContextExecutor, d dialects.Dialect) ([]Event, error) {
	if db == nil || d == nil {
		return nil, fmt.Errorf("%w: oncetest.Events: the handle or the dialect is nil", oncebox.ErrInvalidConfig)
	}
	rows, err := d.EventsList(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("oncetest: read the outbox %s: %w", d.Tables().Events, err)
	}
	var out []Event
	for _, s := range rows {
		e := Event{ID: s.ID, Type: s.EventType, Topic: s.Topic, UUID: s.MessageUUID, Payload: s.Payload,
			Status: s.Status, RetryCount: s.RetryCount}
		if s.Key != nil {
			e.Key = *s.Key
		}
		if len(s.Metadata) > 0 {
			if err := json.Unmarshal(s.Metadata, &e.Metadata); err != nil {
				return nil, fmt.Errorf("oncetest: event %s: metadata is not a JSON object of strings: %w", s.ID, err)
			}
		}
		// The row keeps the event id and type in its columns, not in its
		// metadata; the relay adds them to the message it sends.
		e.Metadata = metadata.WithColumns(e.Metadata, s.ID, s.EventType)
		out = append(out, e)
	}
	return out, nil
}

// Expected is an event a test expects in the outbox. Type is always
// compared; the other fields only when set.
type Expected struct {
	// Type is the event type. Required.
	Type string
	// Topic, when set, is the destination topic.
	Topic string
	// Key, when set, is the ordering key.
	Key string
	// Payload, when not nil, is the payload. When both it and the stored
	// payload are JSON they are compared as JSON values (key order and
	// spacing do not matter); otherwise byte for byte.
	Payload []byte
	// Metadata, when set, holds entries the stored metadata must carry with
	// these values; other entries may be there too.
	Metadata map[string]string
}

// RequireEvents fails the test unless the outbox holds exactly the events
// of want, in publish order (all statuses). db is the test's transaction,
// which sees its own uncommitted events (sql.TxFromPgx(tx),
// sql.TxFromStdSQL(tx)), or a pool for the committed ones. An empty want
// asserts that nothing was published. The failure lists what the outbox
// holds, and the first difference.
func RequireEvents(t testing.TB, db wsql.ContextExecutor, d dialects.Dialect, want []Expected) {
	t.Helper()
	for i, w := range want {
		if w.Type == "" {
			t.Fatalf("oncetest.RequireEvents: want[%d].Type is empty: every expected event names its type", i)
			return
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := Events(ctx, db, d)
	if err != nil {
		t.Fatalf("oncetest.RequireEvents: %v", err)
		return
	}
	diff := ""
	for i := 0; i < len(want) && i < len(got) && diff == ""; i++ {
		if d := difference(want[i], got[i]); d != "" {
			diff = fmt.Sprintf("event #%d: %s", i, d)
		}
	}
	if diff == "" && len(got) != len(want) {
		diff = fmt.Sprintf("the outbox holds %d events, want %d", len(got), len(want))
	}
	if diff == "" {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "oncetest.RequireEvents: %s\nwant %d events:\n", diff, len(want))
	for i, w := range want {
		fmt.Fprintf(&b, "  #%d %s\n", i, describeExpected(w))
	}
	fmt.Fprintf(&b, "the outbox %s holds %d events:\n", d.Tables().Events, len(got))
	for i, e := range got {
		fmt.Fprintf(&b, "  #%d %s\n", i, describeEvent(e))
	}
	t.Fatalf("%s", b.String())
}

// difference says how e differs from w, "" when it matches.
func difference(w Expected, e Event) string {
	switch {
	case e.Type != w.Type:
		return fmt.Sprintf("type is %q, want %q", e.Type, w.Type)
	case w.Topic != "" && e.Topic != w.Topic:
		return fmt.Sprintf("topic is %q, want %q", e.Topic, w.Topic)
	case w.Key != "" && e.Key != w.Key:
		return fmt.Sprintf("key is %q, want %q", e.Key, w.Key)
	case w.Payload != nil && !samePayload(w.Payload, e.Payload):
		return fmt.Sprintf("payload is %s, want %s", showPayload(e.Payload), showPayload(w.Payload))
	}
	keys := make([]string, 0, len(w.Metadata))
	for k := range w.Metadata {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if v, ok := e.Metadata[k]; !ok {
			return fmt.Sprintf("metadata has no %q, want %q", k, w.Metadata[k])
		} else if v != w.Metadata[k] {
			return fmt.Sprintf("metadata %q is %q, want %q", k, v, w.Metadata[k])
		}
	}
	return ""
}

// samePayload compares two payloads as JSON values when both are JSON, byte
// for byte otherwise.
func samePayload(want, got []byte) bool {
	if json.Valid(want) && json.Valid(got) {
		var w, g any
		if json.Unmarshal(want, &w) == nil && json.Unmarshal(got, &g) == nil {
			return reflect.DeepEqual(w, g)
		}
	}
	return bytes.Equal(want, got)
}

// maxShownPayload is the most bytes of a payload a failure message shows.
const maxShownPayload = 200

func showPayload(p []byte) string {
	if !utf8.Valid(p) {
		if len(p) > maxShownPayload/2 {
			return fmt.Sprintf("%x… (%d bytes)", p[:maxShownPayload/2], len(p))
		}
		return fmt.Sprintf("%x (%d bytes, not UTF-8)", p, len(p))
	}
	if len(p) > maxShownPayload {
		cut := maxShownPayload
		for cut > 0 && !utf8.RuneStart(p[cut]) {
			cut--
		}
		return fmt.Sprintf("%q… (%d bytes)", p[:cut], len(p))
	}
	return fmt.Sprintf("%q", p)
}

func describeExpected(w Expected) string {
	s := fmt.Sprintf("type %q", w.Type)
	if w.Topic != "" {
		s += fmt.Sprintf(" topic %q", w.Topic)
	}
	if w.Key != "" {
		s += fmt.Sprintf(" key %q", w.Key)
	}
	if w.Payload != nil {
		s += " payload " + showPayload(w.Payload)
	}
	if len(w.Metadata) > 0 {
		s += " metadata " + showMetadata(w.Metadata)
	}
	return s
}

func describeEvent(e Event) string {
	s := fmt.Sprintf("type %q topic %q", e.Type, e.Topic)
	if e.Key != "" {
		s += fmt.Sprintf(" key %q", e.Key)
	}
	s += fmt.Sprintf(" payload %s status %s", showPayload(e.Payload), e.Status)
	if e.RetryCount > 0 {
		s += fmt.Sprintf(" (%d refused)", e.RetryCount)
	}
	// The id, the type and the key are shown already.
	md := map[string]string{}
	for k, v := range e.Metadata {
		if k != oncebox.HeaderEventID && k != oncebox.HeaderEventType && k != oncebox.HeaderKey {
			md[k] = v
		}
	}
	if len(md) > 0 {
		s += " metadata " + showMetadata(md)
	}
	return s + fmt.Sprintf(" id %s", e.ID)
}

func showMetadata(md map[string]string) string {
	keys := make([]string, 0, len(md))
	for k := range md {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%q", k, md[k])
	}
	return "{" + strings.Join(parts, " ") + "}"
}
