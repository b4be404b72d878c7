package rabbitmq_test

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	amqpwm "github.com/ThreeDotsLabs/watermill-amqp/v3/pkg/amqp"
	"github.com/ThreeDotsLabs/watermill/message"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/internal/tcpproxy"
	"github.com/oncebox/watermill-oncebox/rabbitmq"
)

func TestPublishBatchReachesWatermillSubscriberWithUUIDPayloadAndMetadata(t *testing.T) {
	t.Parallel()
	conn := admin(t)
	queue := uniqueName(t, "oncebox-test-batch")
	pub := newPublisher(t, rabbitmq.PublisherConfig{})
	require.NoError(t, pub.DeclareDurableQueue(queue))
	deleteQueueAtEnd(t, conn, queue)

	const n = 300
	msgs := events(n)
	results, err := pub.PublishBatch(queue, msgs...)
	require.NoError(t, err)
	require.Len(t, results, n)
	for i, r := range results {
		require.NoError(t, r, "message %d", i)
	}

	sub, err := amqpwm.NewSubscriber(rabbitmq.RecommendedSubscriberConfig(brokerURL()), watermill.NopLogger{})
	require.NoError(t, err)
	defer func() { require.NoError(t, sub.Close()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	in, err := sub.Subscribe(ctx, queue)
	require.NoError(t, err)

	want := make(map[string]*message.Message, n)
	for _, m := range msgs {
		want[m.UUID] = m
	}
	for range n {
		var got *message.Message
		select {
		case got = <-in:
		case <-ctx.Done():
			t.Fatalf("only %d of %d messages arrived", n-len(want), n)
		}
		require.True(t, got.Ack())
		w, ok := want[got.UUID]
		require.True(t, ok, "UUID %q restored from the header, sent once", got.UUID)
		delete(want, got.UUID)
		require.Equal(t, string(w.Payload), string(got.Payload))
		delete(got.Metadata, amqpwm.MetadataRedeliveredKey)
		require.Equal(t, w.Metadata, got.Metadata, "every metadata entry travels as a header")
	}
	require.Empty(t, want)
}

func TestNonGoConsumerReadsHeadersAndProperties(t *testing.T) {
	t.Parallel()
	conn := admin(t)
	queue := uniqueName(t, "oncebox-test-headers")
	declareQueue(t, conn, queue)
	pub := newPublisher(t, rabbitmq.PublisherConfig{})

	m := event(3)
	require.NoError(t, pub.Publish(queue, m))

	d := drain(t, conn, queue, 1)[0]
	require.Equal(t, []byte(m.Payload), d.Body)
	require.Equal(t, amqp.Persistent, d.DeliveryMode)
	require.Equal(t, m.UUID, d.MessageId, "message-id is the Watermill UUID")
	require.Equal(t, m.UUID, d.Headers[amqpwm.DefaultMessageUUIDHeaderKey])
	for _, k := range []string{oncebox.HeaderEventID, oncebox.HeaderEventType, oncebox.HeaderKey, "trace_id", "note"} {
		require.Equal(t, m.Metadata.Get(k), d.Headers[k], "header %s", k)
	}
	require.Len(t, d.Headers, len(m.Metadata)+1)
}

func TestUnroutableMessageFailsAloneInItsBatch(t *testing.T) {
	t.Parallel()
	conn := admin(t)
	// A headers exchange routes each message on its own headers, so one
	// batch can mix routable and unroutable messages, returns interleaved
	// with confirms.
	exchange := uniqueName(t, "oncebox-test-headers-x")
	queue := uniqueName(t, "oncebox-test-routed")
	ch, err := conn.Channel()
	require.NoError(t, err)
	require.NoError(t, ch.ExchangeDeclare(exchange, amqp.ExchangeHeaders, false, false, false, false, nil))
	t.Cleanup(func() {
		ch, err := conn.Channel()
		require.NoError(t, err)
		defer ch.Close()
		require.NoError(t, ch.ExchangeDelete(exchange, false, false))
	})
	declareQueue(t, conn, queue)
	require.NoError(t, ch.QueueBind(queue, "", exchange, false, amqp.Table{"x-match": "all", "route": "yes"}))
	require.NoError(t, ch.Close())

	pub := newPublisher(t, rabbitmq.PublisherConfig{Exchange: exchange})
	const n = 500
	msgs := events(n)
	lost := func(i int) bool { return i%7 == 3 || i%11 == 0 || i == n-1 }
	routed := 0
	for i, m := range msgs {
		if lost(i) {
			m.Metadata.Set("route", "no")
		} else {
			m.Metadata.Set("route", "yes")
			routed++
		}
	}
	for round := range 3 { // the same channel serves the next calls: nothing stale leaks
		results, err := pub.PublishBatch("orders", msgs...)
		require.NoError(t, err, "round %d", round)
		for i, r := range results {
			if !lost(i) {
				require.NoError(t, r, "round %d: message %d was routed", round, i)
				continue
			}
			require.ErrorIs(t, r, rabbitmq.ErrUnroutable, "round %d: message %d", round, i)
			var ret *rabbitmq.ReturnedError
			require.ErrorAs(t, r, &ret)
			require.Equal(t, exchange, ret.Exchange)
			require.Equal(t, "orders", ret.RoutingKey)
			require.EqualValues(t, 312, ret.ReplyCode)
			require.Contains(t, r.Error(), "returned")
			require.Contains(t, r.Error(), "unroutable")
			require.Contains(t, r.Error(), "NO_ROUTE")
		}
	}
	for _, d := range drain(t, conn, queue, 3*routed) {
		require.Equal(t, "yes", d.Headers["route"])
	}
}

func TestUnroutableOnTheDefaultExchangeThenRoutable(t *testing.T) {
	t.Parallel()
	conn := admin(t)
	missing := uniqueName(t, "oncebox-test-never-declared")
	queue := uniqueName(t, "oncebox-test-declared")
	declareQueue(t, conn, queue)
	pub := newPublisher(t, rabbitmq.PublisherConfig{Channels: 1})

	results, err := pub.PublishBatch(missing, events(5)...)
	require.NoError(t, err, "an unroutable message is the message's failure, not the call's")
	for _, r := range results {
		require.ErrorIs(t, r, rabbitmq.ErrUnroutable)
		require.Contains(t, r.Error(), missing)
		require.NotErrorIs(t, r, oncebox.ErrBrokerUnavailable)
	}
	err = pub.Publish(missing, event(1))
	require.ErrorIs(t, err, rabbitmq.ErrUnroutable)

	results, err = pub.PublishBatch(queue, events(5)...)
	require.NoError(t, err)
	require.Equal(t, make([]error, 5), results)
	drain(t, conn, queue, 5)
}

func TestMissingExchangeFailsEachMessage(t *testing.T) {
	t.Parallel()
	pub := newPublisher(t, rabbitmq.PublisherConfig{Exchange: uniqueName(t, "oncebox-test-no-such-exchange")})
	results, err := pub.PublishBatch("orders", events(4)...)
	require.NoError(t, err, "the broker was reached and refused: per-message failures")
	for _, r := range results {
		require.ErrorIs(t, r, rabbitmq.ErrChannelClosed)
		require.Contains(t, r.Error(), "404")
		require.NotErrorIs(t, r, oncebox.ErrBrokerUnavailable)
	}
}

func TestBrokerLostIsUnavailableThenReconnects(t *testing.T) {
	t.Parallel()
	conn := admin(t)
	queue := uniqueName(t, "oncebox-test-outage")
	declareQueue(t, conn, queue)
	target := brokerAddr(t)
	proxy := tcpproxy.Start(t, "127.0.0.1:0", target)
	addr := proxy.Addr()
	pub := newPublisher(t, rabbitmq.PublisherConfig{URL: urlVia(t, addr), ConfirmTimeout: 20 * time.Second, DialTimeout: 5 * time.Second})

	before := events(3)
	results, err := pub.PublishBatch(queue, before...)
	require.NoError(t, err)
	require.Equal(t, make([]error, 3), results)

	proxy.Kill() // the broker is gone for this publisher only
	start := time.Now()
	results, err = pub.PublishBatch(queue, events(3)...)
	require.ErrorIs(t, err, oncebox.ErrBrokerUnavailable, "connection lost mid-call")
	require.Nil(t, results)
	require.Less(t, time.Since(start), 10*time.Second, "promptly, not after ConfirmTimeout")

	err = pub.Publish(queue, event(1))
	require.ErrorIs(t, err, oncebox.ErrBrokerUnavailable, "the reconnection fails while it is down")
	require.Contains(t, err.Error(), "dial")
	require.NotContains(t, err.Error(), "guest:guest", "the password is not in the error")

	tcpproxy.Start(t, addr, target) // back, at the same address
	after := events(4)
	results, err = pub.PublishBatch(queue, after...)
	require.NoError(t, err, "the next call reconnects")
	require.Equal(t, make([]error, 4), results)

	got := map[string]bool{}
	deadline := time.Now().Add(20 * time.Second)
	for len(got) < 7 && time.Now().Before(deadline) {
		for _, d := range drain(t, conn, queue, queueDepth(t, conn, queue)) {
			got[d.MessageId] = true
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, m := range append(before, after...) {
		require.True(t, got[m.UUID], "confirmed message %s is in the queue", m.UUID)
	}
}

func TestConfirmTimeoutIsUnavailableAndTheNextCallRecovers(t *testing.T) {
	t.Parallel()
	conn := admin(t)
	queue := uniqueName(t, "oncebox-test-silent")
	declareQueue(t, conn, queue)
	proxy := startFreezeProxy(t, brokerAddr(t))
	pub := newPublisher(t, rabbitmq.PublisherConfig{URL: urlVia(t, proxy.Addr()), ConfirmTimeout: 300 * time.Millisecond, Channels: 1})
	require.NoError(t, pub.Publish(queue, events(3)...), "the channels of the three keys are open")

	proxy.Freeze() // the broker takes the messages but its confirms never arrive
	results, err := pub.PublishBatch(queue, events(3)...)
	require.ErrorIs(t, err, oncebox.ErrBrokerUnavailable)
	require.Contains(t, err.Error(), "no confirm")
	require.Nil(t, results)

	proxy.Thaw()
	results, err = pub.PublishBatch(queue, events(2)...)
	require.NoError(t, err)
	require.Equal(t, make([]error, 2), results)
	// The three of the timed-out call reached the broker too: a resend
	// would duplicate them, which the inbox drops.
	drain(t, conn, queue, 8)
}

func TestCancelledContextEndsTheWait(t *testing.T) {
	t.Parallel()
	conn := admin(t)
	queue := uniqueName(t, "oncebox-test-cancel")
	declareQueue(t, conn, queue)
	proxy := startFreezeProxy(t, brokerAddr(t))
	pub := newPublisher(t, rabbitmq.PublisherConfig{URL: urlVia(t, proxy.Addr()), Channels: 1})

	proxy.Freeze() // the channel is opened in the call: its request is never answered
	ctx, cancel := context.WithCancel(context.Background())
	msgs := events(2)
	for _, m := range msgs {
		m.SetContext(ctx)
	}
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := pub.PublishBatch(queue, msgs...)
	require.ErrorIs(t, err, context.Canceled)
	proxy.Thaw()
	require.NoError(t, pub.Publish(queue, event(1)))
}

func TestInvalidMessagesFailAloneAndNothingPanics(t *testing.T) {
	t.Parallel()
	conn := admin(t)
	queue := uniqueName(t, "oncebox-test-invalid")
	declareQueue(t, conn, queue)
	pub := newPublisher(t, rabbitmq.PublisherConfig{})

	long := event(2)
	long.Metadata.Set(strings.Repeat("k", 256), "v")
	sameUUID := event(3)
	sameUUID.UUID = "" // no UUID: a generated message-id still tells returns apart
	results, err := pub.PublishBatch(queue, event(0), nil, long, sameUUID, event(4))
	require.NoError(t, err)
	require.NoError(t, results[0])
	require.ErrorIs(t, results[1], oncebox.ErrInvalidInput)
	require.ErrorIs(t, results[2], oncebox.ErrInvalidInput)
	require.NoError(t, results[3])
	require.NoError(t, results[4])
	drain(t, conn, queue, 3)

	results, err = pub.PublishBatch(queue)
	require.NoError(t, err)
	require.Empty(t, results)
	require.ErrorIs(t, pub.Publish(strings.Repeat("q", 256), event(0)), oncebox.ErrInvalidInput)
}

func TestConcurrentCallsShareTheChannels(t *testing.T) {
	t.Parallel()
	conn := admin(t)
	queue := uniqueName(t, "oncebox-test-concurrent")
	missing := uniqueName(t, "oncebox-test-concurrent-missing")
	declareQueue(t, conn, queue)
	pub := newPublisher(t, rabbitmq.PublisherConfig{Channels: 3})

	const goroutines, calls, size = 8, 5, 40
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*calls)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range calls {
				topic := queue
				if (g+c)%4 == 0 {
					topic = missing
				}
				results, err := pub.PublishBatch(topic, events(size)...)
				if err != nil {
					errs <- err
					continue
				}
				for _, r := range results {
					if topic == queue && r != nil || topic == missing && !errors.Is(r, rabbitmq.ErrUnroutable) {
						errs <- r
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	routed := 0
	for g := range goroutines {
		for c := range calls {
			if (g+c)%4 != 0 {
				routed += size
			}
		}
	}
	drain(t, conn, queue, routed)
}

func TestClosedPublisher(t *testing.T) {
	t.Parallel()
	admin(t)
	p, err := rabbitmq.NewPublisher(rabbitmq.PublisherConfig{URL: brokerURL()}, watermill.NopLogger{})
	require.NoError(t, err)
	require.NoError(t, p.Close())
	require.NoError(t, p.Close(), "twice is fine")
	_, err = p.PublishBatch("orders", event(0))
	require.ErrorIs(t, err, oncebox.ErrClosed)
	require.ErrorIs(t, err, oncebox.ErrBrokerUnavailable, "a poller still running releases its batch")
	require.ErrorIs(t, p.Publish("orders", event(0)), oncebox.ErrClosed)
	require.ErrorIs(t, p.DeclareDurableQueue("orders"), oncebox.ErrClosed)
}

// NewPublisher validates the configuration and does not dial: with nothing
// listening, it succeeds and the calls fail as unavailable (see
// TestRelayStartsDuringAnOutage for the broker coming back).
func TestNewPublisherValidatesAndDoesNotDial(t *testing.T) {
	t.Parallel()
	_, err := rabbitmq.NewPublisher(rabbitmq.PublisherConfig{}, nil)
	require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
	require.Contains(t, err.Error(), "URL is required")
	_, err = rabbitmq.NewPublisher(rabbitmq.PublisherConfig{URL: "http://x", ConfirmTimeout: -1, Exchange: strings.Repeat("x", 256)}, nil)
	require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
	require.Contains(t, err.Error(), "ConfirmTimeout")
	require.Contains(t, err.Error(), "Exchange")

	// Nothing listens on port 1.
	p, err := rabbitmq.NewPublisher(rabbitmq.PublisherConfig{URL: "amqp://guest:secret@127.0.0.1:1/"}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	require.ErrorIs(t, p.ProbeBroker(context.Background()), oncebox.ErrBrokerUnavailable)
	results, err := p.PublishBatch("orders", event(0))
	require.ErrorIs(t, err, oncebox.ErrBrokerUnavailable)
	require.Nil(t, results)
	require.NotContains(t, err.Error(), "secret")
	require.ErrorIs(t, p.DeclareDurableQueue("orders"), oncebox.ErrBrokerUnavailable)
}

// connectionPIDs lists the broker's connections named name, with rabbitmqctl.
func connectionPIDs(t *testing.T, name string) []string {
	t.Helper()
	out, err := exec.Command("rabbitmqctl", "-q", "list_connections", "pid", "client_properties").CombinedOutput()
	require.NoError(t, err, "this test closes a connection from the broker's side with rabbitmqctl, "+
		"which must run on this machine with the broker's Erlang cookie (as root): %s", out)
	var pids []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, `"`+name+`"`) {
			pids = append(pids, strings.Fields(line)[0])
		}
	}
	return pids
}

// What a RabbitMQ restart does to a client: the broker closes the
// connection (320 CONNECTION_FORCED). A call that meets it is unavailable;
// the next one connects again.
func TestConnectionClosedByTheBrokerIsReplaced(t *testing.T) {
	t.Parallel()
	conn := admin(t)
	queue := uniqueName(t, "oncebox-test-forced")
	declareQueue(t, conn, queue)
	name := uniqueName(t, "oncebox-test-forced-conn")
	pub := newPublisher(t, rabbitmq.PublisherConfig{ConnectionName: name})
	require.NoError(t, pub.Publish(queue, event(0)))

	pids := connectionPIDs(t, name)
	require.Len(t, pids, 1, "the connection carries its name")
	out, err := exec.Command("rabbitmqctl", "close_connection", pids[0], "oncebox test: forced close").CombinedOutput()
	require.NoError(t, err, "%s", out)

	_, err = pub.PublishBatch(queue, events(3)...)
	t.Logf("the call right after the close: %v", err)
	if err != nil { // the close reached the client during the call
		require.ErrorIs(t, err, oncebox.ErrBrokerUnavailable)
	}
	results, err := pub.PublishBatch(queue, events(3)...)
	require.NoError(t, err)
	require.Equal(t, make([]error, 3), results)
	now := connectionPIDs(t, name)
	require.Len(t, now, 1)
	require.NotEqual(t, pids[0], now[0], "a new connection")
}

func TestNackedMessageFailsAlone(t *testing.T) {
	t.Parallel()
	conn := admin(t)
	queue := uniqueName(t, "oncebox-test-full")
	ch, err := conn.Channel()
	require.NoError(t, err)
	_, err = ch.QueueDeclare(queue, true, false, false, false, amqp.Table{"x-max-length": int32(2), "x-overflow": "reject-publish"})
	require.NoError(t, err)
	require.NoError(t, ch.Close())
	deleteQueueAtEnd(t, conn, queue)
	pub := newPublisher(t, rabbitmq.PublisherConfig{})

	// Five keys: the batch is spread over channels, so which two fit is a
	// race; each of the others fails alone.
	results, err := pub.PublishBatch(queue, events(5)...)
	require.NoError(t, err)
	acked := 0
	for _, r := range results {
		if r == nil {
			acked++
			continue
		}
		require.ErrorIs(t, r, rabbitmq.ErrNacked, "the queue is full: the broker rejects the publish")
		require.NotErrorIs(t, r, rabbitmq.ErrUnroutable)
	}
	require.Equal(t, 2, acked)
	drain(t, conn, queue, 2)
	results, err = pub.PublishBatch(queue, events(1)...)
	require.NoError(t, err)
	require.NoError(t, results[0], "room again")
}

// The connection dies while the call waits for its confirms: the pending
// confirms are released by the closing, which is not a nack.
func TestConnectionLostWhileWaitingForConfirms(t *testing.T) {
	t.Parallel()
	conn := admin(t)
	queue := uniqueName(t, "oncebox-test-lost-waiting")
	declareQueue(t, conn, queue)
	proxy := startFreezeProxy(t, brokerAddr(t))
	pub := newPublisher(t, rabbitmq.PublisherConfig{URL: urlVia(t, proxy.Addr()), ConfirmTimeout: 20 * time.Second, Channels: 1})
	require.NoError(t, pub.Publish(queue, event(0)), "the channel is open")

	proxy.Freeze()
	time.AfterFunc(200*time.Millisecond, proxy.close)
	start := time.Now()
	results, err := pub.PublishBatch(queue, events(5)...)
	require.ErrorIs(t, err, oncebox.ErrBrokerUnavailable)
	t.Logf("%v", err)
	require.NotErrorIs(t, err, rabbitmq.ErrNacked)
	require.Nil(t, results)
	require.Less(t, time.Since(start), 10*time.Second, "at the loss, not at ConfirmTimeout")
}

// The outbox publisher refuses oncebox.HeaderMessageUUID as metadata; it
// must be the header the RabbitMQ relay writes the UUID under by default.
func TestDefaultUUIDHeaderIsTheReservedOne(t *testing.T) {
	t.Parallel()
	require.Equal(t, oncebox.HeaderMessageUUID, amqpwm.DefaultMessageUUIDHeaderKey)
}
