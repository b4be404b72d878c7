package middleware

import (
	"errors"
	"reflect"
	"runtime"
	"strings"

	"github.com/ThreeDotsLabs/watermill/message"
)

// ErrRetryInsideInbox is the error of every message handled by a
// Transactional inbox built around Watermill's Retry: the attempts would
// share the inbox's one transaction, and a failed attempt's writes would
// commit with the next attempt's, a double side effect.
var ErrRetryInsideInbox = errors.New("oncebox: inbox: Watermill's Retry runs inside the inbox, so every attempt " +
	"would share the inbox's one transaction and a failed attempt's writes would commit with the next one's " +
	"(a double side effect); add the poison queue, then Retry, then the inbox, or use middleware.NewConsumer")

// isRetry tells whether h is the handler Watermill's Retry middleware
// returns. The router builds the chain by calling each middleware with the
// handler the next one returned, so an inbox added just before Retry is
// given Retry's closure, whose function is named
// "…/router/middleware.Retry.Middleware.funcN" (or, where the call was
// inlined, "<caller>.Retry.Middleware.funcN"). A middleware between the two
// hides it: the check has no false positives, not no misses.
func isRetry(h message.HandlerFunc) bool {
	if h == nil {
		return false
	}
	f := runtime.FuncForPC(reflect.ValueOf(h).Pointer())
	return f != nil && strings.Contains(f.Name(), ".Retry.Middleware.func")
}
