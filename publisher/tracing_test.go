package publisher_test

import (
	"context"
	"testing"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncebox/watermill-oncebox/publisher"
)

// requestContext returns a context carrying a sampled span, as a request's
// would: the OTel API carries one without an SDK (the core module does not
// require the SDK: docs/modules.md).
func requestContext() (context.Context, trace.SpanContext) {
	span := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
	})
	return trace.ContextWithSpanContext(context.Background(), span), span
}

func TestPublishStoresTraceContext(t *testing.T) {
	t.Parallel()
	b := setup(t)
	config := b.config
	config.Propagator = propagation.TraceContext{}

	ctx, span := requestContext()
	traced := message.NewMessage("traced", []byte(`{}`))
	traced.SetContext(ctx)
	own := message.NewMessage("own", []byte(`{}`))
	own.SetContext(ctx)
	const userParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	own.Metadata.Set("traceparent", userParent)
	plain := message.NewMessage("plain", []byte(`{}`))

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
	require.Equal(t, span.TraceID(), got.TraceID())
	require.Equal(t, span.SpanID(), got.SpanID())
	require.Equal(t, userParent, byUUID["own"]["traceparent"], "a user's traceparent is kept")
	require.NotContains(t, byUUID["plain"], "traceparent", "no span, nothing stored")
}

func TestPublishStoresNothingWithTheGlobalNoopPropagator(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, _ := requestContext()
	msg := message.NewMessage("m", []byte(`{}`))
	msg.SetContext(ctx)
	require.NoError(t, b.inTx(t, true, func(tx pgx.Tx) error {
		pub, err := publisher.NewPublisher(wsql.TxFromPgx(tx), b.config, nil)
		require.NoError(t, err)
		return pub.Publish("order-created", msg)
	}))
	require.NotContains(t, b.stored(t)[0].Metadata, "traceparent")
}
