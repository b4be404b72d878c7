package rabbitmq

import (
	"context"
	"errors"
	"time"

	"github.com/oncebox/watermill-oncebox/poller"
)

var (
	_ poller.BrokerProber  = (*Publisher)(nil)
	_ poller.SendTimeouter = (*Publisher)(nil)
)

// ProbeBroker implements poller.BrokerProber: it returns nil when the
// publisher has an open connection or can dial one now, and an error that
// wraps oncebox.ErrBrokerUnavailable otherwise. It sends nothing: while
// the broker is down the relay probes with it instead of claiming rows.
func (p *Publisher) ProbeBroker(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return unavailable(err)
	}
	_, err := p.connection()
	return err
}

// CheckBroker is the start-up check of the broker (service.BrokerChecker):
// it returns an error wrapping ErrAccessRefused, naming the broker (its
// URL without the password) and the refusal, when the broker refuses this
// publisher's connection (a wrong user name or password, a virtual host
// without access), and nil otherwise: when the connection opens, and when
// the broker cannot be reached now, an outage that the relay waits out.
func (p *Publisher) CheckBroker(ctx context.Context) error {
	if ctx.Err() != nil {
		return nil
	}
	_, err := p.connection()
	if re := (*refusedError)(nil); errors.As(err, &re) {
		return re
	}
	return nil
}

// SendTimeout implements poller.SendTimeouter: a call waits at most
// DialTimeout to (re)connect, then ConfirmTimeout for its writes and
// confirms. The relay refuses to start when this is not below
// outbox.max-batch-processing-time.
func (p *Publisher) SendTimeout() time.Duration { return p.cfg.DialTimeout + p.cfg.ConfirmTimeout }
