package rabbitmq

import (
	"context"
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

// SendTimeout implements poller.SendTimeouter: a call waits at most
// DialTimeout to (re)connect, then ConfirmTimeout for its writes and
// confirms. The relay refuses to start when this is not below
// outbox.max-batch-processing-time.
func (p *Publisher) SendTimeout() time.Duration { return p.cfg.DialTimeout + p.cfg.ConfirmTimeout }
