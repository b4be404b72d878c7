package poller

import (
	"sync"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
)

var publisherChecks struct {
	mu     sync.RWMutex
	checks []func(message.Publisher) string
}

// RegisterPublisherCheck adds check to the checks New runs on its
// publisherOut: New logs each non-empty warning check returns, once, at
// the Info level, prefixed with "WARNING: ". A check looks at the
// publisher's configuration, without publishing or connecting, and returns
// "" for a publisher it does not know. It must be safe for concurrent use
// and not panic.
//
// A broker client's module calls it from an init function: the kafka
// module registers the check that watermill-kafka's publisher keeps the
// events' ordering keys (its marshaler is kafka.KeyMarshaler). A nil check
// is ignored.
func RegisterPublisherCheck(check func(publisherOut message.Publisher) (warning string)) {
	if check == nil {
		return
	}
	publisherChecks.mu.Lock()
	defer publisherChecks.mu.Unlock()
	publisherChecks.checks = append(publisherChecks.checks, check)
}

// warnIfKeysDropped logs, once at start, the warnings of the registered
// publisher checks about pub: among them, that the ordering keys of the
// events will not reach Kafka through watermill-kafka's publisher.
func warnIfKeysDropped(pub message.Publisher, logger watermill.LoggerAdapter) {
	publisherChecks.mu.RLock()
	checks := publisherChecks.checks[:len(publisherChecks.checks):len(publisherChecks.checks)]
	publisherChecks.mu.RUnlock()
	for _, check := range checks {
		if w := runCheck(check, pub); w != "" {
			logger.Info("WARNING: "+w, nil)
		}
	}
}

// runCheck runs check on pub; a check that panics warns of nothing, so
// that a check cannot fail New.
func runCheck(check func(message.Publisher) string, pub message.Publisher) (warning string) {
	defer func() {
		if recover() != nil {
			warning = ""
		}
	}()
	return check(pub)
}
