package kafka_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// go-metrics starts one process-wide goroutine that ticks every
		// Meter the first time Sarama creates one (each broker connection
		// registers meters), and never stops it: it outlives every Close by
		// design (rcrowley/go-metrics meter.go, NewMeter → arbiter.tick).
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"),
		// Sarama's topic and partition producers guard their metadata
		// look-ups with a go-resiliency circuit breaker (async_producer.go,
		// breaker.New(3, 1, 10*time.Second)). Opening it starts a goroutine
		// that sleeps the 10s timeout and cannot be stopped; it ends on its
		// own at most 10s after the producer closed. The tests that stop the
		// cluster open such breakers.
		goleak.IgnoreAnyFunction("github.com/eapache/go-resiliency/breaker.(*Breaker).timer"),
	)
}
