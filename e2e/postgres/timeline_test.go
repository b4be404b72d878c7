package postgres_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/oncebox/watermill-oncebox/poller"
)

// timeline records a relay's polls and wake-ups with their time since t0,
// for a test to log when it fails: a liveness failure (an event not relayed
// in time) is read from the order of the wake-ups and the polls.
type timeline struct {
	wakeRecorder
	mu  sync.Mutex
	log []string
	t0  time.Time
}

func newTimeline() *timeline { return &timeline{t0: time.Now()} }

func (d *timeline) add(s string) {
	d.mu.Lock()
	d.log = append(d.log, fmt.Sprintf("%8.3fs %s", time.Since(d.t0).Seconds(), s))
	d.mu.Unlock()
}

func (d *timeline) PollDone(p poller.PollInfo) {
	d.add(fmt.Sprintf("poll %s claimed=%d next=%s err=%v", p.EventType, p.Claimed, p.NextDelay, p.Err))
}

func (d *timeline) Woken(t string, w poller.WakeTarget) {
	d.add(fmt.Sprintf("woken %s target=%d", t, w))
}

// logTail logs the last n entries.
func (d *timeline) logTail(t *testing.T, n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range d.log[max(0, len(d.log)-n):] {
		t.Log(s)
	}
}
