package dlq

import (
	"cmp"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/oncebox/watermill-oncebox"
)

// DefaultBasePath is the prefix the REST handler serves under when
// HandlerConfig.BasePath is empty.
const DefaultBasePath = "/dlq"

// MaxBodyBytes is the largest request body the REST handler reads; a larger
// one is refused with 413.
const MaxBodyBytes = 1 << 20

// ErrForbidden, wrapped by an error of HandlerConfig.Authorize, refuses the
// request with 403 instead of 401: the caller is known but may not do this.
var ErrForbidden = errors.New("oncebox: dlq: forbidden")

// errUnauthorized is what BearerToken returns for missing or wrong
// credentials.
var errUnauthorized = errors.New("oncebox: dlq: missing or invalid bearer token")

// HandlerConfig configures the DLQ REST handler.
type HandlerConfig struct {
	// Store serves the requests. Required.
	Store *Store
	// Authorize is called for every request; a non-nil error refuses it
	// with 401 (or 403 if the error wraps ErrForbidden). Required unless
	// AllowUnauthenticatedDangerously.
	Authorize func(r *http.Request) error
	// AllowUnauthenticatedDangerously serves every request without
	// Authorize: only for a handler reachable by trusted callers alone.
	AllowUnauthenticatedDangerously bool
	// Logger logs the errors behind 500 responses and recovered panics.
	// Optional: nothing is logged without it.
	Logger watermill.LoggerAdapter
	// BasePath is the prefix the handler is mounted under, default "/dlq";
	// see ValidateBasePath for what it may be.
	// The handler matches the full request path, so mount it without
	// http.StripPrefix, e.g. mux.Handle("/dlq/", h).
	BasePath string
}

// Validate checks cfg as NewHandler does: a nil Store, a nil Authorize
// without AllowUnauthenticatedDangerously, a BasePath that ValidateBasePath
// refuses. The error names each field at fault and wraps
// oncebox.ErrInvalidConfig.
func (cfg HandlerConfig) Validate() error {
	var errs []error
	if cfg.Store == nil {
		errs = append(errs, errors.New("HandlerConfig.Store is nil"))
	}
	if cfg.Authorize == nil && !cfg.AllowUnauthenticatedDangerously {
		errs = append(errs, errors.New("HandlerConfig.Authorize is nil: set it (e.g. dlq.BearerToken) or set AllowUnauthenticatedDangerously"))
	}
	if err := ValidateBasePath(cmp.Or(cfg.BasePath, DefaultBasePath)); err != nil {
		errs = append(errs, fmt.Errorf("HandlerConfig.%w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: dlq: %w", oncebox.ErrInvalidConfig, err)
	}
	return nil
}

// NewHandler returns the DLQ REST handler (see docs/dlq.md and
// docs/dlq-openapi.yaml). It refuses, with an error wrapping
// oncebox.ErrInvalidConfig that names the field, a nil Store, a nil
// Authorize without AllowUnauthenticatedDangerously, and a BasePath that
// ValidateBasePath refuses.
func NewHandler(cfg HandlerConfig) (http.Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	base := strings.TrimSuffix(cmp.Or(cfg.BasePath, DefaultBasePath), "/")
	logger := cfg.Logger
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	h := &handler{store: cfg.Store, authorize: cfg.Authorize, logger: logger, mux: http.NewServeMux()}
	for _, rt := range routes {
		if err := handleFunc(h.mux, rt.Method+" "+base+rt.Path, func(w http.ResponseWriter, r *http.Request) {
			if err := rt.serve(h, w, r); err != nil {
				h.writeError(w, r, err)
			}
		}); err != nil {
			// ValidateBasePath should have refused the base path; this
			// keeps a ServeMux panic we did not foresee from reaching the
			// caller.
			return nil, fmt.Errorf("%w: dlq: HandlerConfig.BasePath %q: %w", oncebox.ErrInvalidConfig, cfg.BasePath, err)
		}
	}
	return h, nil
}

// handleFunc registers pattern on mux, returning ServeMux's panic (a bad
// or conflicting pattern) as an error.
func handleFunc(mux *http.ServeMux, pattern string, f http.HandlerFunc) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("cannot serve the pattern %q: %v", pattern, v)
		}
	}()
	mux.HandleFunc(pattern, f)
	return nil
}

// ValidateBasePath checks a base path for HandlerConfig.BasePath: "/" or
// "/seg/seg…", optionally with one trailing "/", each segment non-empty, not
// "." or "..", and made of the characters URL paths carry unescaped and
// http.ServeMux patterns read literally: ASCII letters, digits, '-', '.',
// '_' and '~'. Anything else (an empty, "." or ".." segment, which ServeMux
// redirects away from; '{', '}', which are wildcards; spaces, '%', '?',
// '#', control or non-ASCII characters) would make the handler panic or be
// served under another path. The error names the base path.
func ValidateBasePath(base string) error {
	if !strings.HasPrefix(base, "/") {
		return fmt.Errorf("BasePath %q does not start with /", base)
	}
	trimmed := strings.TrimSuffix(base, "/")
	if trimmed == "" {
		return nil // "/": the API at the root
	}
	for i, seg := range strings.Split(trimmed[1:], "/") {
		switch seg {
		case "":
			return fmt.Errorf("BasePath %q has an empty segment (//) at segment %d", base, i+1)
		case ".", "..":
			return fmt.Errorf("BasePath %q has a %q segment: give the clean path", base, seg)
		}
		for _, c := range []byte(seg) {
			if !basePathChar(c) {
				return fmt.Errorf("BasePath %q has the character %q: use letters, digits, '-', '.', '_' and '~'", base, rune(c))
			}
		}
	}
	return nil
}

// basePathChar reports whether c is an RFC 3986 unreserved character.
func basePathChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// BearerToken returns an Authorize func that accepts a request whose
// Authorization header is "Bearer <token>", compared in constant time. An
// empty token is an error.
func BearerToken(token string) (func(*http.Request) error, error) {
	if token == "" {
		return nil, fmt.Errorf("%w: dlq: BearerToken: the token is empty", oncebox.ErrInvalidConfig)
	}
	// Comparing digests keeps the comparison constant-time in the length too.
	want := sha256.Sum256([]byte(token))
	return func(r *http.Request) error {
		scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return errUnauthorized
		}
		sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
		if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			return errUnauthorized
		}
		return nil
	}, nil
}

// route is one endpoint of the REST handler: a method and a path relative
// to the base path, in http.ServeMux (and OpenAPI) pattern syntax.
type route struct {
	// Method is the HTTP method, e.g. "GET".
	Method string
	// Path is relative to the base path, e.g. "/events/{id}".
	Path string
	// serve handles the request; an error becomes a problem response.
	serve func(h *handler, w http.ResponseWriter, r *http.Request) error
}

// routes is the table the handler registers (the tests read it through
// export_test.go and check it against the OpenAPI document).
var routes = []route{
	{http.MethodGet, "/events", (*handler).list},
	{http.MethodPatch, "/events", (*handler).setStatusBulk},
	{http.MethodDelete, "/events", (*handler).deleteBulk},
	{http.MethodGet, "/events/count", (*handler).count},
	{http.MethodGet, "/events/{id}", (*handler).get},
	{http.MethodPatch, "/events/{id}", (*handler).setStatus},
	{http.MethodDelete, "/events/{id}", (*handler).deleteOne},
}

// handler is the http.Handler NewHandler returns.
type handler struct {
	store     *Store
	authorize func(*http.Request) error
	logger    watermill.LoggerAdapter
	mux       *http.ServeMux
}

// ServeHTTP authorizes the request, routes it and turns a panic into a 500.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tw := &trackingWriter{ResponseWriter: w}
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			h.logger.Error("DLQ handler panicked", fmt.Errorf("panic: %v", v),
				watermill.LogFields{"method": r.Method, "path": r.URL.Path})
			if !tw.wrote {
				writeProblem(tw, http.StatusInternalServerError, "internal error", nil)
			}
		}
	}()
	if h.authorize != nil {
		if err := h.authorize(r); err != nil {
			if errors.Is(err, ErrForbidden) {
				writeProblem(tw, http.StatusForbidden, "this caller may not do this", nil)
				return
			}
			tw.Header().Set("WWW-Authenticate", `Bearer realm="dlq"`)
			writeProblem(tw, http.StatusUnauthorized, "missing or invalid credentials", nil)
			return
		}
	}
	if _, pattern := h.mux.Handler(r); pattern == "" {
		// No route: let the mux tell 404 from 405 (and set Allow), then
		// answer with a problem instead of its text.
		probe := &probeWriter{header: http.Header{}}
		h.mux.ServeHTTP(probe, r)
		switch probe.status {
		case http.StatusMethodNotAllowed:
			if allow := probe.header.Get("Allow"); allow != "" {
				tw.Header().Set("Allow", allow)
			}
			writeProblem(tw, http.StatusMethodNotAllowed, fmt.Sprintf("method %s is not allowed on %s", r.Method, r.URL.Path), nil)
		case http.StatusNotFound:
			writeProblem(tw, http.StatusNotFound, fmt.Sprintf("no endpoint at %s", r.URL.Path), nil)
		default: // a redirect to the clean path
			for k, v := range probe.header {
				tw.Header()[k] = v
			}
			tw.WriteHeader(probe.status)
			_, _ = tw.Write(probe.body.Bytes())
		}
		return
	}
	h.mux.ServeHTTP(tw, r)
}

// get serves GET {base}/events/{id}.
func (h *handler) get(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	row, err := h.store.Get(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, row)
	return nil
}

// ListResponse is the body of GET {base}/events, and what `oncebox --json
// dlq list` prints: one page of rows (each in the shape of Row.MarshalJSON)
// and the cursor of the next page, left out on the last one.
type ListResponse struct {
	Items      []Row  `json:"items"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// NewListResponse returns the listing of rows, one page of a List call
// whose next cursor is next (nil on the last page).
func NewListResponse(rows []Row, next *Cursor) ListResponse {
	resp := ListResponse{Items: rows}
	if resp.Items == nil {
		resp.Items = []Row{}
	}
	if next != nil {
		resp.NextCursor = next.String()
	}
	return resp
}

// list serves GET {base}/events.
func (h *handler) list(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, true)
	if err != nil {
		return err
	}
	rows, next, err := h.store.List(r.Context(), q.filter, q.page)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, NewListResponse(rows, next))
	return nil
}

// count serves GET {base}/events/count.
func (h *handler) count(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, false)
	if err != nil {
		return err
	}
	n, err := h.store.Count(r.Context(), q.filter)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]int{"count": n})
	return nil
}

// statusBody is the body of PATCH {base}/events/{id}.
type statusBody struct {
	Status *string `json:"status"`
}

// setStatus serves PATCH {base}/events/{id}: 200 with the updated row.
func (h *handler) setStatus(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	var body statusBody
	if err := decodeBody(w, r, &body); err != nil {
		return err
	}
	to, err := targetStatus(body.Status)
	if err != nil {
		return err
	}
	if err := h.store.SetStatus(r.Context(), id, to); err != nil {
		return err
	}
	row, err := h.store.Get(r.Context(), id)
	if err != nil {
		return err
	}
	if to == oncebox.DLQStatusToRetry {
		w.Header().Set(PickupHeader, h.store.RetryPickup().Short())
	}
	writeJSON(w, http.StatusOK, row)
	return nil
}

// bulkStatusBody is the body of PATCH {base}/events.
type bulkStatusBody struct {
	Status *string     `json:"status"`
	IDs    *[]string   `json:"ids"`
	Filter *filterJSON `json:"filter"`
}

// setStatusBulk serves PATCH {base}/events: {"updated": n}.
func (h *handler) setStatusBulk(w http.ResponseWriter, r *http.Request) error {
	var body bulkStatusBody
	if err := decodeBody(w, r, &body); err != nil {
		return err
	}
	to, err := targetStatus(body.Status)
	if err != nil {
		return err
	}
	ids, f, err := selection(body.IDs, body.Filter)
	if err != nil {
		return err
	}
	var n int
	if ids != nil {
		n, err = h.store.SetStatusMany(r.Context(), ids, to)
	} else {
		n, err = h.store.SetStatusWhere(r.Context(), f, to)
	}
	if err != nil {
		return err
	}
	if to != oncebox.DLQStatusToRetry {
		writeJSON(w, http.StatusOK, map[string]int{"updated": n})
		return nil
	}
	pickup := h.store.RetryPickup()
	w.Header().Set(PickupHeader, pickup.Short())
	writeJSON(w, http.StatusOK, bulkRetryJSON{Updated: n, Pickup: newPickupJSON(pickup)})
	return nil
}

// PickupHeader is the response header of a PATCH that set rows TO_RETRY:
// "woken" when the relays' dlq-retry job was woken, else "within 10s"
// (Pickup.Short).
const PickupHeader = "Oncebox-Retry-Pickup"

// bulkRetryJSON is the body of a PATCH {base}/events to TO_RETRY.
type bulkRetryJSON struct {
	Updated int        `json:"updated"`
	Pickup  pickupJSON `json:"pickup"`
}

// pickupJSON is a Pickup as the REST API shows it (schema RetryPickup).
type pickupJSON struct {
	Woken         bool   `json:"woken"`
	WithinSeconds int    `json:"within_seconds"`
	Message       string `json:"message"`
}

func newPickupJSON(p Pickup) pickupJSON {
	return pickupJSON{Woken: p.Woken, WithinSeconds: int(p.Within / time.Second), Message: p.String()}
}

// deleteOne serves DELETE {base}/events/{id}: 204.
func (h *handler) deleteOne(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	if err := h.store.Delete(r.Context(), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// bulkDeleteBody is the body of DELETE {base}/events.
type bulkDeleteBody struct {
	IDs    *[]string   `json:"ids"`
	Filter *filterJSON `json:"filter"`
}

// deleteBulk serves DELETE {base}/events: {"deleted": n}.
func (h *handler) deleteBulk(w http.ResponseWriter, r *http.Request) error {
	var body bulkDeleteBody
	if err := decodeBody(w, r, &body); err != nil {
		return err
	}
	ids, f, err := selection(body.IDs, body.Filter)
	if err != nil {
		return err
	}
	var n int
	if ids != nil {
		n, err = h.store.DeleteMany(r.Context(), ids)
	} else {
		n, err = h.store.DeleteWhere(r.Context(), f)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]int{"deleted": n})
	return nil
}

// rowJSON is a Row as the REST API and the CLI's --json show it
// (docs/dlq-openapi.yaml, schema Row).
type rowJSON struct {
	ID          oncebox.EventID   `json:"id"`
	EventID     *oncebox.EventID  `json:"event_id"`
	Source      oncebox.DLQSource `json:"source"`
	HandlerName string            `json:"handler_name"`
	EventType   string            `json:"event_type"`
	Topic       string            `json:"topic"`
	Key         string            `json:"key"`
	MessageUUID string            `json:"message_uuid"`
	Payload     []byte            `json:"payload"`
	PayloadSize int               `json:"payload_size"`
	// PayloadTruncated is true in a listing whose payload was cut to
	// ListPayloadBytes; GET of the row gives it whole.
	PayloadTruncated bool              `json:"payload_truncated"`
	Metadata         map[string]string `json:"metadata"`
	Status           oncebox.DLQStatus `json:"status"`
	RetryCount       int               `json:"retry_count"`
	LastError        string            `json:"last_error"`
	CreatedAt        time.Time         `json:"created_at"`
	FirstFailedAt    *time.Time        `json:"first_failed_at"`
	LastFailedAt     *time.Time        `json:"last_failed_at"`
	MovedAt          time.Time         `json:"moved_at"`
	UpdatedAt        time.Time         `json:"updated_at"`
}

// MarshalJSON encodes r in the one JSON shape of a DLQ row, that of the
// REST API (docs/dlq-openapi.yaml, schema Row) and of `oncebox --json dlq
// list|show`: snake_case keys, ids as UUID strings, the payload in base64
// (payload_truncated tells a listing's cut payload), times in RFC 3339.
func (r Row) MarshalJSON() ([]byte, error) {
	return json.Marshal(rowJSON{ID: r.ID, EventID: r.EventID, Source: r.Source, HandlerName: r.HandlerName,
		EventType: r.EventType, Topic: r.Topic, Key: r.Key, MessageUUID: r.MessageUUID, Payload: r.Payload,
		PayloadSize: r.PayloadSize, PayloadTruncated: r.PayloadTruncated, Metadata: r.Metadata, Status: r.Status, RetryCount: r.RetryCount, LastError: r.LastError,
		CreatedAt: r.CreatedAt, FirstFailedAt: r.FirstFailedAt, LastFailedAt: r.LastFailedAt,
		MovedAt: r.MovedAt, UpdatedAt: r.UpdatedAt})
}

// writeJSON writes v as an application/json response.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("dlq: encode the response: %v", err)) // recovered into a 500
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
