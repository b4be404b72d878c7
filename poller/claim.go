package poller

import (
	"context"
	"fmt"
	"sort"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
)

// The first stage of a batch's path: the claim (docs/design.md, "The
// relay"). It commits on its own, before anything is sent; from then on
// the rows are this instance's until they are finalized, released, or
// recovered.

// batch is a claimed batch: its rows, the claim's token and the event type
// it claimed (the rows do not carry it: toMessage adds it to each message).
type batch struct {
	token     oncebox.EventID
	eventType string
	events    []dialects.ClaimedEvent
}

// claimer claims batches. It holds no state of its own: every loop and
// Drain share one.
type claimer struct {
	conns    *conns
	clock    oncebox.Clock
	instance string            // Config.InstanceID, written as claimed_by
	pub      message.Publisher // asked whether it keeps a key's order (perKey)
	claims   *claims           // batches in flight, for the heartbeat (heartbeat.go)
}

// claimBatch claims one batch of ec's type.
func (c *claimer) claimBatch(ec oncebox.EventConfig) (batch, error) {
	token, err := oncebox.NewEventID()
	if err != nil {
		return batch{}, err
	}
	var events []dialects.ClaimedEvent
	// Once started, the claim is not cancelled by Close: a claim that
	// committed but whose rows were never read would leave them IN_PROCESS
	// until the recovery, a needless delay. Its connection slot is waited
	// for on the same bounded context.
	claimCtx, cancel := c.conns.finalizeCtx()
	defer cancel()
	err = c.conns.with(claimCtx, func() error {
		// claimed_at is the time of the claim, read once the slot is
		// held: read before, a claim that waited for its slot behind
		// busy types would be born as old as the wait, and recovered
		// by another instance before this one's first heartbeat.
		now := c.clock.Now().UTC()
		var err error
		events, err = c.claim(claimCtx, dialects.ClaimParams{EventType: ec.EventType, Limit: ec.BatchSize, Token: token, Now: now,
			Instance: c.instance, ByKey: ec.Ordered(), PerKey: perKey(c.pub, ec.BatchSize),
			BlockOnFailure: ec.OnFailure == oncebox.OnFailureBlock})
		return err
	})
	return batch{token: token, eventType: ec.EventType, events: events}, err
}

// claim runs the dialect's claim outside any transaction: the statement
// commits on its own, before anything is sent.
func (c *claimer) claim(ctx context.Context, params dialects.ClaimParams) ([]dialects.ClaimedEvent, error) {
	out, err := c.conns.d.Claim(ctx, c.conns.db, params)
	if err != nil {
		return nil, fmt.Errorf("oncebox: claim %q: %w", params.EventType, err)
	}
	if len(out) > 0 {
		// Held until finalize: the heartbeat is written while it is.
		c.claims.hold()
	}
	if params.ByKey {
		// The dialect returns an ordered claim in id order, each key's
		// order: a key's head that came due after its successors (a retry)
		// goes before them in the same call.
		return out, nil
	}
	// RETURNING gives no order: send in next_retry_at order, then id order,
	// which is creation order for events made by one instance.
	sort.Slice(out, func(i, j int) bool {
		if !out[i].NextRetryAt.Equal(out[j].NextRetryAt) {
			return out[i].NextRetryAt.Before(out[j].NextRetryAt)
		}
		return string(out[i].ID[:]) < string(out[j].ID[:])
	})
	return out, nil
}
