package poller

import (
	"context"

	"github.com/oncebox/watermill-oncebox"
)

// pipeline carries the batches of one type's loop from their claim to
// their finalize, at most depth (Config.MaxBatchesInFlight) at a time, in
// claim order at each stage, as franz-go's producer does (pkg/kgo/sink.go:
// a bound on the requests in flight and a queue that keeps their issue
// order):
//
//	loop ─push─▶ sends ─▶ sender goroutine ─▶ finals ─▶ finalizer goroutine ─▶ done ─take─▶ loop
//
// One goroutine sends, so the broker sees one instance's events of a type
// in claim order, and a batch's send starts once the send of the batch
// before has ended. One goroutine finalizes, so the outcomes are recorded
// in claim order; it merges the batches whose sends ended while it ran
// into one finalize (dialects.ClaimsFinalizer). Each queue holds depth
// batches, and the loop never holds more (held), so neither goroutine ever
// waits for the next stage.
type pipeline struct {
	ec   oncebox.EventConfig
	send *sender
	fin  *finalizer
	// ctx is the sends' context (Poller.sendCtx: cancelled CloseTimeout
	// after closing starts); a batch it cut short is released with
	// errClosing.
	ctx context.Context

	sends   chan *batchRun // the loop's claims, to the sender
	finals  chan *batchRun // the sender's sent batches, to the finalizer
	done    chan *batchRun // the finalizer's finalized batches, to the loop
	stopped chan struct{}  // closed when both goroutines have returned

	// held is the loop's count of batches pushed and not yet taken, the
	// bound on the batches in flight: a semaphore that one goroutine (the
	// loop's) takes and gives back, so an int. Only the loop's goroutine
	// reads and writes it.
	held int
}

// batchRun is one claimed batch on its way through a pipeline. Each stage
// fills in its part and hands it on through a channel, so one goroutine
// holds it at a time: the loop (b, after), the sender (sent), the
// finalizer (final), the loop again.
type batchRun struct {
	b batch
	// after: pushed while the batch before was still held, so its send
	// follows that one's (sender.sendBatch's before); a batch pushed
	// with none held starts afresh.
	after bool
	sent  sent
	final finalized
}

// startPipeline starts the sender and the finalizer of ec's type.
func startPipeline(ctx context.Context, ec oncebox.EventConfig, send *sender, fin *finalizer, depth int) *pipeline {
	p := &pipeline{ec: ec, send: send, fin: fin, ctx: ctx,
		sends: make(chan *batchRun, depth), finals: make(chan *batchRun, depth), done: make(chan *batchRun, depth),
		stopped: make(chan struct{})}
	go p.sendLoop()
	go p.finalizeLoop()
	return p
}

// push hands a claimed batch to the sender. The caller holds fewer than
// depth batches (full).
func (p *pipeline) push(b batch) {
	p.sends <- &batchRun{b: b, after: p.held > 0}
	p.held++
}

// full reports whether the loop holds depth batches: the next claim waits
// for the oldest to settle.
func (p *pipeline) full() bool { return p.held >= cap(p.sends) }

// take waits for the oldest batch held and returns it finalized.
func (p *pipeline) take() *batchRun {
	r := <-p.done
	p.held--
	return r
}

// ready returns the oldest batch held if it is finalized already, without
// waiting.
func (p *pipeline) ready() (*batchRun, bool) {
	if p.held == 0 {
		return nil, false
	}
	select {
	case r := <-p.done:
		p.held--
		return r, true
	default:
		return nil, false
	}
}

// close stops the sender and the finalizer once the loop has taken every
// batch it pushed.
func (p *pipeline) close() {
	close(p.sends)
	<-p.stopped
}

// sendLoop sends each batch in claim order. The claim is committed: from
// here on the rows are ours until they are finalized, released, or
// recovered.
func (p *pipeline) sendLoop() {
	defer close(p.finals)
	var before error // why the batch sent last released events, if any
	for r := range p.sends {
		if !r.after {
			before = nil
		}
		r.sent = p.send.sendBatch(p.ctx, r.b, before, errClosing)
		before = r.sent.unavailable
		p.finals <- r
	}
}

// finalizeLoop finalizes the sent batches: the first one waiting and, in
// the same finalize, every batch already waiting behind it (their sends
// ended while the finalize before ran).
func (p *pipeline) finalizeLoop() {
	defer close(p.stopped)
	each := p.finalized
	for r := range p.finals {
		group := []*batchRun{r}
	more:
		for {
			select {
			case g, ok := <-p.finals:
				if !ok {
					break more
				}
				group = append(group, g)
			default:
				break more
			}
		}
		p.fin.finalize(p.ec, group, each)
	}
}

// finalized hands a finalized batch back to the loop. The queue holds every
// batch the loop may hold, so it never waits.
func (p *pipeline) finalized(r *batchRun) {
	p.done <- r
}
