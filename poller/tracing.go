package poller

import (
	"context"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncebox/watermill-oncebox"
)

// tracerName is the instrumentation scope of the relay's spans.
const tracerName = "github.com/oncebox/watermill-oncebox/poller"

// MaxSpanLinks is the most producer links a relay span carries; the
// attribute oncebox.producer_links tells how many the batch held in all.
const MaxSpanLinks = 128

// Attribute keys of the relay's spans.
const (
	attrEventType     = attribute.Key("oncebox.event_type")
	attrDestination   = attribute.Key("messaging.destination.name")
	attrBatchSize     = attribute.Key("messaging.batch.message_count")
	attrConfirmed     = attribute.Key("oncebox.messages.confirmed")
	attrFailed        = attribute.Key("oncebox.messages.failed")
	attrUnavailable   = attribute.Key("oncebox.messages.unavailable")
	attrProducerLinks = attribute.Key("oncebox.producer_links")
)

// startSendSpan starts the span of one topic's send. The span is a root of
// its own trace, linked to the stored producer context of each message (up
// to MaxSpanLinks): the messages keep the producer's traceparent, so that
// the consumer continues the producer's trace, not the relay's. With a
// provider that does not record, no metadata is read.
func (s *sender) startSendSpan(ctx context.Context, topic string, msgs []*message.Message) trace.Span {
	eventType := ""
	if len(msgs) > 0 {
		eventType = msgs[0].Metadata.Get(oncebox.HeaderEventType)
	}
	_, span := s.tracer.Start(ctx, "oncebox.relay send "+topic,
		trace.WithNewRoot(),
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attrEventType.String(eventType), attrDestination.String(topic), attrBatchSize.Int(len(msgs))))
	if !span.IsRecording() {
		return span
	}
	links := 0
	for _, msg := range msgs {
		sc := trace.SpanContextFromContext(s.propagator.Extract(context.Background(), propagation.MapCarrier(msg.Metadata)))
		if !sc.IsValid() {
			continue
		}
		links++
		if links <= MaxSpanLinks {
			span.AddLink(trace.Link{SpanContext: sc})
		}
	}
	span.SetAttributes(attrProducerLinks.Int(links))
	return span
}

// endSendSpan records the outcome of the messages of idx and ends span.
func endSendSpan(span trace.Span, idx []int, results []result, callErr error) {
	if !span.IsRecording() {
		span.End()
		return
	}
	var confirmed, failed, unavailable int
	var firstErr error
	for _, i := range idx {
		switch results[i].outcome {
		case outcomeConfirmed:
			confirmed++
		case outcomeFailed:
			failed++
		case outcomeUnavailable:
			unavailable++
		}
		if firstErr == nil && results[i].err != nil {
			firstErr = results[i].err
		}
	}
	span.SetAttributes(attrConfirmed.Int(confirmed), attrFailed.Int(failed), attrUnavailable.Int(unavailable))
	if callErr != nil {
		firstErr = callErr
	}
	if firstErr != nil {
		span.RecordError(firstErr)
		span.SetStatus(codes.Error, firstErr.Error())
	}
	span.End()
}
