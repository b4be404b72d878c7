// Package events is the contract between the orders API and the shipping
// service: the event type, its payload, and where the oncebox configuration
// sends it. Both services read the same oncebox.yaml, so they agree on the
// topic.
package events

import (
	"fmt"
	"maps"
	"time"

	"github.com/google/uuid"

	"github.com/oncebox/watermill-oncebox"
)

// OrderCreatedType is the oncebox event type of OrderCreated, the key of
// outbox.events in oncebox.yaml.
const OrderCreatedType = "order-created"

// OrderCreated is published by the orders API in the transaction that
// creates the order. Its ordering key is the order id, so all events of one
// order land on one Kafka partition, in order.
type OrderCreated struct {
	OrderID    string    `json:"order_id"`
	CustomerID string    `json:"customer_id"`
	Items      []Item    `json:"items"`
	CreatedAt  time.Time `json:"created_at"`
}

// Item is one line of an order.
type Item struct {
	SKU string `json:"sku"`
	Qty int    `json:"qty"`
}

// Validate reports what makes e unusable by a consumer. A message that fails
// it is poison: retrying cannot fix it.
func (e OrderCreated) Validate() error {
	if _, err := uuid.Parse(e.OrderID); err != nil {
		return fmt.Errorf("order-created: order_id %q is not an order id: %w", e.OrderID, err)
	}
	if len(e.Items) == 0 {
		return fmt.Errorf("order-created %s: no items", e.OrderID)
	}
	for i, it := range e.Items {
		if it.SKU == "" || it.Qty <= 0 {
			return fmt.Errorf("order-created %s: items[%d] has sku %q and qty %d", e.OrderID, i, it.SKU, it.Qty)
		}
	}
	return nil
}

// Topic returns the broker topic (the RabbitMQ queue) of OrderCreated in
// cfg: outbox.events.order-created.topic, else the defaults' topic, else the
// event type. It fails when cfg configures event types but not this one.
func Topic(cfg oncebox.Config) (string, error) {
	ec, err := cfg.Event(OrderCreatedType)
	if err != nil {
		return "", err
	}
	return ec.Topic, nil
}

// WithTopic returns a copy of cfg in which OrderCreated goes to topic, for a
// run that needs a topic of its own (tests, a second demo on one broker). An
// empty topic returns cfg unchanged.
func WithTopic(cfg oncebox.Config, topic string) oncebox.Config {
	if topic == "" {
		return cfg
	}
	events := maps.Clone(cfg.Outbox.Events)
	if events == nil {
		events = map[string]oncebox.EventSettings{}
	}
	s := events[OrderCreatedType]
	s.Topic = topic
	events[OrderCreatedType] = s
	cfg.Outbox.Events = events
	return cfg
}
