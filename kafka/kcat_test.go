package kafka_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/kafka"
)

// kcatRecord is a record as `kcat -J` prints it (kcat 1.7).
type kcatRecord struct {
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	Offset    int64    `json:"offset"`
	Headers   []string `json:"headers"` // name, value, name, value, …
	Key       *string  `json:"key"`
	Payload   *string  `json:"payload"`
}

// TestKcatReadsKeyAndHeaders reads what the Publisher wrote with kcat
// (librdkafka, the C client under most non-Go consumers): the key and the
// oncebox headers must be what such a consumer sees. It needs kcat on PATH:
// under CI (CI set: make tools installs it) it fails without it; on a
// developer's machine it is skipped with a loud message, and make test's
// last lines say KCAT NOT RUN.
func TestKcatReadsKeyAndHeaders(t *testing.T) {
	t.Parallel()
	kcat, err := exec.LookPath("kcat")
	if err != nil && os.Getenv("CI") == "" {
		t.Skip("KCAT NOT RUN: kcat is not on PATH, so what a librdkafka consumer reads was not checked; " +
			"install it (apt-get install kcat, brew install kcat) to run this test; CI fails it instead")
	}
	require.NoError(t, err, "kcat is not on PATH (CI is set, so it must run): install it with `apt-get update && apt-get install -y kcat` (Debian/Ubuntu)")

	_, addrs := newCluster(t, kfake.SeedTopics(2, "orders"))
	require.True(t, strings.HasPrefix(addrs[0], "127.0.0.1:"), "kfake listens on %s", addrs[0])
	pub := newPublisher(t, addrs, nil)

	msgs := []*message.Message{
		event(t, "order-created", "order-1", []byte(`{"id":1}`)),
		event(t, "order-created", "order-2", []byte(`{"id":2}`)),
		event(t, "order-created", "", []byte(`{"id":3}`)), // no key
		event(t, "order-paid", "order-1", []byte(`{"id":1,"paid":true}`)),
	}
	require.NoError(t, pub.Publish("orders", msgs...))

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, "-C", "-b", addrs[0], "-t", "orders", "-o", "beginning", "-e", "-J", "-q")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "kcat: %s", stderr.String())

	byUUID := map[string]*message.Message{}
	for _, m := range msgs {
		byUUID[m.UUID] = m
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	lines := 0
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		lines++
		var r kcatRecord
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r), "kcat line %q", sc.Text())
		require.Equal(t, "orders", r.Topic)
		require.Zero(t, len(r.Headers)%2, "headers come in name/value pairs: %q", r.Headers)
		h := map[string]string{}
		for i := 0; i < len(r.Headers); i += 2 {
			h[r.Headers[i]] = r.Headers[i+1]
		}
		msg, ok := byUUID[h[kafka.UUIDHeader]]
		require.True(t, ok, "record with headers %v", h)
		delete(byUUID, msg.UUID)

		require.NotNil(t, r.Payload)
		require.Equal(t, string(msg.Payload), *r.Payload)
		require.Equal(t, msg.Metadata.Get(oncebox.HeaderEventID), h[oncebox.HeaderEventID])
		require.Equal(t, msg.Metadata.Get(oncebox.HeaderEventType), h[oncebox.HeaderEventType])
		require.Equal(t, msg.Metadata.Get("trace_id"), h["trace_id"], "user metadata is a header too")
		if key := oncebox.Key(msg); key != "" {
			require.NotNil(t, r.Key, "record %d/%d has no key", r.Partition, r.Offset)
			require.Equal(t, key, *r.Key)
			require.Equal(t, key, h[oncebox.HeaderKey])
		} else {
			require.Nil(t, r.Key, "a message without oncebox_key has a null key")
			require.NotContains(t, h, oncebox.HeaderKey)
		}
	}
	require.NoError(t, sc.Err())
	require.Equal(t, len(msgs), lines)
	require.Empty(t, byUUID)
}
