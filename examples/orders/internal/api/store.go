package api

import (
	"context"
	"errors"
	"fmt"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/examples/orders/internal/events"
	"github.com/oncebox/watermill-oncebox/publisher"
)

// StatusCreated is the status of an order the API has just written. The
// shipping state of an order lives in the shipping service, which owns it.
const StatusCreated = "created"

// schemaDDL is the service's own tables, in schema (a validated identifier).
func schemaDDL(schema string) []string {
	return []string{
		`CREATE TABLE IF NOT EXISTS ` + schema + `.orders (
    id          uuid        PRIMARY KEY,
    customer_id text        NOT NULL,
    status      text        NOT NULL,
    created_at  timestamptz NOT NULL
)`,
		`CREATE TABLE IF NOT EXISTS ` + schema + `.order_items (
    order_id uuid    NOT NULL REFERENCES ` + schema + `.orders (id) ON DELETE CASCADE,
    line     integer NOT NULL,
    sku      text    NOT NULL,
    qty      integer NOT NULL CHECK (qty > 0),
    PRIMARY KEY (order_id, line)
)`,
	}
}

// Order is an order as the API returns it.
type Order struct {
	ID         string        `json:"id"`
	CustomerID string        `json:"customer_id"`
	Status     string        `json:"status"`
	Items      []events.Item `json:"items"`
	CreatedAt  time.Time     `json:"created_at"`
	// EventID is the id of the order-created event written with the order
	// (returned by POST only): the key the consumers deduplicate on.
	EventID string `json:"event_id,omitempty"`
}

// createOrder writes the order, its items and its order-created event in
// one transaction: either all three commit or none does. The event's
// ordering key is the order id.
func (s *Server) createOrder(ctx context.Context, customerID string, items []events.Item) (Order, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return Order{}, err
	}
	o := Order{ID: id.String(), CustomerID: customerID, Status: StatusCreated, Items: items,
		CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
	lines := make([]int32, len(items))
	skus := make([]string, len(items))
	qtys := make([]int32, len(items))
	for i, it := range items {
		lines[i], skus[i], qtys[i] = int32(i+1), it.SKU, int32(it.Qty)
	}
	schema := s.cfg.Schema
	err = pgx.BeginFunc(ctx, s.cfg.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO `+schema+`.orders (id, customer_id, status, created_at) VALUES ($1, $2, $3, $4)`,
			o.ID, o.CustomerID, o.Status, o.CreatedAt); err != nil {
			return fmt.Errorf("insert order: %w", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+schema+`.order_items (order_id, line, sku, qty)
SELECT $1, t.line, t.sku, t.qty FROM unnest($2::integer[], $3::text[], $4::integer[]) AS t (line, sku, qty)`,
			o.ID, lines, skus, qtys); err != nil {
			return fmt.Errorf("insert order items: %w", err)
		}
		// The outbox: the event row joins this transaction. A Publisher is
		// cheap (no I/O): build one per transaction.
		pub, err := publisher.NewPublisher(wsql.TxFromPgx(tx), s.pub, s.logger)
		if err != nil {
			return err
		}
		msg, err := publisher.PublishJSON(ctx, pub, events.OrderCreatedType,
			events.OrderCreated{OrderID: o.ID, CustomerID: o.CustomerID, Items: o.Items, CreatedAt: o.CreatedAt},
			publisher.WithKey(o.ID))
		if err != nil {
			return fmt.Errorf("publish %s: %w", events.OrderCreatedType, err)
		}
		o.EventID = msg.Metadata.Get(oncebox.HeaderEventID)
		return nil
	})
	if err != nil {
		return Order{}, err
	}
	return o, nil
}

// errNotFound is returned by getOrder for an unknown id.
var errNotFound = errors.New("order not found")

func (s *Server) getOrder(ctx context.Context, id uuid.UUID) (Order, error) {
	o := Order{ID: id.String(), Items: []events.Item{}}
	err := s.cfg.Pool.QueryRow(ctx, `SELECT customer_id, status, created_at FROM `+s.cfg.Schema+`.orders WHERE id = $1`, id).
		Scan(&o.CustomerID, &o.Status, &o.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Order{}, errNotFound
	}
	if err != nil {
		return Order{}, err
	}
	rows, err := s.cfg.Pool.Query(ctx, `SELECT sku, qty FROM `+s.cfg.Schema+`.order_items WHERE order_id = $1 ORDER BY line`, id)
	if err != nil {
		return Order{}, err
	}
	defer rows.Close()
	for rows.Next() {
		var it events.Item
		if err := rows.Scan(&it.SKU, &it.Qty); err != nil {
			return Order{}, err
		}
		o.Items = append(o.Items, it)
	}
	if err := rows.Err(); err != nil {
		return Order{}, err
	}
	o.CreatedAt = o.CreatedAt.UTC()
	return o, nil
}
