package publisher_test

import (
	"context"
	"testing"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncebox/watermill-oncebox/publisher"
)

func TestPublishStoresTraceContext(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	config := b.config
	config.Propagator = propagation.TraceContext{}

	ctx, span := tp.Tracer("test").Start(context.Background(), "request")
	traced := message.NewMessage("traced", []byte(`{}`))
	traced.SetContext(ctx)
	own := message.NewMessage("own", []byte(`{}`))
	own.SetContext(ctx)
	const userParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	own.Metadata.Set("traceparent", userParent)
	plain := message.NewMessage("plain", []byte(`{}`))
	span.End()

	require.NoError(t, b.inTx(t, true, func(tx pgx.Tx) error {
		pub, err := publisher.NewPublisher(wsql.TxFromPgx(tx), config, nil)
		require.NoError(t, err)
		return pub.Publish("order-created", traced, own, plain)
	}))
	require.Empty(t, traced.Metadata.Get("traceparent"), "the message itself is not changed")

	byUUID := map[string]map[string]string{}
	for _, e := range b.stored(t) {
		byUUID[e.MessageUUID] = e.Metadata
	}
	got := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(),
		propagation.MapCarrier(byUUID["traced"])))
	require.True(t, got.IsValid(), "stored metadata: %v", byUUID["traced"])
	require.Equal(t, span.SpanContext().TraceID(), got.TraceID())
	require.Equal(t, span.SpanContext().SpanID(), got.SpanID())
	require.Equal(t, userParent, byUUID["own"]["traceparent"], "a user's traceparent is kept")
	require.NotContains(t, byUUID["plain"], "traceparent", "no span, nothing stored")
}

func TestPublishStoresNothingWithTheGlobalNoopPropagator(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx, span := tp.Tracer("test").Start(context.Background(), "request")
	defer span.End()
	msg := message.NewMessage("m", []byte(`{}`))
	msg.SetContext(ctx)
	require.NoError(t, b.inTx(t, true, func(tx pgx.Tx) error {
		pub, err := publisher.NewPublisher(wsql.TxFromPgx(tx), b.config, nil)
		require.NoError(t, err)
		return pub.Publish("order-created", msg)
	}))
	require.NotContains(t, b.stored(t)[0].Metadata, "traceparent")
}
