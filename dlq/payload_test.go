package dlq_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dlq"
	"github.com/oncebox/watermill-oncebox/internal/dbtest"
)

// TestListingCapsPayloads parks a 2 MiB payload and a small one: a listing
// (Store and REST) carries at most dlq.ListPayloadBytes of each payload,
// with its full size and whether it was cut; GET of the row gives it whole.
func TestListingCapsPayloads(t *testing.T) {
	t.Parallel()
	onBoth(t, func(t *testing.T, a *api, env *dbtest.Env) {
		big := bytes.Repeat([]byte("0123456789abcdef"), 2<<20/16)
		bigID, err := oncebox.NewEventID()
		require.NoError(t, err)
		require.NoError(t, env.Dialect.PoisonUpsert(context.Background(), env.Beginner, dialects.DLQRow{ID: bigID, HandlerName: "billing", EventType: "big",
			Topic: "orders", MessageUUID: "m-big", Payload: big, Metadata: "{}", Error: "bad", FailedAt: t0}))
		smallID := parkConsumer(t, env, "small")

		rows, _, err := a.store.List(context.Background(), dlq.Filter{}, dlq.Page{})
		require.NoError(t, err)
		require.Len(t, rows, 2)
		byID := map[oncebox.EventID]dlq.Row{rows[0].ID: rows[0], rows[1].ID: rows[1]}
		require.Equal(t, big[:dlq.ListPayloadBytes], byID[bigID].Payload)
		require.True(t, byID[bigID].PayloadTruncated)
		require.Equal(t, len(big), byID[bigID].PayloadSize)
		require.Equal(t, []byte(`{"n":1}`), byID[smallID].Payload)
		require.False(t, byID[smallID].PayloadTruncated)
		require.Equal(t, 7, byID[smallID].PayloadSize)

		var lb listBody
		resp, body := a.do(t, http.MethodGet, "/dlq/events?event_type=big", "")
		okJSON(t, resp, body, &lb)
		require.Len(t, lb.Items, 1)
		got, err := base64.StdEncoding.DecodeString(lb.Items[0]["payload"].(string))
		require.NoError(t, err)
		require.Equal(t, big[:dlq.ListPayloadBytes], got)
		require.Equal(t, true, lb.Items[0]["payload_truncated"])
		require.Equal(t, float64(len(big)), lb.Items[0]["payload_size"])
		require.Less(t, len(body), 2*dlq.ListPayloadBytes, "the page does not carry the whole payload")

		var one map[string]any
		resp, body = a.do(t, http.MethodGet, "/dlq/events/"+bigID.String(), "")
		okJSON(t, resp, body, &one)
		got, err = base64.StdEncoding.DecodeString(one["payload"].(string))
		require.NoError(t, err)
		require.Equal(t, big, got)
		require.Equal(t, false, one["payload_truncated"])
		require.Equal(t, float64(len(big)), one["payload_size"])
	})
}
