package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dlq"
)

// TestDLQRowJSONIsTheRESTShape reads the same rows through the REST handler
// and through the CLI's --json: the documents are equal, listing and row.
func TestDLQRowJSONIsTheRESTShape(t *testing.T) {
	c := newCLI(t)
	c.insert(seed{n: 1}, seed{n: 2, source: oncebox.DLQSourceConsumer, eventType: "invoice-sent"}, seed{n: 3})
	// A payload that is not UTF-8 must come out the same way too.
	_, err := c.schema.Pool.Exec(t.Context(), "UPDATE "+c.schema.Dialect.Tables().DLQ+
		` SET payload = '\xff00fe'::bytea WHERE id = $1`, id(2).String())
	require.NoError(t, err)

	st, err := dlq.NewStore(c.schema.Beginner, dlq.Config{Dialect: c.schema.Dialect, Clock: clockwork.NewFakeClockAt(now)})
	require.NoError(t, err)
	h, err := dlq.NewHandler(dlq.HandlerConfig{Store: st, AllowUnauthenticatedDangerously: true})
	require.NoError(t, err)
	rest := func(path string) any {
		t.Helper()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		require.Equal(t, http.StatusOK, w.Code, w.Body.String())
		var v any
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &v))
		return v
	}
	cliJSON := func(args ...string) any {
		t.Helper()
		r := c.run("", append([]string{"--json", "dlq"}, args...)...)
		require.Equal(t, 0, r.code, r.stderr)
		var v any
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &v))
		return v
	}

	require.Equal(t, rest("/dlq/events?limit=2"), cliJSON("list", "--limit", "2"))
	require.Equal(t, rest("/dlq/events"), cliJSON("list"))
	require.Equal(t, rest("/dlq/events/"+id(2).String()), cliJSON("show", id(2).String()))
}
