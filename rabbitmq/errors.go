package rabbitmq

import (
	"errors"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/oncebox/watermill-oncebox"
)

// ErrUnroutable is wrapped by the result of a message the broker returned
// (basic.return): with the mandatory flag, no queue was bound for its
// exchange and routing key. The message is not stored anywhere.
var ErrUnroutable = errors.New("rabbitmq: message returned by the broker as unroutable")

// ErrNacked is wrapped by the result of a message the broker negatively
// acknowledged (basic.nack), for example a queue at its length limit with
// overflow reject-publish.
var ErrNacked = errors.New("rabbitmq: message nacked by the broker")

// ErrChannelClosed is wrapped by the result of a message the broker refused
// by closing the channel with a channel exception (for example 404 NOT_FOUND:
// the exchange does not exist, or 406 PRECONDITION_FAILED: the message is
// larger than the broker's max_message_size).
var ErrChannelClosed = errors.New("rabbitmq: channel closed by the broker")

// ErrAccessRefused is wrapped by the error of a connection the broker
// refused: a wrong user name or password, or a user without access to the
// URL's virtual host (AMQP 403 ACCESS_REFUSED, 530 NOT_ALLOWED). Trying
// later does not help: CheckBroker reports it, and the service's Run fails
// with it at start. Once the relay runs it is still an outage
// (oncebox.ErrBrokerUnavailable is wrapped too): a password rotated under a
// running relay is waited out without counting attempts.
var ErrAccessRefused = errors.New("rabbitmq: the broker refused the connection")

// refusedError is a connection the broker refused (403 ACCESS_REFUSED: the
// credentials or the virtual host's permissions; 530 NOT_ALLOWED: no such
// virtual host, or no access to it), as opposed to one that could not be
// made. errors.Is(err, ErrAccessRefused) holds.
type refusedError struct {
	url string // redacted
	err *amqp.Error
}

func (e *refusedError) Error() string {
	name := "ACCESS_REFUSED"
	if e.err.Code == amqp.NotAllowed {
		name = "NOT_ALLOWED"
	}
	return fmt.Sprintf("rabbitmq: broker %s refused the connection: %d %s: %s (check the URL's user name, password and virtual host, and the user's permissions)",
		e.url, e.err.Code, name, e.err.Reason)
}

func (e *refusedError) Unwrap() []error { return []error{ErrAccessRefused, e.err} }

// ReturnedError is the result of a message the broker returned as
// unroutable. errors.Is(err, ErrUnroutable) holds.
type ReturnedError struct {
	// Exchange and RoutingKey are where the message was published.
	Exchange   string
	RoutingKey string
	// ReplyCode and ReplyText are the broker's reason (312 NO_ROUTE).
	ReplyCode uint16
	ReplyText string
}

// Error names the exchange, the routing key and the broker's reason.
func (e *ReturnedError) Error() string {
	return fmt.Sprintf("rabbitmq: message returned by the broker, unroutable: exchange %s, routing key %q: %d %s",
		exchangeName(e.Exchange), e.RoutingKey, e.ReplyCode, e.ReplyText)
}

// Unwrap returns ErrUnroutable.
func (e *ReturnedError) Unwrap() error { return ErrUnroutable }

func exchangeName(name string) string {
	if name == "" {
		return `"" (the default exchange)`
	}
	return fmt.Sprintf("%q", name)
}

// unavailable marks err as "the broker cannot be reached".
func unavailable(err error) error {
	return fmt.Errorf("rabbitmq: %w: %w", oncebox.ErrBrokerUnavailable, err)
}

// errClosed is returned by a Publisher used after Close. It is also
// "unavailable", so a poller still running releases its batch without
// counting an attempt.
var errClosed = fmt.Errorf("rabbitmq: publisher: %w (%w)", oncebox.ErrClosed, oncebox.ErrBrokerUnavailable)

// isSoftChannelError tells a channel exception raised by the broker about
// what was published (the broker was reached and refused) from a connection
// loss.
func isSoftChannelError(e *amqp.Error) bool {
	return e != nil && e.Server && e.Recover
}
