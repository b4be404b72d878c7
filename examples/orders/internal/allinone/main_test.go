package allinone

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that a run stops every goroutine it started: the
// services' shutdown is part of what the example shows.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// go-metrics starts one process-wide goroutine the first time Sarama
		// creates a meter and never stops it (see kafka/main_test.go).
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"),
		// Sarama's circuit breaker sleeps out its timeout after opening.
		goleak.IgnoreAnyFunction("github.com/eapache/go-resiliency/breaker.(*Breaker).timer"),
	)
}
