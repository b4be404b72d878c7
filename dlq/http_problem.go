package dlq

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/oncebox/watermill-oncebox"
)

// Problem is an RFC 7807 problem, the body of every error response of the
// REST handler (Content-Type application/problem+json).
type Problem struct {
	// Type is "about:blank": the status code says it all.
	Type string `json:"type"`
	// Title is the status text of Status.
	Title string `json:"title"`
	// Status is the HTTP status code.
	Status int `json:"status"`
	// Detail explains this occurrence.
	Detail string `json:"detail"`
	// InvalidParams names the inputs at fault, for a 400.
	InvalidParams []InvalidParam `json:"invalid_params,omitempty"`
}

// InvalidParam names one input at fault: a query parameter, a path
// parameter ("id") or a body field ("status", "ids", "filter.source").
type InvalidParam struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// httpError is an error with the response it maps to.
type httpError struct {
	status int
	detail string
	params []InvalidParam
}

// Error returns the detail.
func (e *httpError) Error() string { return e.detail }

// badRequest returns a 400 naming the input name at fault.
func badRequest(name, reason string) *httpError {
	return &httpError{status: http.StatusBadRequest, detail: "invalid " + name + ": " + reason,
		params: []InvalidParam{{Name: name, Reason: reason}}}
}

// writeProblem writes a problem response.
func writeProblem(w http.ResponseWriter, status int, detail string, params []InvalidParam) {
	b, _ := json.Marshal(Problem{Type: "about:blank", Title: http.StatusText(status), Status: status,
		Detail: detail, InvalidParams: params})
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// writeError writes the problem err maps to; the cause of a 500 is logged.
func (h *handler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	p := problemFor(err)
	if p.Status == http.StatusInternalServerError {
		h.logger.Error("DLQ handler: request failed", err,
			watermill.LogFields{"method": r.Method, "path": r.URL.Path})
	}
	writeProblem(w, p.Status, p.Detail, p.InvalidParams)
}

// problemFor maps an error of the handler or the Store to its problem; an
// unknown error is a 500 with a generic detail.
func problemFor(err error) Problem {
	var he *httpError
	var te *TransitionError
	var mbe *http.MaxBytesError
	status, detail := http.StatusInternalServerError, "internal error; see the server log"
	var params []InvalidParam
	switch {
	case errors.As(err, &he):
		status, detail, params = he.status, he.detail, he.params
	case errors.As(err, &mbe):
		status, detail = http.StatusRequestEntityTooLarge, "the body is larger than the limit"
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrInProcess):
		status, detail = http.StatusNotFound, err.Error()
		if errors.Is(err, ErrInProcess) {
			status = http.StatusConflict
		}
	case errors.As(err, &te):
		status, detail = http.StatusConflict, "status change from "+string(te.From)+" to "+string(te.To)+" is not allowed"
	case errors.Is(err, ErrTooManyIDs):
		he := badRequest("ids", "more than 1000 ids")
		status, detail, params = he.status, he.detail, he.params
	case errors.Is(err, oncebox.ErrInvalidInput):
		// The handler validates its inputs first; this is a fallback.
		status, detail = http.StatusBadRequest, err.Error()
	}
	return Problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail, InvalidParams: params}
}

// trackingWriter records whether the response has started, so a recovered
// panic writes a 500 only when it can.
type trackingWriter struct {
	http.ResponseWriter
	wrote bool
}

// WriteHeader records the start of the response.
func (w *trackingWriter) WriteHeader(code int) {
	w.wrote = true
	w.ResponseWriter.WriteHeader(code)
}

// Write records the start of the response.
func (w *trackingWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Unwrap gives http.ResponseController the underlying writer.
func (w *trackingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// probeWriter captures the response of the mux's own 404/405 handler.
type probeWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

// Header returns the captured header.
func (p *probeWriter) Header() http.Header { return p.header }

// WriteHeader captures the status.
func (p *probeWriter) WriteHeader(code int) {
	if p.status == 0 {
		p.status = code
	}
}

// Write captures the body.
func (p *probeWriter) Write(b []byte) (int, error) {
	if p.status == 0 {
		p.status = http.StatusOK
	}
	return p.body.Write(b)
}
