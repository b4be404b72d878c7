package shipping

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/examples/orders/internal/events"
	"github.com/oncebox/watermill-oncebox/middleware"
)

// StatusShipmentPending is the status the service gives an order once its
// shipment is created.
const StatusShipmentPending = "shipment_pending"

// schemaDDL is the service's own tables, in schema (a validated identifier).
func schemaDDL(schema string) []string {
	return []string{
		// No unique constraint on order_id, on purpose: the inbox is what
		// keeps one shipment per order, and the example's check counts them.
		`CREATE TABLE IF NOT EXISTS ` + schema + `.shipments (
    id         uuid        PRIMARY KEY,
    order_id   uuid        NOT NULL,
    event_id   text        NOT NULL,
    status     text        NOT NULL,
    items      jsonb       NOT NULL,
    created_at timestamptz NOT NULL
)`,
		`CREATE INDEX IF NOT EXISTS shipments_order_id_idx ON ` + schema + `.shipments (order_id)`,
		`CREATE TABLE IF NOT EXISTS ` + schema + `.stock (
    sku      text   PRIMARY KEY,
    reserved bigint NOT NULL
)`,
		`CREATE TABLE IF NOT EXISTS ` + schema + `.order_status (
    order_id    uuid        PRIMARY KEY,
    customer_id text        NOT NULL,
    status      text        NOT NULL,
    updated_at  timestamptz NOT NULL
)`,
	}
}

// shipOrder handles one order-created event in the inbox's transaction:
// it reserves the stock of each item, creates the shipment and marks the
// order shipment_pending. Returning an error rolls all three back with the
// inbox's record of the event, and the message is retried, then parked.
func (s *Service) shipOrder(msg *message.Message) error {
	ctx := msg.Context()
	tx, ok := middleware.PgxTxFromContext(ctx)
	if !ok {
		return errors.New("no inbox transaction in the message's context: the inbox middleware must wrap this handler")
	}
	var e events.OrderCreated
	if err := json.Unmarshal(msg.Payload, &e); err != nil {
		return fmt.Errorf("decode %s: %w", events.OrderCreatedType, err)
	}
	if err := e.Validate(); err != nil {
		return err
	}
	skus := make([]string, len(e.Items))
	qtys := make([]int32, len(e.Items))
	for i, it := range e.Items {
		skus[i], qtys[i] = it.SKU, int32(it.Qty)
	}
	schema := s.cfg.Schema
	// One statement for every item; rows in sku order, so that two orders
	// sharing SKUs lock their stock rows in the same order (no deadlock).
	if _, err := tx.Exec(ctx, `INSERT INTO `+schema+`.stock AS s (sku, reserved)
SELECT t.sku, sum(t.qty) FROM unnest($1::text[], $2::integer[]) AS t (sku, qty) GROUP BY t.sku ORDER BY t.sku
ON CONFLICT (sku) DO UPDATE SET reserved = s.reserved + EXCLUDED.reserved`, skus, qtys); err != nil {
		return fmt.Errorf("reserve stock for order %s: %w", e.OrderID, err)
	}
	items, err := json.Marshal(e.Items)
	if err != nil {
		return err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	if _, err := tx.Exec(ctx, `INSERT INTO `+schema+`.shipments (id, order_id, event_id, status, items, created_at)
VALUES ($1, $2, $3, 'pending', $4, $5)`, id, e.OrderID, msg.Metadata.Get(oncebox.HeaderEventID), items, now); err != nil {
		return fmt.Errorf("create the shipment of order %s: %w", e.OrderID, err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO `+schema+`.order_status (order_id, customer_id, status, updated_at)
VALUES ($1, $2, $3, $4)
ON CONFLICT (order_id) DO UPDATE SET status = EXCLUDED.status, updated_at = EXCLUDED.updated_at`,
		e.OrderID, e.CustomerID, StatusShipmentPending, now); err != nil {
		return fmt.Errorf("mark order %s %s: %w", e.OrderID, StatusShipmentPending, err)
	}
	return nil
}

// Shipment is a shipment as GET /shipments/{order_id} returns it.
type Shipment struct {
	ID        string          `json:"id"`
	Status    string          `json:"status"`
	Items     json.RawMessage `json:"items"`
	EventID   string          `json:"event_id"`
	CreatedAt time.Time       `json:"created_at"`
}

// Handler returns the service's routes:
//
//	GET /healthz               200 when the database answers and the router runs
//	GET /shipments/{order_id}  the order's shipping status and shipments, or 404
//	GET /metrics               Prometheus metrics of the inbox
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		body := map[string]any{"status": "ok", "topic": s.topic}
		code := http.StatusOK
		if err := s.cfg.Pool.Ping(ctx); err != nil {
			body["status"], body["database"], code = "unavailable", err.Error(), http.StatusServiceUnavailable
		}
		if !s.router.IsRunning() || s.router.IsClosed() {
			body["status"], body["router"], code = "unavailable", "not running", http.StatusServiceUnavailable
		}
		writeJSON(w, code, body)
	})
	mux.HandleFunc("GET /shipments/{order_id}", func(w http.ResponseWriter, r *http.Request) {
		id, err := uuid.Parse(r.PathValue("order_id"))
		if err != nil {
			writeJSON(w, http.StatusNotFound, map[string]any{"error": "not an order id", "order_id": r.PathValue("order_id")})
			return
		}
		body, found, err := s.shipments(r.Context(), id)
		switch {
		case err != nil:
			s.logger.Error("Could not read shipments", err, watermill.LogFields{"order_id": id.String()})
			writeJSON(w, http.StatusInternalServerError, map[string]any{"error": "could not read the shipments; retry later"})
		case !found:
			writeJSON(w, http.StatusNotFound, map[string]any{"error": "no shipment for this order (yet)", "order_id": id.String()})
		default:
			writeJSON(w, http.StatusOK, body)
		}
	})
	return mux
}

func (s *Service) shipments(ctx context.Context, orderID uuid.UUID) (map[string]any, bool, error) {
	var status string
	var updated time.Time
	err := s.cfg.Pool.QueryRow(ctx, `SELECT status, updated_at FROM `+s.cfg.Schema+`.order_status WHERE order_id = $1`, orderID).
		Scan(&status, &updated)
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, false, nil
		}
		return nil, false, err
	}
	rows, err := s.cfg.Pool.Query(ctx, `SELECT id::text, status, items, event_id, created_at FROM `+s.cfg.Schema+`.shipments
WHERE order_id = $1 ORDER BY created_at`, orderID)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	list := []Shipment{}
	for rows.Next() {
		var sh Shipment
		if err := rows.Scan(&sh.ID, &sh.Status, &sh.Items, &sh.EventID, &sh.CreatedAt); err != nil {
			return nil, false, err
		}
		sh.CreatedAt = sh.CreatedAt.UTC()
		list = append(list, sh)
	}
	if err := rows.Err(); err != nil {
		return nil, false, err
	}
	return map[string]any{"order_id": orderID.String(), "status": status, "updated_at": updated.UTC(), "shipments": list}, true, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
