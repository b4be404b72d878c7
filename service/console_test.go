package service_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/console"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dlq"
	"github.com/oncebox/watermill-oncebox/internal/dbtest"
	"github.com/oncebox/watermill-oncebox/service"
)

// TestConsoleHandlerSharesTheDLQStore: a row resolved in the console is
// resolved for the REST API, both mounted from one service; the console
// refuses a store of its own.
func TestConsoleHandlerSharesTheDLQStore(t *testing.T) {
	b := setup(t, dbtest.TargetNamed(t, "postgres"))
	svc := b.newService(t, config(t, consumerYAML, b.schema), service.WithRelay(b.broker))
	_, err := svc.ConsoleHandler(console.Config{Store: svc.DLQStore()})
	require.ErrorIs(t, err, oncebox.ErrInvalidConfig)

	auth, err := dlq.BearerToken("tok")
	require.NoError(t, err)
	ui, err := svc.ConsoleHandler(console.Config{Authorize: auth, BasePath: "/console"})
	require.NoError(t, err)
	api, err := svc.DLQHandler(dlq.HandlerConfig{Authorize: auth})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/console/", ui)
	mux.Handle("/dlq/", api)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	id, err := oncebox.NewEventID()
	require.NoError(t, err)
	require.NoError(t, svc.Dialect().PoisonUpsert(context.Background(), b.Beginner, dialects.DLQRow{ID: id, HandlerName: "h",
		EventType: "order-created", Topic: "t", MessageUUID: "m", Payload: []byte("{}"), Metadata: "{}", Error: "boom", FailedAt: t0}))

	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.PostForm(srv.URL+"/console/login", url.Values{"token": {"tok"}})
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, "/console/", resp.Header.Get("Location"))
	cookie := resp.Cookies()[0]
	require.Equal(t, "/console/", cookie.Path)

	req, err := http.NewRequest(http.MethodGet, srv.URL+"/console/dead-letters/"+id.String(), nil)
	require.NoError(t, err)
	req.AddCookie(cookie)
	resp, err = client.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(string(body))
	require.NotNil(t, csrf)

	form := url.Values{"csrf": {csrf[1]}, "action": {"resolve"}, "scope": {"one"}, "id": {id.String()}}
	req, err = http.NewRequest(http.MethodPost, srv.URL+"/console/apply", strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(cookie)
	resp, err = client.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)

	req, err = http.NewRequest(http.MethodGet, srv.URL+"/dlq/events/"+id.String(), nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, err = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.NoError(t, err)
	require.Contains(t, string(body), `"status":"RESOLVED"`)
}
