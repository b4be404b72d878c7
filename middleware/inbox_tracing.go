package middleware

import (
	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// tracerName is the instrumentation scope of the inbox's spans.
const tracerName = "github.com/oncebox/watermill-oncebox/middleware"

// Attribute keys of the inbox's span.
const (
	attrInboxKey       = attribute.Key("oncebox.inbox.key")
	attrInboxNamespace = attribute.Key("oncebox.inbox.namespace")
	attrInboxMode      = attribute.Key("oncebox.inbox.mode")
	attrInboxDuplicate = attribute.Key("oncebox.inbox.duplicate")
	attrInboxCacheHit  = attribute.Key("oncebox.inbox.cache_hit")
)

// startSpan starts the inbox's span as a child of the trace context stored
// in msg's metadata (or of msg's context when the metadata holds none) and
// sets msg's context to carry it. The caller restores the context.
func (i *Inbox) startSpan(msg *message.Message, ns, key string) trace.Span {
	ctx := i.config.Propagator.Extract(msg.Context(), propagation.MapCarrier(msg.Metadata))
	name := message.HandlerNameFromCtx(ctx)
	if name == "" {
		name = ns
	}
	if name == "" {
		name = "oncebox.inbox"
	} else {
		name = "oncebox.inbox " + name
	}
	ctx, span := i.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attrInboxKey.String(key), attrInboxNamespace.String(ns), attrInboxMode.String(i.config.Mode.String())))
	msg.SetContext(ctx)
	return span
}

// endInboxSpan records the outcome of Process and ends span.
func endInboxSpan(span trace.Span, duplicate, cached bool, err error) {
	if span.IsRecording() {
		span.SetAttributes(attrInboxDuplicate.Bool(duplicate), attrInboxCacheHit.Bool(cached))
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}
