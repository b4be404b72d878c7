package metadata

import oncebox "github.com/oncebox/watermill-oncebox"

// InColumns are the oncebox headers an outbox row keeps in its own columns
// (id, event_type) and not in its metadata (issue 28: narrower rows): the
// publisher leaves them out of what it stores, a DLQ transfer drops them,
// and whatever shows a row as the relay sends it puts them back from the
// columns (WithColumns).
var InColumns = []string{oncebox.HeaderEventID, oncebox.HeaderEventType}

// WithColumns sets md's event id and type headers to a row's id and
// event_type columns, replacing any copies (rows written before the
// publisher left them out hold the same values), and returns md; a nil md
// (no metadata, or the JSON null) becomes a new map.
func WithColumns(md map[string]string, id oncebox.EventID, eventType string) map[string]string {
	if md == nil {
		md = make(map[string]string, 2)
	}
	md[oncebox.HeaderEventID], md[oncebox.HeaderEventType] = id.String(), eventType
	return md
}
