package console

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dlq"
)

// handler is the http.Handler NewHandler returns.
type handler struct {
	cfg       Config
	base      string // BasePath without its trailing slash: "" at the root
	logger    watermill.LoggerAdapter
	clock     oncebox.Clock
	ttl       time.Duration
	window    time.Duration
	sessions  *sessions
	mux       *http.ServeMux
	pages     map[string]*template.Template
	inspector dialects.ConsoleInspector // nil: the dialect has no console statements
	logins    *loginLimiter             // nil: no limit (Config.LoginFailures negative)
}

var pageNames = []string{"login", "overview", "list", "row", "fingerprints", "confirm", "done", "error"}

func (h *handler) parseTemplates() error {
	funcs := template.FuncMap{
		"ago":  func(t time.Time) string { return ago(h.clock.Now().Sub(t)) },
		"when": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000 UTC") },
		"whenp": func(t *time.Time) string {
			if t == nil {
				return "—"
			}
			return t.UTC().Format("2006-01-02 15:04:05.000 UTC")
		},
		"base": func() string { return h.base },
	}
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return fmt.Errorf("console: template %s: %w", name, err)
		}
		h.pages[name] = t
	}
	return nil
}

// ago writes a duration for people: "3m12s", "2h5m", "4d3h".
func ago(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		return d.Truncate(time.Second).String()
	case d < time.Hour:
		return d.Truncate(time.Second).String()
	case d < 48*time.Hour:
		return d.Truncate(time.Minute).String()
	}
	return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
}

// render writes page name. Every value reaches the page through
// html/template's contextual escaping: a payload, an error text, a type or
// a metadata value is text, never markup.
func (h *handler) render(w http.ResponseWriter, r *http.Request, status int, name string, se *session, data map[string]any) {
	if data == nil {
		data = map[string]any{}
	}
	data["Base"] = h.base
	data["Page"] = name
	if se != nil {
		data["CSRF"] = se.csrf
		data["LoggedIn"] = !h.cfg.AllowUnauthenticatedDangerously
	}
	var buf bytes.Buffer
	if err := h.pages[name].Execute(&buf, data); err != nil {
		h.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fail answers an error: 400 for bad input, 404 for a missing row, 409 for
// a refused change, else 500 (logged, never shown).
func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, msg := http.StatusInternalServerError, "internal error: see the server's log"
	switch {
	case errors.Is(err, oncebox.ErrInvalidInput):
		status, msg = http.StatusBadRequest, err.Error()
	case errors.Is(err, dlq.ErrNotFound):
		status, msg = http.StatusNotFound, err.Error()
	case errors.Is(err, dlq.ErrInProcess), errors.Is(err, dlq.ErrInvalidTransition), errors.Is(err, dlq.ErrTooManyIDs):
		status, msg = http.StatusConflict, err.Error()
	default:
		h.logger.Error("console request failed", err, watermill.LogFields{"method": r.Method, "path": r.URL.Path})
	}
	var buf bytes.Buffer
	if terr := h.pages["error"].Execute(&buf, map[string]any{"Base": h.base, "Status": status, "Message": msg}); terr != nil {
		http.Error(w, msg, status)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func badInput(field, format string, args ...any) error {
	return fmt.Errorf("%w: console: %s: %s", oncebox.ErrInvalidInput, field, fmt.Sprintf(format, args...))
}

// overview serves GET /.
func (h *handler) overview(w http.ResponseWriter, r *http.Request, se *session) {
	ctx := r.Context()
	now := h.clock.Now().UTC()
	backlog, err := h.cfg.Dialect.Backlog(ctx, h.cfg.DB)
	if err != nil {
		h.fail(w, r, fmt.Errorf("console: overview: %w", err))
		return
	}
	type dlqLine struct {
		Source                             string
		Moved, ToRetry, InProcess, Resolve int64
	}
	dlqBySource := map[string]*dlqLine{}
	var types []dialects.ConsoleType
	byType := map[string]*dialects.ConsoleType{}
	for _, g := range backlog {
		if g.Table == dialects.BacklogDLQ {
			l := dlqBySource[g.Key]
			if l == nil {
				l = &dlqLine{Source: g.Key}
				dlqBySource[g.Key] = l
			}
			switch oncebox.DLQStatus(g.Status) {
			case oncebox.DLQStatusMoved:
				l.Moved += g.Count
			case oncebox.DLQStatusToRetry:
				l.ToRetry += g.Count
			case oncebox.DLQStatusInProcess:
				l.InProcess += g.Count
			case oncebox.DLQStatusResolved:
				l.Resolve += g.Count
			}
			continue
		}
		if h.inspector != nil {
			continue
		}
		t := byType[g.Key]
		if t == nil {
			types = append(types, dialects.ConsoleType{EventType: g.Key})
			t = &types[len(types)-1]
			byType[g.Key] = t
		}
		switch oncebox.Status(g.Status) {
		case oncebox.StatusPending:
			t.Pending += g.Count
		case oncebox.StatusInProcess:
			t.InProcess += g.Count
		case oncebox.StatusFailed:
			t.Failed += g.Count
		}
	}
	var instances []dialects.ConsoleInstance
	if h.inspector != nil {
		if types, err = h.inspector.ConsoleTypes(ctx, h.cfg.DB, now, now.Add(-h.window)); err != nil {
			h.fail(w, r, fmt.Errorf("console: overview: %w", err))
			return
		}
		if instances, err = h.inspector.ConsoleInstances(ctx, h.cfg.DB); err != nil {
			h.fail(w, r, fmt.Errorf("console: overview: %w", err))
			return
		}
	}
	sort.Slice(types, func(i, j int) bool { return types[i].EventType < types[j].EventType })
	var dlqLines []dlqLine
	for _, l := range dlqBySource {
		dlqLines = append(dlqLines, *l)
	}
	sort.Slice(dlqLines, func(i, j int) bool { return dlqLines[i].Source < dlqLines[j].Source })
	h.render(w, r, http.StatusOK, "overview", se, map[string]any{
		"Types": types, "Instances": instances, "DLQ": dlqLines, "Full": h.inspector != nil,
		"Window": h.window.String(), "Now": now,
	})
}

// filterForm is a filter as the list and fingerprint pages carry it in
// their query string and forms: the REST API's parameters.
type filterForm struct {
	Statuses  []string
	EventType string
	Source    string
	MovedFrom string
	MovedTo   string
}

// parseFilter reads the REST API's filter parameters from v.
func parseFilter(v url.Values) (filterForm, dlq.Filter, error) {
	ff := filterForm{EventType: v.Get("event_type"), Source: v.Get("source"), MovedFrom: v.Get("moved_from"), MovedTo: v.Get("moved_to")}
	var f dlq.Filter
	for _, s := range v["status"] {
		if s == "" {
			continue
		}
		ff.Statuses = append(ff.Statuses, s)
		f.Statuses = append(f.Statuses, oncebox.DLQStatus(s))
	}
	f.EventType, f.Source = ff.EventType, oncebox.DLQSource(ff.Source)
	var err error
	if f.MovedFrom, err = parseTime("moved_from", ff.MovedFrom); err != nil {
		return ff, f, err
	}
	if f.MovedTo, err = parseTime("moved_to", ff.MovedTo); err != nil {
		return ff, f, err
	}
	return ff, f, f.Validate()
}

// parseTime reads RFC 3339, or the "2006-01-02T15:04" of a datetime-local
// input (UTC).
func parseTime(name, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse("2006-01-02T15:04", s); err == nil {
		return t, nil
	}
	return time.Time{}, badInput(name, "%q is not an RFC 3339 time", s)
}

// values writes ff back as query parameters.
func (ff filterForm) values() url.Values {
	v := url.Values{}
	for _, s := range ff.Statuses {
		v.Add("status", s)
	}
	for k, s := range map[string]string{"event_type": ff.EventType, "source": ff.Source, "moved_from": ff.MovedFrom, "moved_to": ff.MovedTo} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

// has reports whether status s is among the filter's.
func (ff filterForm) Has(s string) bool {
	for _, x := range ff.Statuses {
		if x == s {
			return true
		}
	}
	return false
}

// list serves GET /dead-letters: the REST API's filters and keyset pages.
func (h *handler) list(w http.ResponseWriter, r *http.Request, se *session) {
	q := r.URL.Query()
	ff, f, err := parseFilter(q)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	page := dlq.Page{}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > dlq.MaxLimit {
			h.fail(w, r, badInput("limit", "%q is not an integer from 1 to %d", v, dlq.MaxLimit))
			return
		}
		page.Limit = n
	}
	if v := q.Get("cursor"); v != "" {
		c, err := dlq.ParseCursor(v)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		page.After = &c
	}
	rows, next, err := h.cfg.Store.List(r.Context(), f, page)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	total, err := h.cfg.Store.Count(r.Context(), f)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var nextURL string
	if next != nil {
		v := ff.values()
		v.Set("cursor", next.String())
		if page.Limit != 0 {
			v.Set("limit", strconv.Itoa(page.Limit))
		}
		nextURL = h.base + "/dead-letters?" + v.Encode()
	}
	h.render(w, r, http.StatusOK, "list", se, map[string]any{
		"Rows": rows, "Filter": ff, "Total": total, "Next": nextURL, "Query": ff.values().Encode(),
		"Statuses": allStatuses,
	})
}

var allStatuses = []oncebox.DLQStatus{oncebox.DLQStatusMoved, oncebox.DLQStatusToRetry, oncebox.DLQStatusInProcess, oncebox.DLQStatusResolved}

// payloadView is a payload as text: indented JSON when it is JSON, else a
// hex dump. Shown in a <pre> as text, never as markup.
func payloadView(p []byte) (kind, text string) {
	if json.Valid(p) {
		var buf bytes.Buffer
		if err := json.Indent(&buf, p, "", "  "); err == nil {
			return "JSON", buf.String()
		}
	}
	return "hex", hex.Dump(p)
}

// row serves GET /dead-letters/{id}: the row, or, once a retry took it
// back to the outbox, the outbox row's status.
func (h *handler) row(w http.ResponseWriter, r *http.Request, se *session) {
	id, err := oncebox.ParseEventID(r.PathValue("id"))
	if err != nil {
		h.fail(w, r, badInput("id", "%q is not a UUID", r.PathValue("id")))
		return
	}
	eventID := id
	if v := r.URL.Query().Get("event"); v != "" {
		if eventID, err = oncebox.ParseEventID(v); err != nil {
			h.fail(w, r, badInput("event", "%q is not a UUID", v))
			return
		}
	}
	data := map[string]any{"ID": id}
	row, err := h.cfg.Store.Get(r.Context(), id)
	switch {
	case errors.Is(err, dlq.ErrNotFound):
		data["Gone"] = true
	case err != nil:
		h.fail(w, r, err)
		return
	default:
		if row.EventID != nil {
			eventID = *row.EventID
		}
		kind, text := payloadView(row.Payload)
		keys := make([]string, 0, len(row.Metadata))
		for k := range row.Metadata {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var actions []string
		for _, to := range []oncebox.DLQStatus{oncebox.DLQStatusToRetry, oncebox.DLQStatusResolved, oncebox.DLQStatusMoved} {
			if dlq.Allowed(row.Status, to) {
				actions = append(actions, actionName[to])
			}
		}
		if row.Status != oncebox.DLQStatusInProcess {
			actions = append(actions, "delete")
		}
		data["Row"], data["PayloadKind"], data["Payload"], data["MetaKeys"], data["Actions"] = row, kind, text, keys, actions
	}
	data["EventID"] = eventID
	if h.inspector != nil && (data["Gone"] == true || row.Status == oncebox.DLQStatusToRetry) {
		ev, found, err := h.inspector.ConsoleOutboxEvent(r.Context(), h.cfg.DB, eventID)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		if found {
			data["Outbox"] = ev
			data["Delivered"] = ev.Status == oncebox.StatusProcessed
		}
	}
	status := http.StatusOK
	if data["Gone"] == true && data["Outbox"] == nil {
		status = http.StatusNotFound
	}
	h.render(w, r, status, "row", se, data)
}

// fingerprintView is one group of the fingerprint page with its counts by
// status.
type fingerprintView struct {
	dialects.ConsoleGroup
	Total       int64
	ByStatus    map[oncebox.DLQStatus]int64
	LastMovedAt time.Time
	SampleError string
}

// fingerprints serves GET /fingerprints.
func (h *handler) fingerprints(w http.ResponseWriter, r *http.Request, se *session) {
	if h.inspector == nil {
		h.fail(w, r, badInput("fingerprints", "the %s dialect has no fingerprint statements", h.cfg.Dialect.Name()))
		return
	}
	ff, f, err := parseFilter(r.URL.Query())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	groups, err := h.groups(r, f)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "fingerprints", se, map[string]any{"Groups": groups, "Filter": ff, "Statuses": allStatuses})
}

// maxGroups bounds the (group, status) lines the fingerprint page reads.
const maxGroups = 500

func (h *handler) groups(r *http.Request, f dlq.Filter) ([]*fingerprintView, error) {
	lines, err := h.inspector.ConsoleFingerprints(r.Context(), h.cfg.DB, dialects.DLQFilter{Statuses: f.Statuses,
		EventType: f.EventType, Source: f.Source, MovedFrom: f.MovedFrom, MovedTo: f.MovedTo}, maxGroups)
	if err != nil {
		return nil, fmt.Errorf("console: fingerprints: %w", err)
	}
	var out []*fingerprintView
	byGroup := map[dialects.ConsoleGroup]*fingerprintView{}
	for _, l := range lines {
		g := byGroup[l.ConsoleGroup]
		if g == nil {
			g = &fingerprintView{ConsoleGroup: l.ConsoleGroup, ByStatus: map[oncebox.DLQStatus]int64{}, SampleError: l.SampleError}
			byGroup[l.ConsoleGroup] = g
			out = append(out, g)
		}
		g.Total += l.Count
		g.ByStatus[l.Status] += l.Count
		if l.LastMovedAt.After(g.LastMovedAt) {
			g.LastMovedAt = l.LastMovedAt
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Total > out[j].Total })
	return out, nil
}
