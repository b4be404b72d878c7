package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/console"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dlq"
	"github.com/oncebox/watermill-oncebox/internal/pgtest"
	"github.com/oncebox/watermill-oncebox/oncetest"
	"github.com/oncebox/watermill-oncebox/service"
)

const token = "console-e2e-token"

// chromium finds Debian's chromium. Outside CI a missing browser skips the
// test with the banner of scripts/test.sh (as kcat's test does); under CI
// it fails: `make tools` installs it.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "headless Chromium is not on PATH: install it with `apt-get update && apt-get install -y chromium` (Debian/Ubuntu; `make tools` does under CI)"
	if os.Getenv("CI") == "" {
		t.Skip("CHROMIUM NOT RUN: " + msg + "; CI fails this test instead")
	}
	t.Fatal(msg)
	return ""
}

const serviceYAML = `oncebox:
  tables: {schema: %s}
  outbox:
    defaults: {polling: {min-fixed-delay: 1ms, max-fixed-delay: 10ms}}
    dlq: {enabled: true}
  inbox:
    enabled: true
    retry: {max-retries: 1, initial-interval: 1ms}
`

// bundle is the test's database, service, console server and browser.
type bundle struct {
	s       *pgtest.Schema
	svc     *service.Service
	store   *dlq.Store
	srv     *httptest.Server
	ctx     context.Context // the browser tab
	shots   string
	mu      sync.Mutex
	urls    []string // every request the page made
	dialogs []string // every JavaScript dialog opened
}

func setup(t *testing.T) *bundle {
	t.Helper()
	exe := chromium(t)
	s := pgtest.NewSchema(t)
	cfg, err := oncebox.LoadConfig(strings.NewReader(fmt.Sprintf(serviceYAML, s.Name)))
	require.NoError(t, err)
	broker := gochannel.NewGoChannel(gochannel.Config{Persistent: true}, watermill.NopLogger{})
	t.Cleanup(func() { _ = broker.Close() })
	svc, err := service.New(s.Beginner, cfg, watermill.NopLogger{}, service.WithRelay(broker))
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		require.NoError(t, svc.Close())
		<-done
	})
	auth, err := dlq.BearerToken(token)
	require.NoError(t, err)
	h, err := svc.ConsoleHandler(console.Config{Authorize: auth})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	b := &bundle{s: s, svc: svc, store: svc.DLQStore(), srv: srv, shots: t.ArtifactDir()}
	t.Logf("screenshots in %s", b.shots)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 900))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	var ctx context.Context
	ctx, cancelC := chromedp.NewContext(actx, chromedp.WithListener(func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			b.urls = append(b.urls, e.Request.URL)
		case network.EventRequestWillBeSent:
			b.urls = append(b.urls, e.Request.URL)
		case *page.EventJavascriptDialogOpening:
			b.dialogs = append(b.dialogs, e.Message)
			go func() {
				_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
			}()
		case page.EventJavascriptDialogOpening:
			b.dialogs = append(b.dialogs, e.Message)
			go func() {
				_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
			}()
		}
	}))
	t.Cleanup(func() { cancelC(); cancelA() })
	_, err = chromedp.Call(ctx, network.Enable, network.EnableParams{})
	require.NoError(t, err)
	b.ctx = ctx
	return b
}

func (b *bundle) run(t *testing.T, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		// What the page showed, to tell why.
		c, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		defer cancel()
		html, _ := chromedp.Run(c, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
		t.Fatalf("browser: %v\nthe page: %s", err, html)
	}
}

// visible waits until the element of the CSS selector sel is visible. It
// retries in short rounds: a wait begun while a redirect replaces the
// document can watch the old one forever.
func visible(sel string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		deadline := time.Now().Add(30 * time.Second)
		for {
			c, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := chromedp.WaitVisible(chromedp.CSS(sel))(c, tg)
			cancel()
			if err == nil || ctx.Err() != nil || time.Now().After(deadline) {
				if err != nil {
					err = fmt.Errorf("%s not visible: %w", sel, err)
				}
				return chromedp.Void{}, err
			}
		}
	}
}

func (b *bundle) shot(t *testing.T, name string) {
	t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100)) // 100: PNG; less is JPEG
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(b.shots, name+".png"), png, 0o644))
}

func (b *bundle) text(t *testing.T, sel string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, cancel := context.WithTimeout(b.ctx, 2*time.Second)
		s, err := chromedp.Run(c, chromedp.Text(chromedp.CSS(sel)))
		cancel()
		if err == nil {
			return strings.TrimSpace(s)
		}
		// The document was replaced under the query (a form's redirect).
		require.True(t, time.Now().Before(deadline), "the text of %s: %v", sel, err)
	}
}

// wantText waits until the text of sel is want, the page having loaded
// after a click, and fails with the last text seen.
func (b *bundle) wantText(t *testing.T, sel, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := b.text(t, sel)
		if got == want {
			return
		}
		require.True(t, time.Now().Before(deadline), "the text of %s: want %q, got %q", sel, want, got)
		time.Sleep(100 * time.Millisecond)
	}
}

// park writes a consumer DLQ row, as the poison queue does.
func (b *bundle) park(t *testing.T, eventType string, payload []byte, metadata, errText string) oncebox.EventID {
	t.Helper()
	id, err := oncebox.NewEventID()
	require.NoError(t, err)
	eid, err := oncebox.NewEventID()
	require.NoError(t, err)
	require.NoError(t, b.s.Dialect.PoisonUpsert(context.Background(), b.s.Beginner, dialects.DLQRow{ID: id, EventID: &eid,
		HandlerName: "billing", EventType: eventType, Topic: "events", MessageUUID: "m-" + id.String(), Payload: payload,
		Metadata: metadata, Error: errText, FailedAt: time.Now().UTC()}))
	return id
}

func (b *bundle) count(t *testing.T, f dlq.Filter) int {
	t.Helper()
	n, err := b.store.Count(context.Background(), f)
	require.NoError(t, err)
	return n
}

// TestConsoleInABrowser walks the console as an operator does: the login,
// the overview, a filter, a row, a retry the relay delivers, a fingerprint
// of 100 rows resolved in one act, and that hostile rows stay text, a
// forged POST is refused and no session means the login page.
func TestConsoleInABrowser(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	var resp *http.Response
	for i := range 100 {
		b.park(t, "invoice-sent", []byte(fmt.Sprintf(`{"invoice":%d}`, i)), `{"tenant":"acme"}`,
			fmt.Sprintf("billing: call %d to 'https://billing/%d' timed out after %dms", i, i, 3000+i))
	}
	var orderIDs []oncebox.EventID
	for i := range 3 {
		orderIDs = append(orderIDs, b.park(t, "order-created", []byte(fmt.Sprintf(`{"order":%d,"items":[1,2]}`, i)), `{"k":"v"}`, "schema: field missing"))
	}
	const hostile = `<script>alert(1)</script><img src=x onerror="alert(2);fetch('/pwned')">`
	hostileID := b.park(t, hostile, []byte(hostile), `{"x":"`+strings.ReplaceAll(hostile, `"`, `\"`)+`"}`, hostile)

	// No session: the login page.
	b.run(t, chromedp.Navigate(b.srv.URL+"/"), visible("#login"))
	loc, err := chromedp.Run(b.ctx, chromedp.Location())
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(loc, "/login"), "without a session / goes to the login page, got %s", loc)
	b.shot(t, "login")
	// A wrong token stays on the login page.
	b.run(t, chromedp.SendKeys(chromedp.CSS("#token"), "wrong"), chromedp.Click(chromedp.CSS("#login-submit")),
		visible("#login-error"))
	// The right token: the overview.
	b.run(t, chromedp.SendKeys(chromedp.CSS("#token"), token),
		chromedp.Click(chromedp.CSS("#login-submit")), visible("#dlq"))
	got, err := chromedp.Call(b.ctx, network.GetCookies, network.GetCookiesParams{})
	require.NoError(t, err)
	cookies := got.Cookies
	require.Len(t, cookies, 1)
	require.True(t, cookies[0].HTTPOnly, "the session cookie is HttpOnly")
	require.Equal(t, network.CookieSameSiteStrict, cookies[0].SameSite)
	require.NotContains(t, cookies[0].Value, token, "the cookie is a session id, not the token")

	// The overview's counts are the table's: 20 events the relay sent.
	tx, err := b.s.Beginner.BeginTx(ctx, nil)
	require.NoError(t, err)
	pub, err := b.svc.Publisher(tx)
	require.NoError(t, err)
	for i := range 20 {
		require.NoError(t, pub.Publish("payment-captured", message.NewMessage(fmt.Sprintf("pay-%d", i), []byte(`{"amount":1}`))))
	}
	require.NoError(t, tx.Commit())
	require.Eventually(t, func() bool {
		evs, err := oncetest.Events(ctx, b.s.Beginner, b.s.Dialect)
		require.NoError(t, err)
		processed := 0
		for _, e := range evs {
			if e.Status == oncebox.StatusProcessed {
				processed++
			}
		}
		return processed == 20
	}, 30*time.Second, 50*time.Millisecond, "the relay sends the 20 events")
	b.run(t, chromedp.Reload(), visible("#types"))
	b.wantText(t, `#types tr[data-type="payment-captured"] .processed`, "20")
	b.wantText(t, `#types tr[data-type="payment-captured"] .pending`, "0")
	moved := b.count(t, dlq.Filter{Source: oncebox.DLQSourceConsumer, Statuses: []oncebox.DLQStatus{oncebox.DLQStatusMoved}})
	require.Equal(t, 104, moved)
	b.wantText(t, `#dlq tr[data-source="consumer"] .moved`, fmt.Sprint(moved))
	b.shot(t, "overview")

	// Filter by event type.
	b.run(t, chromedp.Click(chromedp.CSS("#nav-list")), visible("#filter"),
		chromedp.SendKeys(chromedp.CSS("#f-type"), "order-created"), chromedp.Click(chromedp.CSS("#f-apply")),
		visible("#rows"))
	b.wantText(t, "#total", "3")
	n, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](`document.querySelectorAll("#rows tbody tr[data-id]").length`))
	require.NoError(t, err)
	require.Equal(t, 3, n)
	b.shot(t, "list")

	// Open a row: its payload as indented JSON.
	target := orderIDs[0]
	b.run(t, chromedp.Click(chromedp.CSS(fmt.Sprintf(`tr[data-id="%s"] a.open`, target))), visible("#payload"))
	require.Contains(t, b.text(t, "#payload"), "\"order\": 0")
	b.wantText(t, "#status", "MOVED")
	b.shot(t, "row")

	// Retry it: the confirmation says one row; the relay sends it and the
	// page shows it delivered.
	b.run(t, chromedp.Click(chromedp.CSS("#act-retry")), visible("#confirm-count"))
	b.wantText(t, "#confirm-count", "1")
	b.shot(t, "confirm")
	b.run(t, chromedp.Click(chromedp.CSS("#confirm-yes")), visible("#row-id"))
	deadline := time.Now().Add(60 * time.Second)
	for {
		b.run(t, chromedp.Reload(), visible("#row-id"))
		delivered, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`document.getElementById("delivered") !== null`))
		require.NoError(t, err)
		if delivered {
			break
		}
		require.True(t, time.Now().Before(deadline), "the retried row was not shown delivered within 60s")
		time.Sleep(200 * time.Millisecond)
	}
	b.wantText(t, "#outbox-status", "PROCESSED")
	b.shot(t, "retried")

	// The fingerprint of the 100 timeouts: resolved in one act.
	b.run(t, chromedp.Click(chromedp.CSS("#nav-fingerprints")), visible("#groups"))
	require.Contains(t, b.text(t, `tr.group[data-type="invoice-sent"] code.class`), "billing: call N to ? timed out after Nms")
	b.shot(t, "fingerprints")
	b.run(t, chromedp.Click(chromedp.CSS(`tr.group[data-type="invoice-sent"] button.g-resolve`)), visible("#confirm-count"))
	b.wantText(t, "#confirm-count", "100")
	b.run(t, chromedp.Click(chromedp.CSS("#confirm-yes")), visible("#done-count"))
	b.wantText(t, "#done-count", "100")
	require.Equal(t, 100, b.count(t, dlq.Filter{EventType: "invoice-sent", Statuses: []oncebox.DLQStatus{oncebox.DLQStatusResolved}}))

	// Hostile text is text: no dialog, no request it asked for.
	b.run(t, chromedp.Navigate(b.srv.URL+"/dead-letters/"+hostileID.String()), visible("#payload"))
	require.Contains(t, b.text(t, "#error"), "<script>alert(1)</script>")
	require.Contains(t, b.text(t, "#event-type"), "<img src=x onerror=")
	b.run(t, chromedp.Navigate(b.srv.URL+"/dead-letters"), visible("#rows"),
		chromedp.Navigate(b.srv.URL+"/fingerprints"), visible("#groups"), chromedp.Sleep(500*time.Millisecond))
	b.shot(t, "hostile")
	b.mu.Lock()
	require.Empty(t, b.dialogs, "a hostile row opened a dialog")
	require.Contains(t, b.urls, b.srv.URL+"/static/console.js", "the request listener saw the page's own requests")
	for _, u := range b.urls {
		require.False(t, strings.Contains(u, "pwned") || strings.HasSuffix(u, "/x"), "a hostile row made the page request %s", u)
		require.True(t, strings.HasPrefix(u, b.srv.URL), "the page requested another origin: %s", u)
	}
	b.mu.Unlock()
	// The dialog listener works: a dialog the test opens is seen.
	_, err = chromedp.Run(b.ctx, chromedp.Evaluate[any](`alert("probe")`))
	require.NoError(t, err)
	b.mu.Lock()
	require.Equal(t, []string{"probe"}, b.dialogs)
	b.mu.Unlock()

	// A forged POST: the session cookie without the CSRF token, or from
	// another origin, changes nothing.
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	post := func(form url.Values, origin string) int {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.srv.URL+"/apply", strings.NewReader(form.Encode()))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(&http.Cookie{Name: cookies[0].Name, Value: cookies[0].Value})
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	forged := url.Values{"action": {"delete"}, "scope": {"filter"}}
	require.Equal(t, http.StatusForbidden, post(forged, ""))
	forged.Set("csrf", "not-the-token")
	require.Equal(t, http.StatusForbidden, post(forged, ""))
	require.Equal(t, 104, b.count(t, dlq.Filter{})+1, "the forged deletes changed nothing (one row went back to the outbox)")

	// No cookie: a GET goes to the login page, a POST is refused.
	resp, err = client.Get(b.srv.URL + "/dead-letters")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/login", resp.Header.Get("Location"))
	require.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"))
	require.Contains(t, resp.Header.Get("Content-Security-Policy"), "script-src 'self'")
}
