package publisher

import (
	"context"

	"github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
)

// SetDefaultQueueUsage replaces the default reading of the notification
// queue's usage (ReadQueueUsage of the dialect) until the returned
// function restores it. Not for parallel tests.
func SetDefaultQueueUsage(read func(ctx context.Context, tx sql.ContextExecutor) (float64, error)) (restore func()) {
	old := readDefaultUsage
	readDefaultUsage = read
	return func() { readDefaultUsage = old }
}
