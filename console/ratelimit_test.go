package console_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox/console"
	"github.com/oncebox/watermill-oncebox/dlq"
	"github.com/oncebox/watermill-oncebox/internal/dbtest"
)

// TestLoginIsRateLimitedPerAddress: five refused tokens a minute from one
// address, then 429 with Retry-After, even for the right token (a guess
// made while limited tells nothing); another address is not limited; the
// budget refills at five a minute; a successful login costs nothing.
func TestLoginIsRateLimitedPerAddress(t *testing.T) {
	t.Parallel()
	clock := clockwork.NewFakeClockAt(time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC))
	h, err := loginHandler(t, console.Config{Clock: clock})
	require.NoError(t, err)
	login := func(addr, tok string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader(url.Values{"token": {tok}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.RemoteAddr = addr
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	const attacker, other = "203.0.113.7:40001", "198.51.100.2:50000"

	require.Equal(t, http.StatusSeeOther, login(attacker, token).Code, "a good login costs nothing")
	for i := range console.DefaultLoginFailures {
		rec := login(attacker, "guess")
		require.Equal(t, http.StatusUnauthorized, rec.Code, "refused token %d", i+1)
		require.Empty(t, rec.Header().Get("Retry-After"))
	}
	rec := login("203.0.113.7:40002", "guess") // same host, another port
	require.Equal(t, http.StatusTooManyRequests, rec.Code)
	require.Equal(t, "12", rec.Header().Get("Retry-After"), "one token back after 60s/5")
	require.Contains(t, rec.Body.String(), "try again in 12 s")
	require.Equal(t, http.StatusTooManyRequests, login(attacker, token).Code, "the right token is not tried while limited")

	require.Equal(t, http.StatusSeeOther, login(other, token).Code, "another address is not limited")
	require.Equal(t, http.StatusUnauthorized, login(other, "guess").Code)

	clock.Advance(11 * time.Second)
	require.Equal(t, http.StatusTooManyRequests, login(attacker, token).Code)
	clock.Advance(time.Second)
	require.Equal(t, http.StatusSeeOther, login(attacker, token).Code, "refilled: one try after 12s")
	require.Equal(t, http.StatusUnauthorized, login(attacker, "guess").Code)
	require.Equal(t, http.StatusTooManyRequests, login(attacker, "guess").Code, "and only one")
}

// TestLoginLimitCanBeTurnedOff: a negative LoginFailures (a proxy in front
// limits already) never answers 429.
func TestLoginLimitCanBeTurnedOff(t *testing.T) {
	t.Parallel()
	h, err := loginHandler(t, console.Config{LoginFailures: -1})
	require.NoError(t, err)
	for range 3 * console.DefaultLoginFailures {
		req := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader("token=guess"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusUnauthorized, rec.Code)
	}
	_, err = loginHandler(t, console.Config{LoginWindow: -time.Second})
	require.ErrorContains(t, err, "Config.LoginWindow is negative")
}

// loginHandler is the console over a fresh PostgreSQL schema with the
// test's token, and cfg's other fields.
func loginHandler(t *testing.T, cfg console.Config) (http.Handler, error) {
	t.Helper()
	env := dbtest.TargetNamed(t, "postgres").New(t)
	st, err := dlq.NewStore(env.Beginner, dlq.Config{Dialect: env.Dialect})
	require.NoError(t, err)
	auth, err := dlq.BearerToken(token)
	require.NoError(t, err)
	cfg.Store, cfg.DB, cfg.Dialect, cfg.Authorize = st, env.Beginner, env.Dialect, auth
	return console.NewHandler(cfg)
}
