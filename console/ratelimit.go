package console

import (
	"math"
	"net"
	"net/http"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/time/rate"
)

// Defaults of the login rate limit.
const (
	// DefaultLoginFailures is how many refused logins a client address may
	// make per DefaultLoginWindow before the login answers 429.
	DefaultLoginFailures = 5
	// DefaultLoginWindow is the window of DefaultLoginFailures: the
	// budget refills at LoginFailures per LoginWindow.
	DefaultLoginWindow = time.Minute
	// loginAddresses bounds the addresses the limiter remembers; the
	// least recently seen goes first (an attacker with more addresses
	// than this gets no more than it would with this many).
	loginAddresses = 10_000
)

// loginLimiter limits refused logins per client address with a token
// bucket (golang.org/x/time/rate) each: failures burst up to the budget
// and refill at budget per window. Successful logins cost nothing. While
// an address has no token left its logins are refused with 429 before
// the token is tried, so a guess made then tells nothing.
type loginLimiter struct {
	every rate.Limit
	burst int
	mu    sync.Mutex
	addrs *lru.Cache[string, *rate.Limiter]
}

func newLoginLimiter(failures int, window time.Duration) *loginLimiter {
	addrs, _ := lru.New[string, *rate.Limiter](loginAddresses) // a positive size never fails
	return &loginLimiter{every: rate.Limit(float64(failures) / window.Seconds()), burst: failures, addrs: addrs}
}

// limiter returns addr's bucket, created full.
func (l *loginLimiter) limiter(addr string) *rate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim, ok := l.addrs.Get(addr)
	if !ok {
		lim = rate.NewLimiter(l.every, l.burst)
		l.addrs.Add(addr, lim)
	}
	return lim
}

// wait returns how long addr must wait before its next login may be
// tried at now: 0 when it may be tried now.
func (l *loginLimiter) wait(addr string, now time.Time) time.Duration {
	tokens := l.limiter(addr).TokensAt(now)
	if tokens >= 1 {
		return 0
	}
	return time.Duration((1 - tokens) / float64(l.every) * float64(time.Second))
}

// failed records a refused login of addr at now.
func (l *loginLimiter) failed(addr string, now time.Time) { l.limiter(addr).AllowN(now, 1) }

// clientAddress is the address a login is counted against: the
// connection's remote host. Behind a proxy every client shares the
// proxy's address; headers such as X-Forwarded-For are not read, since a
// client could set them to escape the limit.
func clientAddress(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// retryAfter is the Retry-After value of a wait: whole seconds, at least 1.
func retryAfter(d time.Duration) int { return max(1, int(math.Ceil(d.Seconds()))) }
