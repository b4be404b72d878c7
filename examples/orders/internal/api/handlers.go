package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Problem is an RFC 9457 problem details body (application/problem+json).
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Errors lists the invalid fields of a 400.
	Errors []FieldError `json:"errors,omitempty"`
}

// Handler returns the service's routes:
//
//	POST /orders       create an order: 201 with the order, 400/413/415 with a problem
//	GET  /orders/{id}  the order and its status: 200, or 404
//	GET  /healthz      200 when the database answers, 503 otherwise
//	GET  /metrics      Prometheus metrics: the outbox backlog and the relay
//
// With Config.DisableAPI only /healthz and /metrics are served.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	if !s.cfg.DisableAPI {
		mux.HandleFunc("POST /orders", s.postOrder)
		mux.HandleFunc("GET /orders/{id}", s.getOrderHandler)
	}
	return s.recoverer(mux)
}

func (s *Server) postOrder(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			writeProblem(w, http.StatusUnsupportedMediaType, "Unsupported media type",
				fmt.Sprintf("Content-Type %q: send application/json", ct), nil)
			return
		}
	}
	r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	customerID, items, problems, err := DecodeOrder(r.Body)
	switch {
	case errors.Is(err, errTooLarge):
		writeProblem(w, http.StatusRequestEntityTooLarge, "Request body too large",
			fmt.Sprintf("the body must be at most %d bytes", MaxBodyBytes), nil)
		return
	case err != nil:
		// The client went away mid-body, or the read timed out.
		writeProblem(w, http.StatusBadRequest, "Unreadable request body", err.Error(), nil)
		return
	case len(problems) > 0:
		writeProblem(w, http.StatusBadRequest, "Invalid order", problems[0].Error(), problems)
		return
	}
	o, err := s.createOrder(r.Context(), customerID, items)
	if err != nil {
		if r.Context().Err() != nil {
			return // the client left; the transaction rolled back
		}
		s.logger.Error("Could not create an order", err, nil)
		writeProblem(w, http.StatusInternalServerError, "Internal error", "the order was not created; retry later", nil)
		return
	}
	w.Header().Set("Location", "/orders/"+o.ID)
	writeJSON(w, http.StatusCreated, o)
}

func (s *Server) getOrderHandler(w http.ResponseWriter, r *http.Request) {
	raw := r.PathValue("id")
	id, err := uuid.Parse(raw)
	if err != nil {
		writeProblem(w, http.StatusNotFound, "Order not found", fmt.Sprintf("%q is not an order id", raw),
			[]FieldError{{Field: "id", Message: "must be an order id as returned by POST /orders"}})
		return
	}
	o, err := s.getOrder(r.Context(), id)
	switch {
	case errors.Is(err, errNotFound):
		writeProblem(w, http.StatusNotFound, "Order not found", "no order "+id.String(), nil)
	case err != nil:
		if r.Context().Err() != nil {
			return
		}
		s.logger.Error("Could not read an order", err, watermill.LogFields{"order_id": id.String()})
		writeProblem(w, http.StatusInternalServerError, "Internal error", "could not read the order; retry later", nil)
	default:
		writeJSON(w, http.StatusOK, o)
	}
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	body := map[string]any{"status": "ok", "api": !s.cfg.DisableAPI, "relay": s.relay}
	if err := s.cfg.Pool.Ping(ctx); err != nil {
		body["status"] = "unavailable"
		body["database"] = err.Error()
		writeJSON(w, http.StatusServiceUnavailable, body)
		return
	}
	writeJSON(w, http.StatusOK, body)
}

// recoverer turns a panic in a handler into a 500 problem (and a log line)
// instead of a dropped connection.
func (s *Server) recoverer(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.logger.Error("Handler panicked", fmt.Errorf("%v", v), watermill.LogFields{"path": r.URL.Path})
				writeProblem(w, http.StatusInternalServerError, "Internal error", "", nil)
			}
		}()
		h.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeProblem(w http.ResponseWriter, status int, title, detail string, errs []FieldError) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(Problem{Type: "about:blank", Title: title, Status: status, Detail: detail, Errors: errs})
}
