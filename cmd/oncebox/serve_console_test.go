package main

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// noRedirect is a client that shows redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// TestAdminServeServesTheConsoleAtTheRoot logs in to the console of a real
// admin serve with its token: without a session / is the login page, with
// the token the overview, beside the DLQ API, with the console's headers
// and the server's body limit.
func TestAdminServeServesTheConsoleAtTheRoot(t *testing.T) {
	t.Parallel()
	base := "http://" + startServe(t)

	resp, err := noRedirect.Get(base + "/")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/login", resp.Header.Get("Location"))
	require.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"))
	require.Contains(t, resp.Header.Get("Content-Security-Policy"), "script-src 'self'")

	login := func(token string) *http.Response {
		resp, err := noRedirect.PostForm(base+"/login", url.Values{"token": {token}})
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp
	}
	require.Equal(t, http.StatusUnauthorized, login("wrong").StatusCode)
	ok := login("s3cret-token-for-tests")
	require.Equal(t, http.StatusSeeOther, ok.StatusCode)
	cookies := ok.Cookies()
	require.Len(t, cookies, 1)
	require.True(t, cookies[0].HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, cookies[0].SameSite)
	require.False(t, cookies[0].Secure, "not Secure over plain HTTP")

	req, err := http.NewRequest(http.MethodGet, base+"/", nil)
	require.NoError(t, err)
	req.AddCookie(cookies[0])
	resp, err = noRedirect.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Contains(t, string(body), "<h1>Overview</h1>")

	// The API is where it was, behind the bearer token.
	resp, err = http.Get(base + "/dlq/events")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	// A login body over the API's limit is refused, not read.
	big := "token=" + strings.Repeat("a", 2<<20)
	resp, err = noRedirect.Post(base+"/login", "application/x-www-form-urlencoded", strings.NewReader(big))
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
}

// TestAdminServeWithoutTheConsole: --console=false serves the API alone.
func TestAdminServeWithoutTheConsole(t *testing.T) {
	t.Parallel()
	base := "http://" + startServe(t, "--console=false")
	resp, err := noRedirect.Get(base + "/")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}
