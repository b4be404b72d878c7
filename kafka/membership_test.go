package kafka_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/oncebox/watermill-oncebox/kafka"
)

// killableDialer dials for one Sarama client and can cut it off: Kill closes
// every connection and refuses new ones, so the client can neither heartbeat
// nor leave its group. To the group coordinator that is a crashed process.
type killableDialer struct {
	mu     sync.Mutex
	conns  []net.Conn
	killed bool
}

func (k *killableDialer) Dial(network, addr string) (net.Conn, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.killed {
		return nil, errors.New("killed")
	}
	c, err := net.DialTimeout(network, addr, time.Second)
	if err == nil {
		k.conns = append(k.conns, c)
	}
	return c, err
}

func (k *killableDialer) Kill() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.killed = true
	for _, c := range k.conns {
		_ = c.Close()
	}
}

// member is one consumer of a group, reporting each assignment it gets.
type member struct {
	dialer   *killableDialer
	assigned chan int // partitions assigned, at each session's Setup
	cancel   context.CancelFunc
	done     chan struct{}
	group    sarama.ConsumerGroup
}

func (m *member) Setup(s sarama.ConsumerGroupSession) error {
	n := 0
	for _, ps := range s.Claims() {
		n += len(ps)
	}
	select {
	case m.assigned <- n:
	default:
	}
	return nil
}

func (m *member) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (m *member) ConsumeClaim(s sarama.ConsumerGroupSession, _ sarama.ConsumerGroupClaim) error {
	<-s.Context().Done()
	return nil
}

// startMember joins group with RecommendedSubscriberConfig's Sarama
// configuration, a static member when instanceID is set.
func startMember(t *testing.T, addrs []string, group, topic, instanceID string) *member {
	t.Helper()
	var opts []kafka.SubscriberOption
	if instanceID != "" {
		opts = append(opts, kafka.StaticMember(instanceID))
	}
	sc := kafka.RecommendedSubscriberConfig(addrs, group, opts...).OverwriteSaramaConfig
	m := &member{dialer: &killableDialer{}, assigned: make(chan int, 16), done: make(chan struct{})}
	sc.Net.Proxy.Enable = true
	sc.Net.Proxy.Dialer = m.dialer
	cg, err := sarama.NewConsumerGroup(addrs, group, sc)
	require.NoError(t, err)
	m.group = cg
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, []string{topic}, m); err != nil && ctx.Err() == nil {
				time.Sleep(50 * time.Millisecond) // killed: retry as watermill-kafka does
			}
		}
	}()
	t.Cleanup(m.stop)
	return m
}

func (m *member) stop() {
	m.cancel()
	_ = m.group.Close()
	<-m.done
}

// waitAssigned waits until m holds n partitions and returns when.
func (m *member) waitAssigned(t *testing.T, n int) time.Time {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case got := <-m.assigned:
			if got == n {
				return time.Now()
			}
		case <-deadline:
			t.Fatalf("no assignment of %d partitions within 60s", n)
		}
	}
}

// TestKilledConsumerPartitionsMoveOn kills a consumer (its connections cut:
// no heartbeat, no LeaveGroup) and starts its replacement, with dynamic and
// with static membership, and checks that the replacement gets every
// partition. It logs the gap between the kill and the replacement's
// assignment (go test -v -run TestKilledConsumerPartitionsMoveOn ./kafka);
// it asserts nothing about it.
func TestKilledConsumerPartitionsMoveOn(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name               string
		first, replacement string // instance ids; "" is a dynamic member
	}{
		{"dynamic member replaced", "", ""},
		{"static member replaced under its instance id", "orders-consumer-0", "orders-consumer-0"},
		{"static member, replacement under another id", "orders-consumer-0", "orders-consumer-1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, addrs := newCluster(t, kfake.SeedTopics(3, "orders"))
			first := startMember(t, addrs, "shipping", "orders", tc.first)
			first.waitAssigned(t, 3)

			first.dialer.Kill()
			killed := time.Now()
			replacement := startMember(t, addrs, "shipping", "orders", tc.replacement)
			at := replacement.waitAssigned(t, 3)
			t.Logf("%s: partitions reassigned %s after the kill", tc.name, at.Sub(killed).Round(10*time.Millisecond))
		})
	}
}
