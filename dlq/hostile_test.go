package dlq_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dlq"
	"github.com/oncebox/watermill-oncebox/internal/dbtest"
)

// onBoth runs fn on PostgreSQL and on MariaDB (the two servers always
// running; Oracle's DLQ statements are covered by the conformance suite).
func onBoth(t *testing.T, fn func(t *testing.T, a *api, env *dbtest.Env)) {
	for _, tg := range dbtest.Targets() {
		if tg.Name != "postgres" && tg.Name != "mysql" {
			continue
		}
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			env := tg.New(t)
			st, err := dlq.NewStore(env.Beginner, dlq.Config{Dialect: env.Dialect})
			require.NoError(t, err)
			auth, err := dlq.BearerToken(testToken)
			require.NoError(t, err)
			// A 500 is logged; the test fails on it with the cause.
			h, err := dlq.NewHandler(dlq.HandlerConfig{Store: st, Authorize: auth, Logger: watermill.NewCaptureLogger()})
			require.NoError(t, err)
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			fn(t, &api{fixture: &fixture{store: st}, srv: srv}, env)
		})
	}
}

// parkConsumer writes one consumer DLQ row of eventType and returns its id.
func parkConsumer(t *testing.T, env *dbtest.Env, eventType string) oncebox.EventID {
	t.Helper()
	rowID, err := oncebox.NewEventID()
	require.NoError(t, err)
	require.NoError(t, env.Dialect.PoisonUpsert(context.Background(), env.Beginner, dialects.DLQRow{ID: rowID, HandlerName: "billing", EventType: eventType,
		Topic: "orders", MessageUUID: "m-" + rowID.String(), Payload: []byte(`{"n":1}`), Metadata: "{}", Error: "bad", FailedAt: t0}))
	return rowID
}

// TestHandlerRefusesHostileTextFilters sends text filters with a NUL or
// invalid UTF-8, which the databases refuse (PostgreSQL) or mangle: each is
// a 400 naming the parameter, on both servers, never a 500.
func TestHandlerRefusesHostileTextFilters(t *testing.T) {
	t.Parallel()
	onBoth(t, func(t *testing.T, a *api, env *dbtest.Env) {
		parkConsumer(t, env, "order-created")
		for _, v := range []string{"a%00b", "%00", "%FF", "order-created%C3", "%ED%A0%80", "%C0%AF"} {
			for _, path := range []string{"/dlq/events", "/dlq/events/count"} {
				resp, body := a.do(t, http.MethodGet, path+"?event_type="+v, "")
				badParam(t, resp, body, "event_type")
			}
		}
		for name, v := range map[string]string{"source": "%00", "moved_from": "%00", "moved_to": "%FF", "limit": "1%00",
			"cursor": "%00", "status": "MOVED%00"} {
			resp, body := a.do(t, http.MethodGet, "/dlq/events?"+name+"="+v, "")
			badParam(t, resp, body, name)
		}
		for _, method := range []string{http.MethodPatch, http.MethodDelete} {
			resp, body := a.do(t, method, "/dlq/events", `{"status":"RESOLVED","filter":{"event_type":"a\u0000b"}}`)
			if method == http.MethodDelete {
				resp, body = a.do(t, method, "/dlq/events", `{"filter":{"event_type":"a\u0000b"}}`)
			}
			badParam(t, resp, body, "filter.event_type")
		}
		// The Store refuses them too (the CLI goes through it).
		_, _, err := a.store.List(context.Background(), dlq.Filter{EventType: "a\x00b"}, dlq.Page{})
		require.ErrorIs(t, err, oncebox.ErrInvalidInput)
		require.ErrorContains(t, err, "Filter.EventType")
		_, err = a.store.Count(context.Background(), dlq.Filter{EventType: "\xff"})
		require.ErrorIs(t, err, oncebox.ErrInvalidInput)
	})
}

// TestStatusFilterIsDeduplicated sends 70,000 statuses, more than MySQL's
// 65,535 placeholders: they are de-duplicated to the four real ones before
// any SQL, so the listing, the count and a bulk change work; an unknown one
// among them is a 400 naming it.
func TestStatusFilterIsDeduplicated(t *testing.T) {
	t.Parallel()
	onBoth(t, func(t *testing.T, a *api, env *dbtest.Env) {
		id := parkConsumer(t, env, "order-created")
		const n = 70000
		all := []string{"MOVED", "TO_RETRY", "IN_PROCESS", "RESOLVED"}
		q := make([]string, 0, n)
		js := make([]string, 0, n)
		for i := range n {
			q = append(q, "status=MOVED") // the shortest, to fit the server's 1 MB of headers
			js = append(js, `"`+all[i%len(all)]+`"`)
		}
		var lb listBody
		resp, body := a.do(t, http.MethodGet, "/dlq/events?"+strings.Join(q, "&"), "")
		okJSON(t, resp, body, &lb)
		require.Len(t, lb.Items, 1)
		require.Equal(t, id.String(), lb.Items[0]["id"])
		var cnt struct{ Count int }
		resp, body = a.do(t, http.MethodGet, "/dlq/events/count?"+strings.Join(q, "&"), "")
		okJSON(t, resp, body, &cnt)
		require.Equal(t, 1, cnt.Count)
		var upd struct{ Updated int }
		resp, body = a.do(t, http.MethodPatch, "/dlq/events", `{"status":"RESOLVED","filter":{"status":[`+strings.Join(js, ",")+`]}}`)
		okJSON(t, resp, body, &upd)
		require.Equal(t, 1, upd.Updated)

		rows, _, err := a.store.List(context.Background(), dlq.Filter{Statuses: repeat(oncebox.DLQStatusResolved, n)}, dlq.Page{})
		require.NoError(t, err)
		require.Len(t, rows, 1)

		resp, body = a.do(t, http.MethodGet, "/dlq/events?"+strings.Join(q[:1000], "&")+"&status=LOST", "")
		p := badParam(t, resp, body, "status")
		require.Contains(t, p.Detail, `"LOST"`)
		resp, body = a.do(t, http.MethodPatch, "/dlq/events", `{"status":"RESOLVED","filter":{"status":["MOVED","LOST"]}}`)
		p = badParam(t, resp, body, "filter.status")
		require.Contains(t, p.Detail, `"LOST"`)

		// The ids of a bulk body stay capped at 1,000.
		ids := make([]string, dlq.MaxIDs+1)
		for i := range ids {
			ids[i] = fmt.Sprintf("%q", id.String())
		}
		resp, body = a.do(t, http.MethodDelete, "/dlq/events", `{"ids":[`+strings.Join(ids, ",")+`]}`)
		badParam(t, resp, body, "ids")
		var del struct{ Deleted int }
		resp, body = a.do(t, http.MethodDelete, "/dlq/events", `{"ids":[`+strings.Join(ids[:dlq.MaxIDs], ",")+`]}`)
		okJSON(t, resp, body, &del)
		require.Equal(t, 1, del.Deleted)
	})
}

func repeat[T any](v T, n int) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = v
	}
	return out
}
