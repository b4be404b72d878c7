package main

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/oncebox/watermill-oncebox/middleware"
)

// record is what the lottery committed and rolled back, and when the prize
// sender first saw each lottery: the program's own bookkeeping, to check the
// outcome, not part of the example's business.
type record struct {
	mu         sync.Mutex
	commitAt   map[int]time.Time
	rolled     int
	handledAt  map[int]time.Time
	duplicates int
}

func newRecord() *record {
	return &record{commitAt: map[int]time.Time{}, handledAt: map[int]time.Time{}}
}

func (r *record) committed(id int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.commitAt[id] = time.Now()
}

func (r *record) rolledBack(int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rolled++
}

func (r *record) handled(id int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.handledAt[id]; !ok {
		r.handledAt[id] = time.Now()
	}
}

func (r *record) committedIDs() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]int, 0, len(r.commitAt))
	for id := range r.commitAt {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// summary is the program's outcome.
type summary struct {
	Published, RolledBack, Delivered, Lost, Doubled, Phantom, DuplicatesSkipped int
	// LatencyP50 and LatencyMax run from the commit to the prize sender's
	// handler, for the events handled: figures to read, not to assert.
	LatencyP50, LatencyMax time.Duration
}

func (s summary) ok() bool { return s.Published > 0 && s.Lost == 0 && s.Doubled == 0 && s.Phantom == 0 }

func (s summary) String() string {
	return fmt.Sprintf("lottery: published=%d rolled_back=%d delivered=%d lost=%d doubled=%d phantom=%d duplicates_skipped=%d latency_p50=%s latency_max=%s",
		s.Published, s.RolledBack, s.Delivered, s.Lost, s.Doubled, s.Phantom, s.DuplicatesSkipped,
		s.LatencyP50.Round(time.Millisecond), s.LatencyMax.Round(time.Millisecond))
}

// summary compares prizes (prize rows per lottery id) with what committed:
// lost = committed without a prize, doubled = more than one prize, phantom =
// a prize for a lottery that never committed.
func (r *record) summary(prizes map[int]int) summary {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := summary{Published: len(r.commitAt), RolledBack: r.rolled, DuplicatesSkipped: r.duplicates}
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
	r *record
}

func (h *inboxHooks) Duplicate(string, bool) {
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	h.r.duplicates++
}

// handledCount is the number of lotteries the prize sender has handled.
func (r *record) handledCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.handledAt)
}
