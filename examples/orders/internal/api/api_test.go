package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/examples/orders/internal/events"
	"github.com/oncebox/watermill-oncebox/examples/orders/internal/pgdb"
)

// newTestServer starts the API (no relay) on a schema of its own, dropped
// when the test ends.
func newTestServer(t *testing.T, cfg oncebox.Config) (*httptest.Server, *pgxpool.Pool, string) {
	t.Helper()
	dsn := os.Getenv("ONCEBOX_TEST_POSTGRES_DSN")
	if dsn == "" {
		dsn = "postgres://root@127.0.0.1:5432/test?sslmode=disable"
	}
	ctx := context.Background()
	pool, err := pgdb.Connect(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	schema := "orders_api_t" + hex.EncodeToString(b)
	t.Cleanup(func() { require.NoError(t, pgdb.DropSchema(context.Background(), pool, schema)) })
	srv, err := New(ctx, Config{Pool: pool, Schema: schema, Oncebox: cfg})
	require.NoError(t, err)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return hs, pool, schema
}

func testConfig(t *testing.T) oncebox.Config {
	t.Helper()
	cfg, err := oncebox.LoadConfigFile("../../oncebox.yaml")
	require.NoError(t, err)
	return cfg
}

func post(t *testing.T, url, contentType, body string) (int, http.Header, map[string]any) {
	t.Helper()
	resp, err := http.Post(url+"/orders", contentType, strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m), "body %s", raw)
	return resp.StatusCode, resp.Header, m
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

func TestCreateOrderWritesTheOrderAndItsEventInOneTransaction(t *testing.T) {
	hs, pool, schema := newTestServer(t, testConfig(t))

	status, hdr, body := post(t, hs.URL, "application/json",
		`{"customer_id": "c-1", "items": [{"sku": "SKU-001", "qty": 2}, {"sku": "SKU-002", "qty": 1}]}`)
	require.Equal(t, http.StatusCreated, status, "%v", body)
	id, _ := body["id"].(string)
	require.NotEmpty(t, id)
	require.Equal(t, "/orders/"+id, hdr.Get("Location"))
	require.Equal(t, "created", body["status"])

	// The event is in the outbox, keyed by the order, bound for the topic
	// of oncebox.yaml.
	var eventType, topic, key string
	var payload []byte
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT event_type, topic, partition_key, payload FROM `+schema+`.outbox_events`).Scan(&eventType, &topic, &key, &payload))
	require.Equal(t, events.OrderCreatedType, eventType)
	require.Equal(t, "orders", topic)
	require.Equal(t, id, key)
	var e events.OrderCreated
	require.NoError(t, json.Unmarshal(payload, &e))
	require.NoError(t, e.Validate())
	require.Equal(t, id, e.OrderID)
	require.Equal(t, []events.Item{{SKU: "SKU-001", Qty: 2}, {SKU: "SKU-002", Qty: 1}}, e.Items)

	resp, err := http.Get(hs.URL + "/orders/" + id)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var o Order
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&o))
	require.Equal(t, "c-1", o.CustomerID)
	require.Equal(t, StatusCreated, o.Status)
	require.Equal(t, e.Items, o.Items)
}

func TestAFailedPublishRollsTheOrderBack(t *testing.T) {
	cfg := testConfig(t)
	cfg.Outbox.MaxPayloadSize = 10 // every event is too large: the publish fails after the order's INSERT
	hs, pool, schema := newTestServer(t, cfg)

	status, _, body := post(t, hs.URL, "application/json", `{"customer_id": "c-1", "items": [{"sku": "SKU-001", "qty": 2}]}`)
	require.Equal(t, http.StatusInternalServerError, status, "%v", body)
	require.Zero(t, count(t, pool, `SELECT count(*) FROM `+schema+`.orders`), "the order was written without its event")
	require.Zero(t, count(t, pool, `SELECT count(*) FROM `+schema+`.outbox_events`))
}

func TestBadRequestsNameTheFieldAndWriteNothing(t *testing.T) {
	hs, pool, schema := newTestServer(t, testConfig(t))
	cases := []struct {
		name, contentType, body string
		status                  int
		fields                  []string
	}{
		{"no customer", "application/json", `{"items": [{"sku": "A", "qty": 1}]}`, 400, []string{"customer_id"}},
		{"empty customer", "application/json", `{"customer_id": " ", "items": [{"sku": "A", "qty": 1}]}`, 400, []string{"customer_id"}},
		{"no items", "application/json", `{"customer_id": "c"}`, 400, []string{"items"}},
		{"empty items", "application/json", `{"customer_id": "c", "items": []}`, 400, []string{"items"}},
		{"bad item", "application/json", `{"customer_id": "c", "items": [{"sku": "A", "qty": 1}, {"sku": "bad sku", "qty": 0}]}`, 400,
			[]string{"items[1].sku", "items[1].qty"}},
		{"missing qty", "application/json", `{"customer_id": "c", "items": [{"sku": "A"}]}`, 400, []string{"items[0].qty"}},
		{"qty not an integer, and more", "application/json", `{"customer_id": "", "items": [{"sku": "A", "qty": 1.5}]}`, 400,
			[]string{"items.qty", "customer_id"}},
		{"unknown field", "application/json", `{"customer_id": "c", "itmes": []}`, 400, []string{"itmes", "items"}},
		{"array", "application/json", `[]`, 400, []string{"body"}},
		{"malformed", "application/json", `{"customer_id": `, 400, []string{"body"}},
		{"empty body", "", ``, 400, []string{"body"}},
		{"two objects", "application/json", `{"customer_id": "c", "items": [{"sku": "A", "qty": 1}]} {}`, 400, []string{"body"}},
		{"form", "application/x-www-form-urlencoded", `customer_id=c`, 415, nil},
		{"too large", "application/json", `{"customer_id": "` + strings.Repeat("x", MaxBodyBytes) + `"}`, 413, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, _, body := post(t, hs.URL, c.contentType, c.body)
			require.Equal(t, c.status, status, "%v", body)
			require.Equal(t, float64(c.status), body["status"])
			require.NotEmpty(t, body["title"])
			var fields []string
			errs, _ := body["errors"].([]any)
			for _, e := range errs {
				fields = append(fields, e.(map[string]any)["field"].(string))
			}
			require.Equal(t, c.fields, fields, "%v", body)
		})
	}
	require.Zero(t, count(t, pool, `SELECT count(*) FROM `+schema+`.orders`))
	require.Zero(t, count(t, pool, `SELECT count(*) FROM `+schema+`.outbox_events`))
}

func TestGetUnknownOrderAndHealth(t *testing.T) {
	hs, _, _ := newTestServer(t, testConfig(t))
	for _, path := range []string{"/orders/01a22ab6-8c99-729e-96dc-f7ecdb66d4c2", "/orders/not-an-id"} {
		resp, err := http.Get(hs.URL + path)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusNotFound, resp.StatusCode, path)
		require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
	}
	resp, err := http.Get(hs.URL + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// GET /metrics serves the outbox backlog: an order just created is a PENDING
// event (no relay runs in this test).
func TestMetricsShowTheOutboxBacklog(t *testing.T) {
	hs, _, _ := newTestServer(t, testConfig(t))
	code, _, _ := post(t, hs.URL, "application/json", `{"customer_id":"c-1","items":[{"sku":"sku-1","qty":2}]}`)
	require.Equal(t, http.StatusCreated, code)
	resp, err := http.Get(hs.URL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Contains(t, string(body), `oncebox_outbox_events{event_type="order-created",status="PENDING"} 1`)
	require.Contains(t, string(body), `oncebox_outbox_oldest_pending_age_seconds{event_type="order-created"}`)
}
