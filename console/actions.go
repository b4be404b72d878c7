package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dlq"
)

// The actions of the forms and the status each sets ("delete" sets none).
var actionTarget = map[string]oncebox.DLQStatus{
	"retry":   oncebox.DLQStatusToRetry,
	"resolve": oncebox.DLQStatusResolved,
	"reopen":  oncebox.DLQStatusMoved,
	"delete":  "",
}

var actionName = map[oncebox.DLQStatus]string{
	oncebox.DLQStatusToRetry:  "retry",
	oncebox.DLQStatusResolved: "resolve",
	oncebox.DLQStatusMoved:    "reopen",
}

// act is a change asked for by a form: an action over a scope.
type act struct {
	Action string
	to     oncebox.DLQStatus
	// Scope is "one" or "ids" (IDs), "filter" (Filter) or "fingerprint"
	// (Group).
	Scope  string
	IDs    []oncebox.EventID
	Filter filterForm
	filter dlq.Filter
	Group  dialects.ConsoleGroup
}

// changeable returns the statuses a row may have for a's action to change
// it: the dlq package's rule (dlq.Allowed), and for a delete every status
// but IN_PROCESS, as the Store's deletes skip it.
func (a act) changeable() []oncebox.DLQStatus {
	var out []oncebox.DLQStatus
	for _, s := range allStatuses {
		if a.Action == "delete" && s != oncebox.DLQStatusInProcess || a.Action != "delete" && dlq.Allowed(s, a.to) {
			out = append(out, s)
		}
	}
	return out
}

// parseAct reads an act from a posted form; errors name the field.
func parseAct(form url.Values) (act, error) {
	a := act{Action: form.Get("action"), Scope: form.Get("scope")}
	to, ok := actionTarget[a.Action]
	if !ok {
		return a, badInput("action", "%q is not retry, resolve, reopen or delete", a.Action)
	}
	a.to = to
	switch a.Scope {
	case "one", "ids":
		for _, v := range form["id"] {
			id, err := oncebox.ParseEventID(v)
			if err != nil {
				return a, badInput("id", "%q is not a UUID", v)
			}
			a.IDs = append(a.IDs, id)
		}
		if len(a.IDs) == 0 {
			return a, badInput("id", "no row selected")
		}
		if a.Scope == "one" && len(a.IDs) != 1 {
			return a, badInput("id", "scope one takes one id, got %d", len(a.IDs))
		}
		if len(a.IDs) > dlq.MaxIDs {
			return a, badInput("id", "%d rows selected, at most %d", len(a.IDs), dlq.MaxIDs)
		}
	case "filter":
		var err error
		if a.Filter, a.filter, err = parseFilter(form); err != nil {
			return a, err
		}
	case "fingerprint":
		a.Group = dialects.ConsoleGroup{Source: oncebox.DLQSource(form.Get("g_source")), EventType: form.Get("g_type"), ErrorClass: form.Get("g_class")}
		if a.Group.Source != oncebox.DLQSourcePublisher && a.Group.Source != oncebox.DLQSourceConsumer {
			return a, badInput("g_source", "%q is not publisher or consumer", a.Group.Source)
		}
	default:
		return a, badInput("scope", "%q is not one, ids, filter or fingerprint", a.Scope)
	}
	return a, nil
}

// count returns how many rows a would change now.
func (h *handler) count(ctx context.Context, r *http.Request, a act) (int64, error) {
	can := map[oncebox.DLQStatus]bool{}
	for _, s := range a.changeable() {
		can[s] = true
	}
	switch a.Scope {
	case "one", "ids":
		var n int64
		for _, id := range a.IDs {
			row, err := h.cfg.Store.Get(ctx, id)
			if err != nil {
				if a.Scope == "ids" && isNotFound(err) {
					continue
				}
				return 0, err
			}
			if can[row.Status] && (a.Action == "delete" || row.Status != a.to) {
				n++
			}
		}
		return n, nil
	case "filter":
		f := a.filter
		f.Statuses = intersect(f.Statuses, a.changeable())
		if len(f.Statuses) == 0 {
			return 0, nil
		}
		n, err := h.cfg.Store.Count(ctx, f)
		return int64(n), err
	default:
		if h.inspector == nil {
			return 0, badInput("scope", "the %s dialect has no fingerprint statements", h.cfg.Dialect.Name())
		}
		groups, err := h.groups(r, dlq.Filter{Source: a.Group.Source, EventType: a.Group.EventType})
		if err != nil {
			return 0, err
		}
		var n int64
		for _, g := range groups {
			if g.ConsoleGroup == a.Group {
				for s, c := range g.ByStatus {
					if can[s] {
						n += c
					}
				}
			}
		}
		return n, nil
	}
}

func intersect(asked, allowed []oncebox.DLQStatus) []oncebox.DLQStatus {
	if len(asked) == 0 {
		return allowed
	}
	var out []oncebox.DLQStatus
	for _, s := range asked {
		for _, t := range allowed {
			if s == t {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

// confirm serves POST /confirm: it states how many rows the act would
// change and asks again.
func (h *handler) confirm(w http.ResponseWriter, r *http.Request, se *session) {
	a, err := parseAct(r.PostForm)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	n, err := h.count(r.Context(), r, a)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "confirm", se, map[string]any{"Act": a, "Count": n, "Back": h.back(r.PostForm.Get("back"))})
}

// apply serves POST /apply: the change itself, through the dlq.Store.
func (h *handler) apply(w http.ResponseWriter, r *http.Request, se *session) {
	a, err := parseAct(r.PostForm)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	ctx := r.Context()
	var n int
	switch a.Scope {
	case "one":
		id := a.IDs[0]
		if a.Action == "delete" {
			err = h.cfg.Store.Delete(ctx, id)
		} else {
			err = h.cfg.Store.SetStatus(ctx, id, a.to)
		}
		if err != nil {
			h.fail(w, r, err)
			return
		}
		to := fmt.Sprintf("%s/dead-letters/%s", h.base, id)
		if row, err := h.cfg.Store.Get(ctx, id); err == nil && row.EventID != nil && *row.EventID != id {
			to += "?event=" + row.EventID.String()
		}
		http.Redirect(w, r, to, http.StatusSeeOther)
		return
	case "ids":
		if a.Action == "delete" {
			n, err = h.cfg.Store.DeleteMany(ctx, a.IDs)
		} else {
			n, err = h.cfg.Store.SetStatusMany(ctx, a.IDs, a.to)
		}
	case "filter":
		if a.Action == "delete" {
			n, err = h.cfg.Store.DeleteWhere(ctx, a.filter)
		} else {
			n, err = h.cfg.Store.SetStatusWhere(ctx, a.filter, a.to)
		}
	default:
		n, err = h.applyGroup(ctx, a)
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "done", se, map[string]any{"Act": a, "Count": n, "Back": h.back(r.PostForm.Get("back"))})
}

// applyGroup changes the rows of a fingerprint, MaxIDs at a time, each
// batch one statement of the Store (SetStatusMany, DeleteMany), so that the
// rule of a status change has one implementation.
func (h *handler) applyGroup(ctx context.Context, a act) (int, error) {
	if h.inspector == nil {
		return 0, badInput("scope", "the %s dialect has no fingerprint statements", h.cfg.Dialect.Name())
	}
	total := 0
	var after *oncebox.EventID
	for {
		ids, err := h.inspector.ConsoleFingerprintIDs(ctx, h.cfg.DB, a.Group, a.changeable(), after, dlq.MaxIDs)
		if err != nil {
			return total, fmt.Errorf("console: fingerprint: %w", err)
		}
		if len(ids) == 0 {
			return total, nil
		}
		var n int
		if a.Action == "delete" {
			n, err = h.cfg.Store.DeleteMany(ctx, ids)
		} else {
			n, err = h.cfg.Store.SetStatusMany(ctx, ids, a.to)
		}
		total += n
		if err != nil {
			return total, err
		}
		if len(ids) < dlq.MaxIDs {
			return total, nil
		}
		after = &ids[len(ids)-1]
	}
}

func isNotFound(err error) bool { return errors.Is(err, dlq.ErrNotFound) }

// back returns v, a page of this console to go back to, or the overview
// when v is not a path under the base path.
func (h *handler) back(v string) string {
	if !strings.HasPrefix(v, h.base+"/") || strings.HasPrefix(v, "//") || strings.ContainsAny(v, "\\\r\n") {
		return h.base + "/"
	}
	return v
}
