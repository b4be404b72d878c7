package rabbitmq

import (
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

func TestSoftChannelErrorsAreRefusalsTheRestUnavailability(t *testing.T) {
	for _, c := range []struct {
		err  *amqp.Error
		soft bool
	}{
		{&amqp.Error{Code: 404, Reason: "NOT_FOUND - no exchange", Server: true, Recover: true}, true},
		{&amqp.Error{Code: 406, Reason: "PRECONDITION_FAILED - message size", Server: true, Recover: true}, true},
		{&amqp.Error{Code: 320, Reason: "CONNECTION_FORCED - shutdown", Server: true, Recover: false}, false},
		{&amqp.Error{Code: amqp.FrameError, Reason: "EOF"}, false},
		{amqp.ErrClosed, false},
		{nil, false},
	} {
		require.Equal(t, c.soft, isSoftChannelError(c.err), "%v", c.err)
	}
}
