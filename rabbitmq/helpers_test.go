package rabbitmq_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/rabbitmq"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// brokerURL is the RabbitMQ the tests use: $ONCEBOX_TEST_AMQP_URL or the
// machine's.
func brokerURL() string {
	if u := os.Getenv("ONCEBOX_TEST_AMQP_URL"); u != "" {
		return u
	}
	return "amqp://guest:guest@127.0.0.1:5672/"
}

// brokerAddr is host:port of brokerURL.
func brokerAddr(t testing.TB) string {
	u, err := url.Parse(brokerURL())
	require.NoError(t, err)
	if u.Port() == "" {
		return u.Hostname() + ":5672"
	}
	return u.Host
}

// urlVia is brokerURL with its host replaced by addr (a proxy).
func urlVia(t testing.TB, addr string) string {
	u, err := url.Parse(brokerURL())
	require.NoError(t, err)
	u.Host = addr
	return u.String()
}

// admin opens a connection for the test's own declarations and checks,
// failing loudly when the broker is not there.
func admin(t testing.TB) *amqp.Connection {
	t.Helper()
	conn, err := amqp.Dial(brokerURL())
	require.NoError(t, err, "the rabbitmq tests need RabbitMQ at %s: start it with `rabbitmq-server -detached` "+
		"(as root; `rabbitmqctl await_startup` waits until it is up), or set ONCEBOX_TEST_AMQP_URL", brokerURL())
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// uniqueName is a fresh queue or exchange name for one test.
func uniqueName(t testing.TB, prefix string) string {
	b := make([]byte, 6)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return prefix + "-" + hex.EncodeToString(b)
}

// deleteQueueAtEnd deletes queue when the test ends.
func deleteQueueAtEnd(t testing.TB, conn *amqp.Connection, queue string) {
	t.Cleanup(func() {
		ch, err := conn.Channel()
		if err != nil {
			t.Errorf("delete queue %s: %v", queue, err)
			return
		}
		defer ch.Close()
		if _, err := ch.QueueDelete(queue, false, false, false); err != nil {
			t.Errorf("delete queue %s: %v", queue, err)
		}
	})
}

// declareQueue declares a durable queue, deleted at the end of the test.
func declareQueue(t testing.TB, conn *amqp.Connection, queue string) {
	t.Helper()
	ch, err := conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	_, err = ch.QueueDeclare(queue, true, false, false, false, nil)
	require.NoError(t, err)
	deleteQueueAtEnd(t, conn, queue)
}

// queueDepth is the number of ready messages in queue.
func queueDepth(t testing.TB, conn *amqp.Connection, queue string) int {
	t.Helper()
	ch, err := conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	require.NoError(t, err)
	return q.Messages
}

// drain takes every message of queue (acknowledging them) until want have
// arrived or 20 seconds pass.
func drain(t testing.TB, conn *amqp.Connection, queue string, want int) []amqp.Delivery {
	t.Helper()
	got := drainUntil(t, conn, queue, func(got []amqp.Delivery) bool { return len(got) >= want })
	require.Len(t, got, want, "messages in %s", queue)
	return got
}

// drainDistinct takes the messages of queue until want distinct message
// ids have arrived or 20 seconds pass, and returns the first delivery of
// each id, in arrival order: what a consumer behind the inbox sees when a
// resend duplicated some.
func drainDistinct(t testing.TB, conn *amqp.Connection, queue string, want int) []amqp.Delivery {
	t.Helper()
	seen := map[string]bool{}
	var first []amqp.Delivery
	drainUntil(t, conn, queue, func(got []amqp.Delivery) bool {
		if len(got) > 0 && !seen[got[len(got)-1].MessageId] {
			seen[got[len(got)-1].MessageId] = true
			first = append(first, got[len(got)-1])
		}
		return len(first) >= want
	})
	require.Len(t, first, want, "distinct messages in %s", queue)
	return first
}

// drainUntil takes the messages of queue (acknowledging them) until done
// says so or 20 seconds pass. done sees the messages taken so far, also
// when the queue had none to give.
func drainUntil(t testing.TB, conn *amqp.Connection, queue string, done func(got []amqp.Delivery) bool) []amqp.Delivery {
	t.Helper()
	ch, err := conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	var got []amqp.Delivery
	deadline := time.Now().Add(20 * time.Second)
	for !done(got) && time.Now().Before(deadline) {
		d, ok, err := ch.Get(queue, true)
		require.NoError(t, err)
		if !ok {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		got = append(got, d)
	}
	return got
}

// requireOrderPerKey checks that the deliveries got are the messages sent,
// each once, and that each ordering key's messages arrived in the order of
// sent: the order a publisher spreading a batch over channels keeps.
// Messages without a key count as one key.
func requireOrderPerKey(t testing.TB, sent []*message.Message, got []amqp.Delivery) {
	t.Helper()
	want := map[string][]string{}
	for _, m := range sent {
		want[oncebox.Key(m)] = append(want[oncebox.Key(m)], m.UUID)
	}
	have := map[string][]string{}
	for _, d := range got {
		key, _ := d.Headers[oncebox.HeaderKey].(string)
		have[key] = append(have[key], d.MessageId)
	}
	require.Equal(t, len(want), len(have), "keys")
	for key, ids := range want {
		require.Equal(t, ids, have[key], "the messages of key %q, in order", key)
	}
}

// newPublisher builds a publisher closed at the end of the test.
func newPublisher(t testing.TB, cfg rabbitmq.PublisherConfig) *rabbitmq.Publisher {
	t.Helper()
	if cfg.URL == "" {
		cfg.URL = brokerURL()
	}
	if cfg.ConnectionName == "" {
		cfg.ConnectionName = uniqueName(t, "oncebox-test")
	}
	p, err := rabbitmq.NewPublisher(cfg, nil)
	require.NoError(t, err, "the rabbitmq tests need RabbitMQ at %s: start it with `rabbitmq-server -detached` (as root)", cfg.URL)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	return p
}

// event is a message as the relay sends it: the oncebox headers and some
// user metadata.
func event(i int) *message.Message {
	id, _ := oncebox.NewEventID()
	m := message.NewMessage(watermill.NewUUID(), fmt.Appendf(nil, `{"order":%d}`, i))
	m.Metadata.Set(oncebox.HeaderEventID, id.String())
	m.Metadata.Set(oncebox.HeaderEventType, "order-created")
	m.Metadata.Set(oncebox.HeaderKey, fmt.Sprintf("customer-%d", i%7))
	m.Metadata.Set("trace_id", fmt.Sprintf("trace-%d", i))
	m.Metadata.Set("note", strings.Repeat("é", i%5))
	return m
}

func events(n int) []*message.Message {
	msgs := make([]*message.Message, n)
	for i := range msgs {
		msgs[i] = event(i)
	}
	return msgs
}

// freezeProxy forwards TCP to a target and can hold back everything the
// server sends (confirms included) while letting the client's writes
// through: a broker that went silent.
type freezeProxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	cond   *sync.Cond
	frozen bool
	closed bool
	conns  []net.Conn
	wg     sync.WaitGroup
}

func startFreezeProxy(t testing.TB, target string) *freezeProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &freezeProxy{ln: ln, target: target}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *freezeProxy) Addr() string { return p.ln.Addr().String() }

func (p *freezeProxy) serve() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.DialTimeout("tcp", p.target, time.Second)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = client.Close()
			_ = server.Close()
			return
		}
		p.conns = append(p.conns, client, server)
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pipe(server, client, false)
		go p.pipe(client, server, true)
	}
}

func (p *freezeProxy) pipe(dst, src net.Conn, gated bool) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if gated {
				p.mu.Lock()
				for p.frozen && !p.closed {
					p.cond.Wait()
				}
				p.mu.Unlock()
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	_ = dst.Close()
	_ = src.Close()
}

// Freeze holds back what the server sends until Thaw.
func (p *freezeProxy) Freeze() { p.set(true) }

// Thaw lets the server's data through again.
func (p *freezeProxy) Thaw() { p.set(false) }

func (p *freezeProxy) set(frozen bool) {
	p.mu.Lock()
	p.frozen = frozen
	p.cond.Broadcast()
	p.mu.Unlock()
}

func (p *freezeProxy) close() {
	p.mu.Lock()
	p.closed = true
	_ = p.ln.Close()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.cond.Broadcast()
	p.mu.Unlock()
	p.wg.Wait()
}
