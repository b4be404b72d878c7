package rabbitmq

import (
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
)

// The channel of a key is FNV-1a (32 bits) of the key modulo the channel
// count, the same in every process and release: per-key ordering across
// instances (issue 15) relies on it. The values were computed apart from
// Go's hash/fnv.
func TestKeyChannelIsAStableHashOfTheKey(t *testing.T) {
	for _, c := range []struct {
		key  string
		n    int
		want int
	}{
		{"customer-1", 4, 3}, {"customer-1", 8, 7}, {"customer-1", 3, 1},
		{"order-42", 4, 0}, {"order-42", 8, 4}, {"order-42", 3, 2},
		{"a", 1, 0},
	} {
		require.Equal(t, c.want, keyChannel(c.key, c.n), "%q over %d", c.key, c.n)
	}
}

func TestLanesKeepBatchOrderPerKeyAndUnkeyedOnTheFirst(t *testing.T) {
	msgs := make([]*message.Message, 8)
	for i := range msgs {
		msgs[i] = message.NewMessage("", nil)
	}
	oncebox.SetKey(msgs[1], "customer-1") // channel 3 of 4
	oncebox.SetKey(msgs[2], "order-42")   // channel 0 of 4
	oncebox.SetKey(msgs[5], "customer-1")
	oncebox.SetKey(msgs[6], "order-42")
	pending := []int{0, 1, 2, 3, 5, 6, 7} // 4 could not be sent

	p := &Publisher{cfg: PublisherConfig{ChannelsPerCall: 4}}
	require.Equal(t, [][]int{{0, 2, 3, 6, 7}, nil, nil, {1, 5}}, p.lanes(msgs, pending))

	p.cfg.SpreadUnkeyed = true
	require.Equal(t, [][]int{{0, 2, 6}, {3}, {7}, {1, 5}}, p.lanes(msgs, pending))

	p.cfg.ChannelsPerCall = 1
	require.Equal(t, [][]int{pending}, p.lanes(msgs, pending))
}
