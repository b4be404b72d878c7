package tracee2e_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/internal/pgtest"
	"github.com/oncebox/watermill-oncebox/middleware"
	"github.com/oncebox/watermill-oncebox/poller"
	"github.com/oncebox/watermill-oncebox/publisher"
)

// inboxPublisher stands for the broker and the consumer: it hands each
// message to the inbox twice (a redelivery), as a subscriber would.
type inboxPublisher struct {
	inbox  *middleware.Inbox
	handle func(*message.Message) error

	mu   sync.Mutex
	errs []error
	n    int
}

func (p *inboxPublisher) Publish(_ string, msgs ...*message.Message) error {
	for _, msg := range msgs {
		for range 2 {
			err := p.inbox.Process(msg, p.handle)
			p.mu.Lock()
			p.errs = append(p.errs, err)
			p.n++
			p.mu.Unlock()
		}
	}
	return nil
}

func (p *inboxPublisher) Close() error { return nil }

func (p *inboxPublisher) delivered() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

func TestOneTraceFromRequestToHandler(t *testing.T) {
	ctx := context.Background()
	schema := pgtest.NewSchema(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(ctx) }()
	prop := propagation.TraceContext{}
	tracer := tp.Tracer("app")

	// The request: a business transaction writes the event inside its span.
	reqCtx, reqSpan := tracer.Start(ctx, "http request")
	tx, err := schema.Pool.Begin(ctx)
	require.NoError(t, err)
	pub, err := publisher.NewPublisher(wsql.TxFromPgx(tx), publisher.Config{Dialect: schema.Dialect, Propagator: prop}, nil)
	require.NoError(t, err)
	msg := message.NewMessage(watermill.NewUUID(), []byte(`{"order":1}`))
	msg.SetContext(reqCtx)
	require.NoError(t, pub.Publish("order-created", msg))
	require.NoError(t, tx.Commit(ctx))
	reqSpan.End()

	// The consumer: the inbox, and a handler that starts its own span.
	inbox, err := middleware.NewInbox(wsql.BeginnerFromPgx(schema.Pool), middleware.InboxConfig{Dialect: schema.Dialect,
		Namespace: "billing", TracerProvider: tp, Propagator: prop}, nil)
	require.NoError(t, err)
	handled := 0
	out := &inboxPublisher{inbox: inbox, handle: func(m *message.Message) error {
		_, span := tracer.Start(m.Context(), "handler")
		span.End()
		handled++
		return nil
	}}

	// The relay, on the real clock with short delays.
	p, err := poller.New(wsql.BeginnerFromPgx(schema.Pool), out, relayConfig(schema, tp, prop), nil)
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() { errc <- p.Run(ctx) }()
	require.Eventually(t, func() bool { return out.delivered() == 2 }, 60*time.Second, 5*time.Millisecond)
	require.NoError(t, p.Close())
	require.NoError(t, <-errc)
	require.Equal(t, []error{nil, nil}, out.errs)
	require.Equal(t, 1, handled, "the redelivery is a duplicate")

	spans := exp.GetSpans()
	find := func(name string) []tracetest.SpanStub {
		var found []tracetest.SpanStub
		for _, s := range spans {
			if s.Name == name {
				found = append(found, s)
			}
		}
		return found
	}
	req := reqSpan.SpanContext()

	relays := find("oncebox.relay send order-created")
	require.Len(t, relays, 1)
	relay := relays[0]
	require.Equal(t, trace.SpanKindProducer, relay.SpanKind)
	require.Len(t, relay.Links, 1)
	require.Equal(t, req.TraceID(), relay.Links[0].SpanContext.TraceID())
	require.Equal(t, req.SpanID(), relay.Links[0].SpanContext.SpanID())
	require.NotEqual(t, req.TraceID(), relay.SpanContext.TraceID(), "the relay span is its own trace, linked")
	requireAttr(t, relay.Attributes, "oncebox.messages.confirmed", attribute.IntValue(1))
	requireAttr(t, relay.Attributes, "oncebox.producer_links", attribute.IntValue(1))
	requireAttr(t, relay.Attributes, "oncebox.event_type", attribute.StringValue("order-created"))

	inboxSpans := find("oncebox.inbox billing")
	require.Len(t, inboxSpans, 2, "the duplicate gets its span too")
	for k, s := range inboxSpans {
		require.Equal(t, trace.SpanKindConsumer, s.SpanKind)
		require.Equal(t, req.TraceID(), s.SpanContext.TraceID(), "the consumer continues the request's trace")
		require.Equal(t, req.SpanID(), s.Parent.SpanID(), "the inbox span is a child of the request span")
		requireAttr(t, s.Attributes, "oncebox.inbox.duplicate", attribute.BoolValue(k == 1))
		requireAttr(t, s.Attributes, "oncebox.inbox.namespace", attribute.StringValue("billing"))
	}

	handlers := find("handler")
	require.Len(t, handlers, 1)
	require.Equal(t, req.TraceID(), handlers[0].SpanContext.TraceID())
	require.Equal(t, inboxSpans[0].SpanContext.SpanID(), handlers[0].Parent.SpanID(), "the handler's span nests under the inbox's")
}

// relayConfig is the relay of these tests: type order-created, on the real
// clock with short delays, its spans to tp.
func relayConfig(schema *pgtest.Schema, tp trace.TracerProvider, prop propagation.TextMapPropagator) poller.Config {
	config := poller.Config{Dialect: schema.Dialect, EventTypes: []string{"order-created"},
		TracerProvider: tp, Propagator: prop}
	config.Oncebox.Outbox.Defaults.Polling = oncebox.PollingSettings{MinFixedDelay: time.Millisecond,
		MaxFixedDelay: 20 * time.Millisecond, Multiplier: 2}
	return config
}

func requireAttr(t *testing.T, attrs []attribute.KeyValue, key string, want attribute.Value) {
	t.Helper()
	for _, kv := range attrs {
		if string(kv.Key) == key {
			require.Equal(t, want, kv.Value, key)
			return
		}
	}
	require.Failf(t, "missing attribute", "%s in %v", key, attrs)
}
