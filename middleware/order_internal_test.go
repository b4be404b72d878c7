package middleware

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The names of Retry's closures, as the Go 1.26 toolchain gives them with
// and without Retry.Middleware inlined into its caller.
func TestIsRetryFunctionKnowsRetrysClosures(t *testing.T) {
	t.Parallel()
	for _, name := range []string{
		"github.com/ThreeDotsLabs/watermill/message/router/middleware.Retry.Middleware.func1",
		"github.com/ThreeDotsLabs/watermill/message/router/middleware.Retry.Middleware.func1.1",
		"example.com/app.TestX.func3.Retry.Middleware.1",
		"example.com/app.TestX.func3.TestX.func2.2.TestX.func3.Retry.Middleware.1.4",
	} {
		require.True(t, isRetryFunction(name), name)
	}
	for _, name := range []string{
		"github.com/ThreeDotsLabs/watermill/message/router/middleware.Retry.Middleware",
		"github.com/cenkalti/backoff/v5.Retry[...]",
		"example.com/app.Retry.MiddlewareX.func1",
		"example.com/app.handler",
	} {
		require.False(t, isRetryFunction(name), name)
	}
}
