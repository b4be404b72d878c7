package dlq

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/oncebox/watermill-oncebox"
)

// pathID parses the {id} path parameter; a bad one is a 400 naming "id".
func pathID(r *http.Request) (oncebox.EventID, error) {
	id, err := oncebox.ParseEventID(r.PathValue("id"))
	if err != nil {
		return oncebox.EventID{}, badRequest("id", fmt.Sprintf("%q is not a UUID", r.PathValue("id")))
	}
	return id, nil
}

// query is a parsed listing or count query string.
type query struct {
	filter Filter
	page   Page
}

// parseQuery reads the filter parameters (status, repeatable; event_type;
// source; moved_from; moved_to) and, when paged, limit and cursor. An empty
// value does not filter; an unknown or repeated parameter is a 400.
func parseQuery(r *http.Request, paged bool) (query, error) {
	var q query
	values := r.URL.Query()
	for name, vs := range values {
		switch name {
		case "status":
			for _, v := range vs {
				if v == "" {
					continue
				}
				st, err := parseStatus("status", v)
				if err != nil {
					return q, err
				}
				q.filter.Statuses = append(q.filter.Statuses, st)
			}
			continue
		case "event_type", "source", "moved_from", "moved_to":
		case "limit", "cursor":
			if !paged {
				return q, badRequest(name, "not a parameter of this endpoint")
			}
		default:
			return q, badRequest(name, "unknown parameter")
		}
		if len(vs) > 1 {
			return q, badRequest(name, "given more than once")
		}
	}
	f := filterJSON{EventType: values.Get("event_type"), Source: values.Get("source"),
		MovedFrom: values.Get("moved_from"), MovedTo: values.Get("moved_to")}
	if err := f.into(&q.filter, ""); err != nil {
		return q, err
	}
	if v := values.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxLimit {
			return q, badRequest("limit", fmt.Sprintf("%q is not an integer from 1 to %d", v, MaxLimit))
		}
		q.page.Limit = n
	}
	if v := values.Get("cursor"); v != "" {
		c, err := ParseCursor(v)
		if err != nil {
			return q, badRequest("cursor", "not a next_cursor this API returned")
		}
		q.page.After = &c
	}
	return q, nil
}

// filterJSON is a filter in a request: the query parameters of a listing,
// or the "filter" object of a bulk PATCH or DELETE body.
type filterJSON struct {
	// Statuses keeps rows in any of these statuses.
	Statuses []string `json:"status,omitempty"`
	// EventType keeps rows of this event type.
	EventType string `json:"event_type,omitempty"`
	// Source keeps rows of this source: publisher or consumer.
	Source string `json:"source,omitempty"`
	// MovedFrom, RFC 3339, keeps rows moved at or after it.
	MovedFrom string `json:"moved_from,omitempty"`
	// MovedTo, RFC 3339, keeps rows moved before it.
	MovedTo string `json:"moved_to,omitempty"`
	// All must be true, and alone, for a bulk change of every row.
	All bool `json:"all,omitempty"`
}

// empty reports whether f selects nothing in particular, i.e. every row.
func (f filterJSON) empty() bool {
	return len(f.Statuses) == 0 && f.EventType == "" && f.Source == "" && f.MovedFrom == "" && f.MovedTo == ""
}

// into validates f into out; errors are 400s naming prefix+field.
func (f filterJSON) into(out *Filter, prefix string) error {
	for _, v := range f.Statuses {
		st, err := parseStatus(prefix+"status", v)
		if err != nil {
			return err
		}
		out.Statuses = append(out.Statuses, st)
	}
	if len(f.EventType) > oncebox.MaxEventTypeLength {
		return badRequest(prefix+"event_type", fmt.Sprintf("longer than %d characters", oncebox.MaxEventTypeLength))
	}
	if reason := badText(f.EventType); reason != "" {
		return badRequest(prefix+"event_type", reason)
	}
	out.EventType = f.EventType
	switch src := oncebox.DLQSource(f.Source); src {
	case "", oncebox.DLQSourcePublisher, oncebox.DLQSourceConsumer:
		out.Source = src
	default:
		return badRequest(prefix+"source", fmt.Sprintf("unknown source %q (publisher or consumer)", f.Source))
	}
	var err error
	if out.MovedFrom, err = parseTime(prefix+"moved_from", f.MovedFrom); err != nil {
		return err
	}
	if out.MovedTo, err = parseTime(prefix+"moved_to", f.MovedTo); err != nil {
		return err
	}
	if !out.MovedFrom.IsZero() && !out.MovedTo.IsZero() && out.MovedFrom.After(out.MovedTo) {
		return badRequest(prefix+"moved_from", "after moved_to")
	}
	return nil
}

// parseStatus reads a DLQ status named name.
func parseStatus(name, v string) (oncebox.DLQStatus, error) {
	st := oncebox.DLQStatus(v)
	if !knownStatus(st) {
		return "", badRequest(name, fmt.Sprintf("unknown status %q (MOVED, TO_RETRY, IN_PROCESS or RESOLVED)", v))
	}
	return st, nil
}

// parseTime reads an RFC 3339 time named name; "" is the zero time.
func parseTime(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	// An unescaped "+" of an offset arrives as a space in a query string;
	// RFC 3339 has no spaces, so put it back.
	t, err := time.Parse(time.RFC3339Nano, strings.ReplaceAll(v, " ", "+"))
	if err != nil {
		return time.Time{}, badRequest(name, fmt.Sprintf("%q is not an RFC 3339 time", v))
	}
	return t.UTC(), nil
}

// targetStatus checks the "status" of a PATCH body: one an operator may set.
func targetStatus(s *string) (oncebox.DLQStatus, error) {
	if s == nil {
		return "", badRequest("status", "missing")
	}
	st, err := parseStatus("status", *s)
	if err != nil {
		return "", err
	}
	if _, ok := allowedFrom[st]; !ok {
		return "", badRequest("status", "only the transfer job sets "+string(st)+" (MOVED, TO_RETRY or RESOLVED)")
	}
	return st, nil
}

// selection checks that a bulk body has exactly one of ids and filter, and
// parses it: ids non-nil, or a Filter. An empty filter is refused unless it
// is exactly {"all": true}.
func selection(rawIDs *[]string, f *filterJSON) ([]oncebox.EventID, Filter, error) {
	switch {
	case rawIDs != nil && f != nil:
		return nil, Filter{}, &httpError{status: http.StatusBadRequest, detail: "give either ids or filter, not both",
			params: []InvalidParam{{Name: "ids", Reason: "given with filter"}, {Name: "filter", Reason: "given with ids"}}}
	case rawIDs == nil && f == nil:
		return nil, Filter{}, &httpError{status: http.StatusBadRequest, detail: "give either ids or filter",
			params: []InvalidParam{{Name: "ids", Reason: "missing"}, {Name: "filter", Reason: "missing"}}}
	case rawIDs != nil:
		if len(*rawIDs) > MaxIDs {
			return nil, Filter{}, badRequest("ids", fmt.Sprintf("%d ids, at most %d per request", len(*rawIDs), MaxIDs))
		}
		ids := make([]oncebox.EventID, 0, len(*rawIDs))
		for i, s := range *rawIDs {
			id, err := oncebox.ParseEventID(s)
			if err != nil {
				return nil, Filter{}, badRequest(fmt.Sprintf("ids[%d]", i), fmt.Sprintf("%q is not a UUID", s))
			}
			ids = append(ids, id)
		}
		return ids, Filter{}, nil
	}
	if f.All {
		if !f.empty() {
			return nil, Filter{}, badRequest("filter.all", `"all": true selects every row and takes no other field`)
		}
		return nil, Filter{}, nil
	}
	if f.empty() {
		return nil, Filter{}, badRequest("filter", `empty: it would select every row; send {"all": true} to mean that`)
	}
	var out Filter
	if err := f.into(&out, "filter."); err != nil {
		return nil, Filter{}, err
	}
	return nil, out, nil
}

// decodeBody reads a JSON body of at most MaxBodyBytes into v, refusing
// unknown fields and trailing data.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if dec.Decode(&struct{}{}) != io.EOF {
			return badRequest("body", "more than one JSON value")
		}
		return nil
	}
	var mbe *http.MaxBytesError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &mbe):
		return err
	case errors.Is(err, io.EOF):
		return badRequest("body", "empty: a JSON object is required")
	case errors.As(err, &te) && te.Field != "":
		return badRequest(te.Field, "must be a JSON "+jsonKind(te.Type.Kind()))
	}
	if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name := strings.Trim(field, `"`)
		return badRequest(name, "unknown field")
	}
	return badRequest("body", "not valid JSON: "+err.Error())
}

// jsonKind names the JSON type a Go kind decodes from.
func jsonKind(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "string"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Bool:
		return "boolean"
	case reflect.Struct, reflect.Map:
		return "object"
	}
	return "number"
}
