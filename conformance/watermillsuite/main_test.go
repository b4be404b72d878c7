package watermillsuite_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// go-metrics starts one process-wide goroutine the first time Sarama
		// creates a Meter and never stops it (rcrowley/go-metrics meter.go).
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"),
		// Sarama's producers guard metadata look-ups with a go-resiliency
		// circuit breaker whose timer goroutine sleeps its 10s timeout and
		// cannot be stopped; it ends on its own.
		goleak.IgnoreAnyFunction("github.com/eapache/go-resiliency/breaker.(*Breaker).timer"),
	)
}
