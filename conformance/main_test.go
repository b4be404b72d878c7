package conformance_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/oncebox/watermill-oncebox/internal/dbtest"
)

// TestMain fails the run when a component leaves a goroutine behind (a
// poller, a cleaner, a pool not closed), and says loudly when a database of
// the suite was not run (Oracle without ORACLE_DSN): every one of its
// subtests is skipped.
func TestMain(m *testing.M) {
	for _, tg := range dbtest.Targets() {
		if tg.Missing != "" {
			fmt.Fprintf(os.Stderr, "conformance: %s\n", tg.Missing)
		}
	}
	goleak.VerifyTestMain(m)
}
