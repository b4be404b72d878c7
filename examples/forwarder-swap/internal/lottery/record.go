// Package lottery is the bookkeeping the forwarder-swap programs share: what
// the lottery committed and rolled back, what the prize sender handled, and
// the summary that says whether anything was lost, doubled or delivered
// from a rolled-back transaction. It is not part of the example's business.
package lottery

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/oncebox/watermill-oncebox/middleware"
)

// Record is what the lottery committed and rolled back, and when the prize
// sender first saw each lottery: the program's own bookkeeping, to check the
// outcome, not part of the example's business.
type Record struct {
	mu         sync.Mutex
	commitAt   map[int]time.Time
	rolled     int
	handledAt  map[int]time.Time
	duplicates int
}

func NewRecord() *Record {
	return &Record{commitAt: map[int]time.Time{}, handledAt: map[int]time.Time{}}
}

func (r *Record) Committed(id int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.commitAt[id] = time.Now()
}

func (r *Record) RolledBack(int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rolled++
}

func (r *Record) Handled(id int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.handledAt[id]; !ok {
		r.handledAt[id] = time.Now()
	}
}

func (r *Record) CommittedIDs() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]int, 0, len(r.commitAt))
	for id := range r.commitAt {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Summary is the program's outcome.
type Summary struct {
	Published, RolledBack, Delivered, Lost, Doubled, Phantom, DuplicatesSkipped int
	// LatencyP50 and LatencyMax run from the commit to the prize sender's
	// handler, for the events handled: figures to read, not to assert.
	LatencyP50, LatencyMax time.Duration
}

func (s Summary) OK() bool { return s.Published > 0 && s.Lost == 0 && s.Doubled == 0 && s.Phantom == 0 }

func (s Summary) String() string {
	return fmt.Sprintf("lottery: published=%d rolled_back=%d delivered=%d lost=%d doubled=%d phantom=%d duplicates_skipped=%d latency_p50=%s latency_max=%s",
		s.Published, s.RolledBack, s.Delivered, s.Lost, s.Doubled, s.Phantom, s.DuplicatesSkipped,
		s.LatencyP50.Round(time.Millisecond), s.LatencyMax.Round(time.Millisecond))
}

// Summary compares prizes (prize rows per lottery id) with what committed:
// lost = committed without a prize, doubled = more than one prize, phantom =
// a prize for a lottery that never committed.
func (r *Record) Summary(prizes map[int]int) Summary {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := Summary{Published: len(r.commitAt), RolledBack: r.rolled, DuplicatesSkipped: r.duplicates}
	var latencies []time.Duration
	for id, at := range r.commitAt {
		switch prizes[id] {
		case 0:
			s.Lost++
		case 1:
		default:
			s.Doubled++
		}
		if h, ok := r.handledAt[id]; ok {
			latencies = append(latencies, max(0, h.Sub(at)))
		}
	}
	for id := range prizes {
		if _, ok := r.commitAt[id]; ok {
			s.Delivered++
		} else {
			s.Phantom++
		}
	}
	if len(latencies) > 0 {
		slices.Sort(latencies)
		s.LatencyP50 = latencies[len(latencies)/2]
		s.LatencyMax = latencies[len(latencies)-1]
	}
	return s
}

// inboxHooks counts the duplicates the inbox dropped.
type inboxHooks struct {
	middleware.NopInboxHooks
	r *Record
}

func (h *inboxHooks) Duplicate(string, bool) {
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	h.r.duplicates++
}

// HandledCount is the number of lotteries the prize sender has handled.
func (r *Record) HandledCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.handledAt)
}

// InboxHooks returns the inbox hooks that count, in r, the duplicates the
// inbox dropped.
func (r *Record) InboxHooks() middleware.InboxHooks { return &inboxHooks{r: r} }
