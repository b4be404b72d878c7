package tracee2e_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/oncebox/watermill-oncebox/internal/pgtest"
	"github.com/oncebox/watermill-oncebox/internal/pollertest"
	"github.com/oncebox/watermill-oncebox/poller"
	"github.com/oncebox/watermill-oncebox/publisher"
)

// refusingPublisher refuses every call and records the traceparent of every
// message it was given.
type refusingPublisher struct {
	mu   sync.Mutex
	sent map[string]bool
}

func (p *refusingPublisher) Publish(_ string, msgs ...*message.Message) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range msgs {
		p.sent[m.Metadata.Get("traceparent")] = true
	}
	return errors.New("rejected")
}

func (p *refusingPublisher) Close() error { return nil }

// The relay span links to at most MaxSpanLinks producers, counts them all,
// records a failed send, and the messages keep the producers' traceparent.
// (It was poller/tracing_test.go: it lives in this test-only module so that
// the core module does not require the OTel SDK; docs/modules.md.)
func TestRelaySpanLinksProducersAndRecordsFailure(t *testing.T) {
	t.Parallel()
	schema := pgtest.NewSchema(t)
	const n = poller.MaxSpanLinks + 22
	ctx := context.Background()
	tx, err := schema.Pool.Begin(ctx)
	require.NoError(t, err)
	pub, err := publisher.NewPublisher(wsql.TxFromPgx(tx), publisher.Config{Dialect: schema.Dialect}, nil)
	require.NoError(t, err)
	parents := map[string]bool{}
	msgs := make([]*message.Message, n)
	for i := range msgs {
		msgs[i] = message.NewMessage(watermill.NewUUID(), []byte(`{}`))
		tp := fmt.Sprintf("00-%032x-%016x-01", i+1, i+1)
		msgs[i].Metadata.Set("traceparent", tp)
		parents[tp] = true
	}
	require.NoError(t, pub.Publish("order-created", msgs...))
	require.NoError(t, tx.Commit(ctx))

	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(ctx) }()
	rec := &refusingPublisher{sent: map[string]bool{}}
	p, err := poller.New(schema.Beginner, rec, relayConfig(schema, tp, propagation.TraceContext{}), nil)
	require.NoError(t, err)
	pollertest.Start(t, p)
	pollertest.Eventually(t, "a send span", func() bool { return len(exp.GetSpans()) > 0 })

	span := exp.GetSpans()[0]
	require.Equal(t, "oncebox.relay send order-created", span.Name)
	require.Len(t, span.Links, poller.MaxSpanLinks)
	require.Equal(t, codes.Error, span.Status.Code)
	require.NotEmpty(t, span.Events, "the error is recorded")
	attrs := map[attribute.Key]attribute.Value{}
	for _, kv := range span.Attributes {
		attrs[kv.Key] = kv.Value
	}
	require.Equal(t, int64(n), attrs["oncebox.producer_links"].AsInt64())
	require.Equal(t, int64(n), attrs["messaging.batch.message_count"].AsInt64())
	// The whole call was refused, then the first message alone (one
	// attempt), then the second alone: an outage, the rest released.
	require.Equal(t, int64(1), attrs["oncebox.messages.failed"].AsInt64())
	require.Equal(t, int64(n-1), attrs["oncebox.messages.unavailable"].AsInt64())
	require.Equal(t, int64(0), attrs["oncebox.messages.confirmed"].AsInt64())
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Equal(t, parents, rec.sent, "the messages keep the producers' traceparent")
}
