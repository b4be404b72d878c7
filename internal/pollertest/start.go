package pollertest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// Runner is the Run/Running/Close lifecycle of a poller, an inbox cleaner,
// a service or a Watermill router.
type Runner interface {
	Run(ctx context.Context) error
	Running() chan struct{}
	Close() error
}

// Start runs r until the test ends, once it is running; at the end it
// closes r and requires that both Close and Run returned nil.
func Start(t testing.TB, r Runner) {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- r.Run(context.Background()) }()
	<-r.Running()
	t.Cleanup(func() {
		require.NoError(t, r.Close())
		require.NoError(t, <-errc)
	})
}
