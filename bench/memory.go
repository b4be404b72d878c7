package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"time"
)

// memSampleEvery is how often a memSampler looks at the process's memory.
const memSampleEvery = 10 * time.Millisecond

// memSampler is a relayDB clock that measures the bench process's memory
// while a case's clock runs: before the clock starts it collects garbage and
// returns the freed memory to the operating system, so that what earlier
// cases left behind weighs as little as it can, and reads the process's
// resident set and Go heap; then a goroutine samples both until the clock
// stops. The figures are of the whole process: the relay under test, its
// pgx pool and buffers, the no-op publisher, the Go runtime, and whatever
// of the bench itself is live; not the database server's memory.
type memSampler struct {
	// last is what the last clock measured; err, its error.
	last memUse
	err  error

	stop chan struct{}
	done chan memUse
}

// memUse is the process's memory before a drain and at its peak during it.
type memUse struct {
	// rssBefore and rssPeak are VmRSS, in bytes.
	rssBefore, rssPeak uint64
	// heapBefore and heapPeak are the Go heap in use (HeapInuse: spans
	// holding objects), in bytes.
	heapBefore, heapPeak uint64
	samples              int
}

// clock implements relayDB.clock.
func (s *memSampler) clock(start bool) {
	if !start {
		close(s.stop)
		s.last = <-s.done
		return
	}
	runtime.GC()
	debug.FreeOSMemory()
	rss, err := readRSS()
	s.last, s.err = memUse{}, err
	s.stop, s.done = make(chan struct{}), make(chan memUse, 1)
	go s.sample(memUse{rssBefore: rss, rssPeak: rss, heapBefore: heapInUse(), heapPeak: heapInUse()})
}

// sample keeps the peaks of u until s.stop is closed, then sends u on s.done.
func (s *memSampler) sample(u memUse) {
	t := time.NewTicker(memSampleEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			s.done <- u
			return
		case <-t.C:
		}
		if rss, err := readRSS(); err == nil {
			u.rssPeak = max(u.rssPeak, rss)
		}
		u.heapPeak = max(u.heapPeak, heapInUse())
		u.samples++
	}
}

// row is u as a row of the table: the peak resident set in MiB, with the
// rest in the note.
func (u memUse) row(name string, baseline bool) row {
	return row{Case: name, Value: mib(u.rssPeak), Unit: "MiB (VmRSS)", Baseline: baseline,
		Note: fmt.Sprintf("the bench process: %.0f MiB before the drain, %.0f MiB more at the peak; Go heap in use %.0f MiB before, %.0f MiB at the peak; %d samples, every %s",
			mib(u.rssBefore), mib(u.rssPeak)-mib(u.rssBefore), mib(u.heapBefore), mib(u.heapPeak), u.samples, memSampleEvery)}
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// readRSS returns the process's resident set size, VmRSS of
// /proc/self/status, in bytes.
func readRSS() (uint64, error) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("resident set size: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) == 3 && string(f[0]) == "VmRSS:" && string(f[2]) == "kB" {
			kb, err := strconv.ParseUint(string(f[1]), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("resident set size: VmRSS of /proc/self/status: %w", err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("resident set size: no VmRSS in kB in /proc/self/status")
}

// heapSamples are the runtime/metrics whose sum is MemStats.HeapInuse; read
// without stopping the world, unlike runtime.ReadMemStats.
var heapSamples = []string{"/memory/classes/heap/objects:bytes", "/memory/classes/heap/unused:bytes"}

// heapInUse returns the Go heap in use, in bytes.
func heapInUse() uint64 {
	s := make([]metrics.Sample, len(heapSamples))
	for i, name := range heapSamples {
		s[i].Name = name
	}
	metrics.Read(s)
	var n uint64
	for _, v := range s {
		if v.Value.Kind() == metrics.KindUint64 {
			n += v.Value.Uint64()
		}
	}
	return n
}
