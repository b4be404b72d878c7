package poller_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox/poller"
)

// keyDroppingPublisher is a publisher a registered check warns about.
type keyDroppingPublisher struct{ *recorder }

// New runs the registered publisher checks on its publisherOut and logs
// each warning once, at the Info level; a check that panics does not fail
// New, and a publisher no check knows is not warned about.
var registerTestChecks sync.Once

func TestNewLogsTheWarningsOfRegisteredPublisherChecks(t *testing.T) {
	t.Parallel()
	// The registry is global and has no unregister: register once per
	// test binary, so that -count=N does not see each check N times.
	registerTestChecks.Do(func() {
		poller.RegisterPublisherCheck(nil) // ignored
		poller.RegisterPublisherCheck(func(pub message.Publisher) string {
			if _, ok := pub.(keyDroppingPublisher); ok {
				return "publisherOut drops the keys (test check)"
			}
			return ""
		})
		poller.RegisterPublisherCheck(func(pub message.Publisher) string {
			if _, ok := pub.(keyDroppingPublisher); ok {
				panic("a broken check")
			}
			return ""
		})
	})
	b := setup(t)
	warnings := func(pub message.Publisher) []string {
		logger := watermill.NewCaptureLogger()
		_, err := poller.New(b.schema.Beginner, pub, b.config("order-created"), logger)
		require.NoError(t, err)
		var got []string
		for _, m := range logger.Captured()[watermill.InfoLogLevel] {
			if strings.Contains(m.Msg, "(test check)") {
				got = append(got, m.Msg)
			}
		}
		return got
	}
	require.Equal(t, []string{"WARNING: publisherOut drops the keys (test check)"}, warnings(keyDroppingPublisher{newRecorder()}))
	require.Empty(t, warnings(newRecorder()))
}
