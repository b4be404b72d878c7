package poller

import (
	"context"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	oncebox "github.com/oncebox/watermill-oncebox"

	"github.com/oncebox/watermill-oncebox/internal/pacing"
)

// BrokerProber is an optional extension of message.Publisher for
// publishers that can tell cheaply, without sending a message, whether the
// broker can be reached. While an event type is in an outage the poller
// probes before it claims, so an outage costs no claim and release of rows
// until the broker answers again. The rabbitmq package's Publisher
// implements it.
type BrokerProber interface {
	// ProbeBroker returns nil when the broker can be reached now, and an
	// error (for which Config.IsUnavailable holds) when it cannot. It must
	// honour ctx.
	ProbeBroker(ctx context.Context) error
}

// outage is the state of one event type's broker: up, or down since a
// moment, with a backoff of its own. A batch released because the broker
// was unavailable starts an outage; the first batch that reaches the broker
// ends it. The state changes are logged once each and reported to
// Hooks.BrokerOutage; the batches in between are logged at DEBUG only.
//
// An outage belongs to its type's loop: only the loop's goroutine calls
// its methods and reads down.
type outage struct {
	eventType string
	clock     oncebox.Clock
	logger    watermill.LoggerAdapter
	hooks     Hooks
	schedule  Schedule      // Config.OutageBackoff
	prober    BrokerProber  // nil: the publisher cannot be probed
	probeFor  time.Duration // a probe's bound: Config.FinalizeTimeout
	backoff   *pacing.Strategy
	down      bool
	since     time.Time
	released  int // events released without an attempt during this outage
}

// newOutage returns the outage state of eventType's loop: up.
func newOutage(eventType string, c Config, pub message.Publisher, logger watermill.LoggerAdapter) *outage {
	prober, _ := pub.(BrokerProber)
	return &outage{eventType: eventType, clock: c.Clock, logger: logger, hooks: c.Hooks, schedule: c.OutageBackoff,
		prober: prober, probeFor: c.FinalizeTimeout, backoff: c.OutageBackoff.Strategy()}
}

// unavailable records a batch released because the broker was unavailable
// and returns the wait before the next try, which grows from
// OutageBackoff.Min by its Multiplier up to its Max.
func (o *outage) unavailable(released int, err error) time.Duration {
	o.released += released
	if !o.down {
		o.down, o.since = true, o.clock.Now()
		o.logger.Error("Broker unavailable: the event type backs off until it answers; its batches are released without counting an attempt", err,
			watermill.LogFields{"event_type": o.eventType})
		o.hooks.BrokerOutage(o.eventType, true, err)
	}
	return o.backoff.Next(false)
}

// reached records a batch that reached the broker: an outage ends.
func (o *outage) reached() {
	if !o.down {
		return
	}
	o.logger.Info("Broker available again", watermill.LogFields{"event_type": o.eventType,
		"outage": o.clock.Since(o.since), "released_without_attempt": o.released})
	o.hooks.BrokerOutage(o.eventType, false, nil)
	o.down, o.released = false, 0
	o.backoff = o.schedule.Strategy()
}

// probe asks a BrokerProber publisher, during an outage, whether the broker
// answers again. It reports true when a claim is worth making: no outage,
// a publisher that cannot be probed, or a probe that succeeded.
func (o *outage) probe(ctx context.Context) (worthClaiming bool, wait time.Duration) {
	if !o.down || o.prober == nil {
		return true, 0
	}
	probeCtx, cancel := context.WithTimeout(ctx, o.probeFor)
	defer cancel()
	err := o.prober.ProbeBroker(probeCtx)
	if err == nil {
		return true, 0
	}
	o.logger.Debug("Broker still unavailable", watermill.LogFields{"event_type": o.eventType, "err": err.Error()})
	return false, o.backoff.Next(false)
}

// SendTimeouter is an optional extension of message.Publisher for
// publishers whose sends are bounded by timeouts of their own (the kafka
// and rabbitmq packages' publishers). New refuses such a publisher when
// SendTimeout is not below outbox.max-batch-processing-time: the recovery
// would then return a batch to PENDING, and another instance send it again,
// while its first send may still be waiting for the broker.
type SendTimeouter interface {
	// SendTimeout is the longest one Publish or PublishBatch call can wait.
	SendTimeout() time.Duration
}

// checkSendTimeout is New's check of a SendTimeouter publisher.
func checkSendTimeout(pub any, mbpt time.Duration) error {
	st, ok := pub.(SendTimeouter)
	if !ok {
		return nil
	}
	if t := st.SendTimeout(); t >= mbpt {
		return fmt.Errorf("%w: poller: publisherOut can wait %s for the broker (its SendTimeout), not below outbox.max-batch-processing-time %s: "+
			"a batch could be recovered and sent again while its first send is still waiting; lower the publisher's timeouts or raise max-batch-processing-time",
			oncebox.ErrInvalidConfig, t, mbpt)
	}
	return nil
}
