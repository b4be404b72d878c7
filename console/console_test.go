package console_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/console"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dlq"
	"github.com/oncebox/watermill-oncebox/internal/dbtest"
)

const token = "console-test-token"

// bundle is one test's tables, store and console server.
type bundle struct {
	env   *dbtest.Env
	store *dlq.Store
	srv   *httptest.Server
}

func setup(t *testing.T, target string) *bundle {
	t.Helper()
	return setupDialect(t, target, func(d dialects.Dialect) dialects.Dialect { return d })
}

// setupDialect is setup with the console given dialect(the target's dialect).
func setupDialect(t *testing.T, target string, dialect func(dialects.Dialect) dialects.Dialect) *bundle {
	t.Helper()
	env := dbtest.TargetNamed(t, target).New(t)
	st, err := dlq.NewStore(env.Beginner, dlq.Config{Dialect: env.Dialect})
	require.NoError(t, err)
	auth, err := dlq.BearerToken(token)
	require.NoError(t, err)
	h, err := console.NewHandler(console.Config{Store: st, DB: env.Beginner, Dialect: dialect(env.Dialect), Authorize: auth})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &bundle{env: env, store: st, srv: srv}
}

func (b *bundle) park(t *testing.T, eventType, errText string) oncebox.EventID {
	t.Helper()
	id, err := oncebox.NewEventID()
	require.NoError(t, err)
	require.NoError(t, b.env.Dialect.PoisonUpsert(context.Background(), b.env.Beginner, dialects.DLQRow{ID: id, HandlerName: "h",
		EventType: eventType, Topic: "t", MessageUUID: "m-" + id.String(), Payload: []byte("{}"), Metadata: "{}",
		Error: errText, FailedAt: time.Now().UTC()}))
	return id
}

var client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// session logs in and returns the cookie and the CSRF token of a page.
func (b *bundle) session(t *testing.T) (*http.Cookie, string) {
	t.Helper()
	resp, err := client.PostForm(b.srv.URL+"/login", url.Values{"token": {token}})
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	c := resp.Cookies()[0]
	_, body := b.get(t, c, "/dead-letters")
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(body)
	require.NotNil(t, m, body)
	return c, m[1]
}

func (b *bundle) get(t *testing.T, c *http.Cookie, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.srv.URL+path, nil)
	require.NoError(t, err)
	return do(t, req, c)
}

func (b *bundle) post(t *testing.T, c *http.Cookie, path string, form url.Values, origin string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.srv.URL+path, strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	return do(t, req, c)
}

// do sends req with the session cookie c (none when nil) and returns the
// status and the whole body.
func do(t *testing.T, req *http.Request, c *http.Cookie) (int, string) {
	t.Helper()
	if c != nil {
		req.AddCookie(c)
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

func TestNewHandlerNamesTheFieldsAtFault(t *testing.T) {
	t.Parallel()
	_, err := console.NewHandler(console.Config{BasePath: "/a b", SessionTTL: -1})
	require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
	for _, field := range []string{"Config.Store", "Config.DB", "Config.Dialect", "Config.Authorize", "BasePath", "Config.SessionTTL"} {
		require.Contains(t, err.Error(), field)
	}
}

// TestStateChangesNeedTheCSRFToken: the session cookie alone, a wrong
// token or another origin change nothing; the right token does.
func TestStateChangesNeedTheCSRFToken(t *testing.T) {
	t.Parallel()
	b := setup(t, "postgres")
	id := b.park(t, "order-created", "boom")
	c, csrf := b.session(t)
	form := url.Values{"action": {"resolve"}, "scope": {"one"}, "id": {id.String()}}
	status, body := b.post(t, c, "/apply", form, "")
	require.Equal(t, http.StatusForbidden, status)
	require.Contains(t, body, "CSRF")
	form.Set("csrf", csrf+"x")
	status, _ = b.post(t, c, "/apply", form, "")
	require.Equal(t, http.StatusForbidden, status)
	form.Set("csrf", csrf)
	status, _ = b.post(t, c, "/apply", form, "https://evil.example")
	require.Equal(t, http.StatusForbidden, status)
	status, _ = b.post(t, nil, "/apply", form, "")
	require.Equal(t, http.StatusForbidden, status, "no session")
	row, err := b.store.Get(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, oncebox.DLQStatusMoved, row.Status, "nothing changed")

	status, _ = b.post(t, c, "/apply", form, b.srv.URL)
	require.Equal(t, http.StatusSeeOther, status)
	row, err = b.store.Get(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, oncebox.DLQStatusResolved, row.Status)
}

// TestConfirmationCountsWhatTheStoreWillChange: the confirmation of a
// filter counts only the rows whose status allows the change.
func TestConfirmationCountsWhatTheStoreWillChange(t *testing.T) {
	t.Parallel()
	b := setup(t, "postgres")
	var ids []oncebox.EventID
	for i := range 5 {
		ids = append(ids, b.park(t, "order-created", fmt.Sprintf("timeout after %dms", i)))
	}
	require.NoError(t, b.store.SetStatus(context.Background(), ids[0], oncebox.DLQStatusToRetry))
	c, csrf := b.session(t)
	form := url.Values{"csrf": {csrf}, "action": {"retry"}, "scope": {"filter"}, "event_type": {"order-created"}}
	status, body := b.post(t, c, "/confirm", form, "")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `<strong id="confirm-count">4</strong>`, "one row is TO_RETRY already")
	form.Set("scope", "fingerprint")
	form.Set("g_source", "consumer")
	form.Set("g_type", "order-created")
	form.Set("g_class", "timeout after Nms")
	status, body = b.post(t, c, "/confirm", form, "")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `<strong id="confirm-count">4</strong>`)
	status, body = b.post(t, c, "/apply", form, "")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `<strong id="done-count">4</strong>`)
	n, err := b.store.Count(context.Background(), dlq.Filter{Statuses: []oncebox.DLQStatus{oncebox.DLQStatusToRetry}})
	require.NoError(t, err)
	require.Equal(t, 5, n)
}

// TestFingerprintsMaskIDsNumbersAndQuotedValues groups errors that differ
// only in ids, numbers and quoted values.
func TestFingerprintsMaskIDsNumbersAndQuotedValues(t *testing.T) {
	t.Parallel()
	b := setup(t, "postgres")
	b.park(t, "e", `order 42 "abc": row 01a24612-b59c-745e-960b-48b239c6003c locked at 0xDEAD`)
	b.park(t, "e", `order 7 'x y': row 01a24612-0000-745e-960b-48b239c6003d locked at 0x1F`)
	b.park(t, "e", `other`)
	c, _ := b.session(t)
	status, body := b.get(t, c, "/fingerprints") // every row: the class is stored (migration 0005)
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `data-count="2"`)
	require.Contains(t, body, `<code class="class">order N ?: row &lt;id&gt; locked at &lt;hex&gt;</code>`)
}

// TestRequestsWithoutASessionGoToTheLoginPage, and every response carries
// the security headers.
func TestRequestsWithoutASessionGoToTheLoginPage(t *testing.T) {
	t.Parallel()
	b := setup(t, "postgres")
	for _, p := range []string{"/", "/dead-letters", "/fingerprints", "/dead-letters/01a24612-b59c-745e-960b-48b239c6003c"} {
		resp, err := client.Get(b.srv.URL + p)
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, p)
		require.Equal(t, "/login", resp.Header.Get("Location"), p)
		require.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"))
		require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
		require.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'none'")
		require.NotContains(t, resp.Header.Get("Content-Security-Policy"), "unsafe-inline")
	}
}

// TestAuthorizeIsAskedOnEveryRequest: a hook that turns a token away
// later (revoked) ends the session.
func TestAuthorizeIsAskedOnEveryRequest(t *testing.T) {
	t.Parallel()
	env := dbtest.TargetNamed(t, "postgres").New(t)
	st, err := dlq.NewStore(env.Beginner, dlq.Config{Dialect: env.Dialect})
	require.NoError(t, err)
	revoked := make(chan struct{})
	auth := func(r *http.Request) error {
		select {
		case <-revoked:
			return errors.New("revoked")
		default:
		}
		if r.Header.Get("Authorization") != "Bearer "+token {
			return errors.New("bad token")
		}
		return nil
	}
	h, err := console.NewHandler(console.Config{Store: st, DB: env.Beginner, Dialect: env.Dialect, Authorize: auth})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	defer srv.Close()
	b := &bundle{env: env, store: st, srv: srv}
	c, _ := b.session(t)
	status, _ := b.get(t, c, "/")
	require.Equal(t, http.StatusOK, status)
	close(revoked)
	status, _ = b.get(t, c, "/")
	require.Equal(t, http.StatusSeeOther, status)
}

// TestADialectWithoutConsoleStatements (Oracle today: here MySQL's
// dialect with its ConsoleInspector methods hidden) still gets the
// overview's counts and the lists; the fingerprint page says why it is
// missing.
func TestADialectWithoutConsoleStatements(t *testing.T) {
	t.Parallel()
	b := setupDialect(t, "mysql", func(d dialects.Dialect) dialects.Dialect { return struct{ dialects.Dialect }{d} })
	b.park(t, "order-created", "boom")
	c, _ := b.session(t)
	status, body := b.get(t, c, "/")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `<td class="num moved">1</td>`)
	status, body = b.get(t, c, "/dead-letters?event_type=order-created")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `<span id="total">1</span>`)
	status, body = b.get(t, c, "/fingerprints")
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, body, "no fingerprint statements")
}

// TestTheConsoleOnMySQL: the overview's line per type and the
// fingerprints, classed in Go (dialects.ErrorClass) as PostgreSQL classes
// them in SQL.
func TestTheConsoleOnMySQL(t *testing.T) {
	t.Parallel()
	b := setup(t, "mysql")
	b.park(t, "e", `order 42 "abc": row 01a24612-b59c-745e-960b-48b239c6003c locked at 0xDEAD`)
	b.park(t, "e", `order 7 'x y': row 01a24612-0000-745e-960b-48b239c6003d locked at 0x1F`)
	b.park(t, "e", `other`)
	c, _ := b.session(t)
	status, body := b.get(t, c, "/fingerprints")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `data-count="2"`)
	require.Contains(t, body, `<code class="class">order N ?: row &lt;id&gt; locked at &lt;hex&gt;</code>`)
	status, body = b.get(t, c, "/")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "<th>Oldest due</th>", "the full overview")
}

// TestBadInputIsAClearError names the parameter, never a 500.
func TestBadInputIsAClearError(t *testing.T) {
	t.Parallel()
	b := setup(t, "postgres")
	c, csrf := b.session(t)
	for path, want := range map[string]string{
		"/dead-letters?status=NOPE":          "unknown status",
		"/dead-letters?moved_from=yesterday": "moved_from",
		"/dead-letters?limit=0":              "limit",
		"/dead-letters?cursor=zz":            "cursor",
		"/dead-letters/not-a-uuid":           "id",
		"/dead-letters?event_type=a%00b":     "NUL",
		"/fingerprints?source=elsewhere":     "source",
	} {
		status, body := b.get(t, c, path)
		require.Equal(t, http.StatusBadRequest, status, path)
		require.Contains(t, body, want, path)
	}
	status, body := b.post(t, c, "/confirm", url.Values{"csrf": {csrf}, "action": {"explode"}, "scope": {"one"}}, "")
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, body, "action")
}
