package middleware

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
)

// ErrRetryInsideInbox is the error of a message handled by a Transactional
// inbox with Watermill's Retry inside it: the attempts would share the
// inbox's one transaction, and a failed attempt's writes would commit with
// the next attempt's, a double side effect. The inbox that returns it has
// stopped (see InboxConfig.OnMisuse).
var ErrRetryInsideInbox = errors.New("oncebox: inbox: Watermill's Retry runs inside the inbox, so every attempt " +
	"would share the inbox's one transaction and a failed attempt's writes would commit with the next one's " +
	"(a double side effect); add the poison queue, then Retry, then the inbox, or use middleware.NewConsumer")

// isRetry tells whether h is the handler Watermill's Retry middleware
// returns. The router builds the chain by calling each middleware with the
// handler the next one returned, so an inbox added just before Retry is
// given Retry's closure, whose function is named
// "…/router/middleware.Retry.Middleware.funcN" (or, where the call was
// inlined, "<caller>.Retry.Middleware.funcN"). A middleware between the two
// hides it from this check, made when the router builds the handler; the
// accessors of the transaction find it on the stack (retryBelowInbox).
func isRetry(h message.HandlerFunc) bool {
	if h == nil {
		return false
	}
	f := runtime.FuncForPC(reflect.ValueOf(h).Pointer())
	return f != nil && isRetryFunction(f.Name())
}

// isRetryFunction tells whether the function named name is Retry's handler
// or one of its closures (the attempt that backoff.Retry calls). Their
// names are "…/router/middleware.Retry.Middleware.func1" and ".func1.N";
// where Retry.Middleware was inlined into its caller, the toolchain names
// them "<caller>.Retry.Middleware.1" and ".1.N" (checked with Go 1.26).
func isRetryFunction(name string) bool {
	const marker = ".Retry.Middleware."
	for {
		at := strings.Index(name, marker)
		if at < 0 {
			return false
		}
		name = name[at+len(marker):]
		if strings.HasPrefix(name, "func") || (name != "" && name[0] >= '0' && name[0] <= '9') {
			return true
		}
	}
}

// inboxRunner is the name of safeHandle, the function through which the
// inbox calls the handler: the frame that separates what runs inside the
// inbox's transaction from what runs outside it.
var inboxRunner = runtime.FuncForPC(reflect.ValueOf(safeHandle).Pointer()).Name()

// maxStackScan is how many frames retryBelowInbox reads. A handler that
// asks for its transaction deeper than that is not checked.
const maxStackScan = 128

// retryBelowInbox returns the name of a Retry frame between its caller and
// the nearest inbox frame on the goroutine's stack, or "" if there is none.
//
// Retry runs its attempts in a loop (backoff.Retry), calling the next handler
// again with the same message: from the inbox's side, the attempts cannot
// be told apart (same message, same context, no call in between that the
// inbox makes). Their stacks can: a handler that takes the inbox's
// transaction (TxFromContext and friends, the only way to it) from inside
// Retry has Retry's frames between it and safeHandle, whatever middleware
// sits between the two. In the correct order (poison queue, Retry, inbox)
// Retry's frames are beyond safeHandle, where the scan stops. On a goroutine
// without safeHandle (the consumer of the inbox subscriber, which receives
// the message after the inbox opened its transaction) every Retry frame is
// inside the transaction, so the whole stack is read.
func retryBelowInbox() string {
	var pcs [maxStackScan]uintptr
	n := runtime.Callers(3, pcs[:]) // skip runtime.Callers, this function and txScope.check
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		switch {
		case f.Function == inboxRunner:
			return ""
		case isRetryFunction(f.Function):
			return f.Function
		case !more:
			return ""
		}
	}
}

// txScope is what a Transactional inbox puts in the handler's context: its
// transaction, and the Retry the accessors found inside it, if any.
type txScope struct {
	tx wsql.Tx

	mu    sync.Mutex
	retry string // the Retry frame found between a caller of the accessors and the inbox
}

// check records a Retry between the accessor's caller and the inbox. It
// runs on every call (not once), because a handler may take its
// transaction on several goroutines, and only the one Retry runs on shows
// it.
func (s *txScope) check() {
	found := retryBelowInbox()
	if found == "" {
		return
	}
	s.mu.Lock()
	if s.retry == "" {
		s.retry = found
	}
	s.mu.Unlock()
}

// retryFound returns what check found.
func (s *txScope) retryFound() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.retry
}

// misused is the error of the message msg, on which a Retry inside the
// inbox was found (where: the function found, or how). It stops the inbox.
func (i *Inbox) misused(msg *message.Message, where string, handlerErr error) error {
	err := fmt.Errorf("%w (message %s; found %s)", ErrRetryInsideInbox, msg.UUID, where)
	if handlerErr != nil {
		err = fmt.Errorf("%w; the handler's last error: %v", err, handlerErr)
	}
	i.stop(err)
	return err
}

// stop stops the inbox on its first misuse: logs it once, at ERROR, and
// calls OnMisuse, on a goroutine of its own so that it may close the router
// (Router.Close waits for the handlers, and this is one of them).
func (i *Inbox) stop(err error) {
	i.stopOnce.Do(func() {
		i.stopped.Store(&err)
		i.logger.Error("The inbox stopped: Watermill's Retry runs inside it. It will hold every further message "+
			"unacknowledged until the router closes. Fix: the poison queue, then Retry, then the inbox "+
			"(middleware.NewConsumer, or service.Middleware)", err, nil)
		if i.config.OnMisuse != nil {
			go i.config.OnMisuse(err)
		}
	})
}

// held returns, for a message that reached a stopped inbox, the error to
// nack it with once its context ended (the router closing), and false if
// the inbox has not stopped. Refusing such messages at once would be
// refusing every message at full speed without a poison queue: the broker
// redelivers a nacked message at once, and nothing counts an attempt.
// Holding the message holds the subscription instead (the subscribers ack
// a message before they deliver the next of its partition or queue).
func (i *Inbox) held(msg *message.Message) (error, bool) {
	stopped := i.stopped.Load()
	if stopped == nil {
		return nil, false
	}
	ctx := msg.Context()
	<-ctx.Done()
	return fmt.Errorf("oncebox: inbox: message %s not handled, the inbox stopped on %w: %w", msg.UUID, *stopped, context.Cause(ctx)), true
}
