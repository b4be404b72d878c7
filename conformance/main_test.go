package conformance_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run when a component leaves a goroutine behind (a
// poller, a cleaner, a pool not closed).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
