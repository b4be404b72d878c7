package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	amqpwm "github.com/ThreeDotsLabs/watermill-amqp/v3/pkg/amqp"
	"github.com/ThreeDotsLabs/watermill/message"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/poller"
)

var _ poller.BatchPublisher = (*Publisher)(nil)

// maxShortString is the longest AMQP short string: exchange names, routing
// keys, header names and the message-id property. amqp091-go would silently
// truncate a longer one, so the publisher refuses it instead.
const maxShortString = 255

// maxChannels is the most channels the publisher opens on its connection:
// channel_max, RabbitMQ's and amqp091-go's default.
const maxChannels = 2047

// returnBuffer is the capacity of each channel's basic.return queue. The
// connection's reader blocks when it is full until the call in flight drains
// it, which it does while it publishes and while it waits.
const returnBuffer = 256

// PublisherConfig configures a Publisher.
type PublisherConfig struct {
	// URL of the broker, amqp://user:password@host:5672/vhost or amqps://….
	// Required.
	URL string
	// Exchange every message is published to; the topic is the routing key.
	// Default "": the default exchange, which delivers a message to the queue
	// named by its routing key, the layout of watermill-amqp's
	// NewDurableQueueConfig. The publisher declares nothing: the exchange,
	// the queues and their bindings are the application's (see
	// DeclareDurableQueue). A message no queue is bound for is returned by
	// the broker and reported as that message's failure (ErrUnroutable).
	Exchange string
	// ConnectionName is the client-provided connection name the broker
	// shows (rabbitmqctl list_connections name client_properties, the
	// management UI). Default "oncebox-publisher".
	ConnectionName string
	// AMQP is the amqp091-go configuration used to dial: TLS, SASL, vhost,
	// heartbeat, client properties. Optional. The publisher adds the
	// connection name to Properties and wraps Dial (default: a TCP dial
	// bounded by DialTimeout) so that every write is bounded by
	// ConfirmTimeout. Heartbeat defaults to 10s, as amqp091.Dial's.
	AMQP amqp.Config
	// Channels is how many calls run at once; a further call waits until
	// one ends. The poller calls from one goroutine per event type. Each
	// call holds a slot of up to ChannelsPerCall AMQP channels of its own on
	// the publisher's one connection, and never waits for more: each channel
	// serves one call at a time, which is what lets a basic.return be
	// matched to its message. Default 4.
	Channels int
	// ChannelsPerCall is how many confirm channels one call spreads its
	// batch over, published and confirmed in parallel. The messages of one
	// ordering key (oncebox.Key) always go to the same channel of the call,
	// chosen by a stable hash of the key (FNV-1a, 32 bits, modulo
	// ChannelsPerCall), in their batch order, so a queue receives each key's
	// messages in order. Messages without a key go to the call's first
	// channel, in batch order, unless SpreadUnkeyed. Channels are opened
	// when a call first needs them; the connection holds at most Channels ×
	// ChannelsPerCall, which must not exceed 2047 (channel_max). Default 4;
	// 1 sends every batch on one channel.
	ChannelsPerCall int
	// SpreadUnkeyed lets the messages without an ordering key spread over
	// the call's channels too (round-robin), for speed: their order is then
	// lost, as Kafka loses it for unkeyed messages over partitions. Default
	// false: one instance delivers a type's unkeyed messages to a queue in
	// claim order, as a single channel does.
	SpreadUnkeyed bool
	// ConfirmTimeout bounds one call: each network write, and the wait from
	// the first publish until the last confirm. When it passes, the call's
	// error wraps oncebox.ErrBrokerUnavailable and the channels that were
	// still waiting are replaced.
	// Default 30s.
	ConfirmTimeout time.Duration
	// DialTimeout bounds the TCP connect and the AMQP handshake of a
	// (re)connection, and the wait for the broker's answer when closing.
	// Default 10s.
	DialTimeout time.Duration
	// MessageUUIDHeader names the header carrying the Watermill message
	// UUID. Default "_watermill_message_uuid"
	// (amqpwm.DefaultMessageUUIDHeaderKey), where watermill-amqp's
	// DefaultMarshaler reads it; keep both sides equal.
	MessageUUIDHeader string
}

// Validate checks c as NewPublisher does, zero fields taking their
// defaults; the error names every field at fault (the URL with its password
// redacted) and wraps oncebox.ErrInvalidConfig.
func (c PublisherConfig) Validate() error {
	_, err := c.withDefaults()
	return err
}

func (c PublisherConfig) withDefaults() (PublisherConfig, error) {
	if c.ConnectionName == "" {
		c.ConnectionName = "oncebox-publisher"
	}
	if c.Channels == 0 {
		c.Channels = 4
	}
	if c.ChannelsPerCall == 0 {
		c.ChannelsPerCall = 4
	}
	if c.ConfirmTimeout == 0 {
		c.ConfirmTimeout = 30 * time.Second
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = 10 * time.Second
	}
	if c.MessageUUIDHeader == "" {
		c.MessageUUIDHeader = amqpwm.DefaultMessageUUIDHeaderKey
	}
	var errs []error
	if c.URL == "" {
		errs = append(errs, errors.New("URL is required"))
	} else if err := checkURL(c.URL); err != nil {
		// Never wrap the parser's error: it quotes the URL.
		errs = append(errs, fmt.Errorf("URL %s %v", redact(c.URL), err))
	}
	if len(c.Exchange) > maxShortString {
		errs = append(errs, fmt.Errorf("Exchange is longer than %d bytes", maxShortString))
	}
	if len(c.MessageUUIDHeader) > maxShortString {
		errs = append(errs, fmt.Errorf("MessageUUIDHeader is longer than %d bytes", maxShortString))
	}
	if c.Channels < 0 {
		errs = append(errs, fmt.Errorf("Channels must be > 0, got %d", c.Channels))
	}
	if c.ChannelsPerCall < 0 {
		errs = append(errs, fmt.Errorf("ChannelsPerCall must be > 0, got %d", c.ChannelsPerCall))
	}
	if c.Channels > 0 && c.ChannelsPerCall > 0 && c.Channels > maxChannels/c.ChannelsPerCall {
		errs = append(errs, fmt.Errorf("Channels × ChannelsPerCall must be at most %d (channel_max), got %d × %d",
			maxChannels, c.Channels, c.ChannelsPerCall))
	}
	if c.ConfirmTimeout < 0 {
		errs = append(errs, fmt.Errorf("ConfirmTimeout must be > 0, got %s", c.ConfirmTimeout))
	}
	if c.DialTimeout < 0 {
		errs = append(errs, fmt.Errorf("DialTimeout must be > 0, got %s", c.DialTimeout))
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("%w: rabbitmq: %w", oncebox.ErrInvalidConfig, err)
	}
	return c, nil
}

// Publisher publishes Watermill messages to RabbitMQ with publisher confirms
// and the mandatory flag, and reports the fate of each message. It
// implements message.Publisher and poller.BatchPublisher, and is safe for
// concurrent use.
//
// It holds one connection, dialled by the first call that needs it (a
// publish, ProbeBroker, DeclareDurableQueue) and again by the first call
// after it was lost, and up to PublisherConfig.Channels slots of
// ChannelsPerCall channels in confirm mode, opened when first needed.
// NewPublisher does not dial, so that a relay starts while the broker is
// down.
type Publisher struct {
	cfg    PublisherConfig
	logger watermill.LoggerAdapter
	slots  chan *slot

	mu     sync.Mutex // guards closed and calls.Add
	closed bool
	calls  sync.WaitGroup // calls in flight

	connMu sync.Mutex // guards conn; held while dialling
	conn   *connection

	bg  sync.WaitGroup // watchers of blocked connections, closers of discarded channels
	seq atomic.Uint64  // fallback message ids
}

// connection is one AMQP connection and whether the broker blocked it.
type connection struct {
	c       *amqp.Connection
	netConn atomic.Pointer[writeDeadlineConn] // the socket under c, to kill it
	blocked atomic.Pointer[string]            // the broker's reason while it is blocked
	dead    atomic.Bool                       // killed: the next call dials, even before c notices
}

// kill closes the socket under the connection, which ends every call
// waiting on it (amqp091-go's requests cannot be cancelled otherwise), and
// marks it dead so that the next call dials a new one.
func (cn *connection) kill() {
	cn.dead.Store(true)
	if nc := cn.netConn.Load(); nc != nil {
		_ = nc.Close()
	}
}

// usable reports whether calls may still use the connection.
func (cn *connection) usable() bool {
	return cn != nil && !cn.dead.Load() && !cn.c.IsClosed()
}

// slot is what one call holds: ChannelsPerCall channels, each opened when
// a call first needs it. One call uses a slot at a time.
type slot struct {
	chans []*channel
}

// channel is one AMQP channel in confirm mode.
type channel struct {
	ch      *amqp.Channel
	conn    *connection
	returns chan amqp.Return
	closes  chan *amqp.Error
}

// NewPublisher validates cfg and returns a Publisher; it fails only on an
// invalid configuration (oncebox.ErrInvalidConfig). It does not contact the
// broker: the first call dials, and fails with an error wrapping
// oncebox.ErrBrokerUnavailable while the broker cannot be reached, so a
// relay started during an outage waits for the broker instead of failing.
// Call ProbeBroker to check the connection at start. A nil logger logs
// nothing.
func NewPublisher(cfg PublisherConfig, logger watermill.LoggerAdapter) (*Publisher, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	p := &Publisher{cfg: cfg, logger: logger, slots: make(chan *slot, cfg.Channels)}
	for range cfg.Channels {
		s := &slot{chans: make([]*channel, cfg.ChannelsPerCall)}
		for j := range s.chans {
			s.chans[j] = &channel{}
		}
		p.slots <- s
	}
	return p, nil
}

// Publish publishes msgs to topic (the routing key) and returns nil only
// when the broker confirmed every one of them as routed. Otherwise the error
// joins the failure of each failed message, or is the failure of the whole
// call (the broker could not be reached: oncebox.ErrBrokerUnavailable).
func (p *Publisher) Publish(topic string, msgs ...*message.Message) error {
	results, err := p.PublishBatch(topic, msgs...)
	if err != nil {
		return err
	}
	var errs []error
	for i, e := range results {
		if e != nil {
			id := ""
			if msgs[i] != nil {
				id = msgs[i].UUID
			}
			errs = append(errs, fmt.Errorf("message %d (%s): %w", i, id, e))
		}
	}
	return errors.Join(errs...)
}

// PublishBatch publishes msgs to topic (the routing key) with the mandatory
// flag and persistent delivery, then waits for the broker's confirm of
// each. The batch is spread over up to PublisherConfig.ChannelsPerCall
// confirm channels published in parallel: the messages of one ordering key
// (oncebox.Key) on one channel in batch order, the unkeyed ones on the first
// channel in batch order (over all of them with SpreadUnkeyed). It returns
// one result per message, in order:
// nil when the broker confirmed the message and did not return it; an error
// wrapping ErrUnroutable when it was returned (no queue bound), ErrNacked
// when it was nacked, ErrChannelClosed when the broker refused it with a
// channel exception, oncebox.ErrInvalidInput when it cannot be sent (a nil
// message, a header name or topic longer than 255 bytes).
//
// A non-nil second result is the fate of the whole call and the per-message
// results are nil: it wraps oncebox.ErrBrokerUnavailable when the broker
// cannot be reached (dial failure, connection or channel lost, blocked
// connection, no confirm within ConfirmTimeout, publisher closed), or the
// context's error when the context of the first message ended first (the
// poller gives every message of a batch the same context). Messages of such
// a call may have reached the broker: sending them again makes duplicates,
// which the inbox drops.
func (p *Publisher) PublishBatch(topic string, msgs ...*message.Message) (results []error, err error) {
	if !p.enter() {
		return nil, errClosed
	}
	defer p.calls.Done()
	results = make([]error, len(msgs))
	if len(msgs) == 0 {
		return results, nil
	}
	ctx := context.Background()
	for _, m := range msgs {
		if m != nil {
			ctx = m.Context()
			break
		}
	}
	var s *slot
	select {
	case s = <-p.slots:
	case <-ctx.Done():
		return nil, fmt.Errorf("rabbitmq: waiting for a free channel: %w", ctx.Err())
	}
	defer func() {
		if r := recover(); r != nil {
			for _, c := range s.chans {
				p.discard(c)
			}
			results, err = nil, fmt.Errorf("rabbitmq: publish panicked: %v", r)
		}
		p.slots <- s
	}()
	return p.publish(ctx, s, topic, msgs, results)
}

// Close closes the connection and its channels (waiting at most
// DialTimeout for the broker's answer), then waits for the calls in flight,
// which fail as unavailable. Later calls return an error wrapping
// oncebox.ErrClosed (and oncebox.ErrBrokerUnavailable). It returns nil: a
// connection already lost is not an error. Safe to call more than once.
func (p *Publisher) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()

	p.connMu.Lock()
	cn := p.conn
	p.conn = nil
	p.connMu.Unlock()
	if cn != nil {
		// The connection counts as closed whatever the outcome; a failed
		// goodbye (the connection was already lost) is only logged.
		if err := cn.c.CloseDeadline(time.Now().Add(p.cfg.DialTimeout)); err != nil && !errors.Is(err, amqp.ErrClosed) {
			p.logger.Debug("rabbitmq: closing the connection", watermill.LogFields{"error": err.Error()})
		}
	}
	p.calls.Wait()
	p.bg.Wait()
	return nil
}

// DeclareDurableQueue declares a durable, non-exclusive, non-auto-delete
// queue without arguments: the queue watermill-amqp's NewDurableQueueConfig
// and RecommendedSubscriberConfig declare, so that a subscriber started
// later agrees with it. With the default exchange, publishing to topic
// name then reaches it. Declaring an existing queue with the same
// properties does nothing.
func (p *Publisher) DeclareDurableQueue(name string) error {
	if !p.enter() {
		return errClosed
	}
	defer p.calls.Done()
	cn, err := p.connection()
	if err != nil {
		return err
	}
	ch, err := cn.c.Channel()
	if err != nil {
		return unavailable(fmt.Errorf("open channel: %w", err))
	}
	defer func() { _ = ch.Close() }()
	if _, err := ch.QueueDeclare(name, true, false, false, false, nil); err != nil {
		return fmt.Errorf("rabbitmq: declare queue %q: %w", name, err)
	}
	return nil
}

// enter registers a call, unless the publisher is closed.
func (p *Publisher) enter() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.calls.Add(1)
	return true
}

func (p *Publisher) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// connection returns the open connection, dialling a new one when there is
// none or it was lost.
func (p *Publisher) connection() (*connection, error) {
	p.connMu.Lock()
	defer p.connMu.Unlock()
	if p.isClosed() {
		return nil, errClosed
	}
	if p.conn.usable() {
		return p.conn, nil
	}
	cn, err := p.dial()
	if err != nil {
		var e *amqp.Error
		if errors.As(err, &e) && (e.Code == amqp.AccessRefused || e.Code == amqp.NotAllowed) {
			// Still "unavailable" for the relay: a password rotated while
			// it runs is waited out without counting attempts. CheckBroker,
			// at start, tells it apart.
			return nil, unavailable(&refusedError{url: redact(p.cfg.URL), err: e})
		}
		return nil, unavailable(fmt.Errorf("dial URL %s: %w", redact(p.cfg.URL), err))
	}
	p.conn = cn
	return cn, nil
}

func (p *Publisher) dial() (*connection, error) {
	cfg := p.cfg.AMQP
	props := amqp.NewConnectionProperties()
	for k, v := range cfg.Properties {
		props[k] = v
	}
	props.SetClientConnectionName(p.cfg.ConnectionName)
	cfg.Properties = props
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = 10 * time.Second
	}
	if cfg.Locale == "" {
		cfg.Locale = "en_US"
	}
	base := cfg.Dial
	if base == nil {
		base = amqp.DefaultDial(p.cfg.DialTimeout)
	}
	timeout := p.cfg.ConfirmTimeout
	cn := &connection{}
	cfg.Dial = func(network, addr string) (net.Conn, error) {
		c, err := base(network, addr)
		if err != nil {
			return nil, err
		}
		wc := &writeDeadlineConn{Conn: c, timeout: timeout}
		cn.netConn.Store(wc)
		return wc, nil
	}
	c, err := amqp.DialConfig(p.cfg.URL, cfg)
	if err != nil {
		return nil, err
	}
	cn.c = c
	blocks := c.NotifyBlocked(make(chan amqp.Blocking, 1))
	p.bg.Add(1)
	go func() {
		defer p.bg.Done()
		for b := range blocks { // closed when the connection shuts down
			if b.Active {
				reason := b.Reason
				cn.blocked.Store(&reason)
				p.logger.Info("rabbitmq: the broker blocked the connection", watermill.LogFields{"reason": reason})
			} else {
				cn.blocked.Store(nil)
				p.logger.Info("rabbitmq: the broker unblocked the connection", nil)
			}
		}
	}()
	p.logger.Info("rabbitmq: connected", watermill.LogFields{"url": redact(p.cfg.URL), "connection_name": p.cfg.ConnectionName})
	return cn, nil
}

// ensureChannel gives s an open channel in confirm mode on the current
// connection, replacing a lost one. Opening a channel takes two requests to
// the broker; when they are not answered before ctx ends the connection is
// killed (the requests cannot be cancelled otherwise) and the next call
// dials again.
func (p *Publisher) ensureChannel(ctx context.Context, s *channel) (*connection, error) {
	cn, err := p.connection()
	if err != nil {
		return nil, err
	}
	if s.ch != nil && !s.ch.IsClosed() && s.conn == cn {
		return cn, nil
	}
	// A connection that cannot give a channel in confirm mode is killed, so
	// that the next call starts from a fresh one.
	p.discard(s)
	type opened struct {
		ch      *amqp.Channel
		returns chan amqp.Return
		closes  chan *amqp.Error
		err     error
	}
	done := make(chan opened, 1)
	p.bg.Add(1)
	go func() {
		defer p.bg.Done()
		ch, err := cn.c.Channel()
		if err != nil {
			done <- opened{err: fmt.Errorf("open channel: %w", err)}
			return
		}
		o := opened{ch: ch,
			returns: ch.NotifyReturn(make(chan amqp.Return, returnBuffer)),
			closes:  ch.NotifyClose(make(chan *amqp.Error, 1))}
		if err := ch.Confirm(false); err != nil {
			_ = ch.Close()
			o.err = fmt.Errorf("put channel in confirm mode: %w", err)
		}
		done <- o
	}()
	select {
	case o := <-done:
		if o.err != nil {
			cn.kill()
			return nil, unavailable(o.err)
		}
		s.ch, s.conn, s.returns, s.closes = o.ch, cn, o.returns, o.closes
		return cn, nil
	case <-ctx.Done():
		cn.kill()
		return nil, unavailable(fmt.Errorf("opening a channel: no answer from the broker: %w", ctx.Err()))
	}
}

// discard drops s's channel: it is closed in the background while its
// returns are drained, so that the connection's reader never blocks on
// them. Both goroutines end when the channel has shut down, at the latest
// when the connection does.
func (p *Publisher) discard(s *channel) {
	if s.ch == nil {
		return
	}
	ch, returns := s.ch, s.returns
	s.ch, s.conn, s.returns, s.closes = nil, nil, nil, nil
	p.bg.Add(2)
	go func() {
		defer p.bg.Done()
		for range returns {
		}
	}()
	go func() {
		defer p.bg.Done()
		_ = ch.Close()
	}()
}

// publish sends the call's messages and settles their results: each lane
// (the messages given to one channel of the slot, see lanes) on its own
// channel, the lanes in parallel. The call's error, when a lane has one, is
// that of the first such lane; the other lanes still ran to their end
// (bounded by the same ConfirmTimeout) rather than being cut, since cutting
// a channel being opened kills the connection every call shares.
func (p *Publisher) publish(ctx context.Context, s *slot, topic string, msgs []*message.Message, results []error) ([]error, error) {
	pubs := make([]amqp.Publishing, len(msgs))
	ids := make(map[string]int, len(msgs))
	pending := make([]int, 0, len(msgs))
	for i, m := range msgs {
		pub, err := p.marshal(topic, m)
		if err != nil {
			results[i] = err
			continue
		}
		pub.MessageId = p.messageID(m.UUID, ids)
		ids[pub.MessageId] = i
		pubs[i] = pub
		pending = append(pending, i)
	}
	if len(pending) == 0 {
		return results, nil
	}
	cctx, cancel := context.WithTimeout(ctx, p.cfg.ConfirmTimeout)
	defer cancel()
	lanes := p.lanes(msgs, pending)
	errs := make([]error, len(lanes))
	var wg sync.WaitGroup
	for j, idx := range lanes {
		if len(idx) == 0 {
			continue
		}
		// Each waiter writes only the results of its own lane's messages.
		w := waiter{p: p, ctx: cctx, parent: ctx, s: s.chans[j], topic: topic, pubs: pubs, ids: ids, results: results}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[j] = w.sendLane(idx)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return results, nil
}

// lanes assigns the pending messages to the slot's channels, each lane in
// batch order: a keyed message to the channel of its key (keyChannel), so
// that a key's messages reach the queue in order; an unkeyed one to the
// first channel, or round-robin over all of them with SpreadUnkeyed.
func (p *Publisher) lanes(msgs []*message.Message, pending []int) [][]int {
	n := p.cfg.ChannelsPerCall
	lanes := make([][]int, n)
	unkeyed := 0
	for _, i := range pending {
		j := 0
		if key := oncebox.Key(msgs[i]); key != "" {
			j = keyChannel(key, n)
		} else if p.cfg.SpreadUnkeyed {
			j = unkeyed % n
			unkeyed++
		}
		lanes[j] = append(lanes[j], i)
	}
	return lanes
}

// keyChannel is the channel of a call's n that carries the messages of
// key: FNV-1a (32 bits) of the key modulo n. It depends on nothing but the
// key and n, so a key keeps its channel from call to call and from process
// to process while ChannelsPerCall is unchanged.
func keyChannel(key string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}

// sendLane sends the messages idx on the waiter's channel and settles
// them. A panic becomes the lane's error, and its channel is dropped.
func (w *waiter) sendLane(idx []int) (err error) {
	defer func() {
		if r := recover(); r != nil {
			w.p.discard(w.s)
			err = fmt.Errorf("rabbitmq: publish panicked: %v", r)
		}
	}()
	unconfirmed, refused, err := w.attempt(idx)
	if err != nil || refused == nil {
		return err
	}
	// The broker closed the channel over one of the unconfirmed messages
	// and dropped those published after it. Send them again one at a time
	// to find which: only that one fails; the others (a few of which may
	// now be duplicates) succeed.
	w.p.logger.Error("rabbitmq: the broker closed the channel; resending the unconfirmed messages one by one", refused,
		watermill.LogFields{"topic": w.topic, "unconfirmed": len(unconfirmed)})
	if len(unconfirmed) == 1 {
		w.results[unconfirmed[0]] = channelClosedError(refused)
		return nil
	}
	for _, i := range unconfirmed {
		_, refused, err := w.attempt([]int{i})
		if err != nil {
			return err
		}
		if refused != nil {
			w.results[i] = channelClosedError(refused)
		}
	}
	return nil
}

func channelClosedError(e *amqp.Error) error {
	return fmt.Errorf("%w: %d %s", ErrChannelClosed, e.Code, e.Reason)
}

// marshal builds the AMQP message: every metadata entry as a string header,
// the UUID in the header watermill-amqp's DefaultMarshaler reads, the
// payload as the body, persistent delivery.
func (p *Publisher) marshal(topic string, m *message.Message) (amqp.Publishing, error) {
	if m == nil {
		return amqp.Publishing{}, fmt.Errorf("%w: rabbitmq: nil message", oncebox.ErrInvalidInput)
	}
	if len(topic) > maxShortString {
		return amqp.Publishing{}, fmt.Errorf("%w: rabbitmq: topic (routing key) longer than %d bytes", oncebox.ErrInvalidInput, maxShortString)
	}
	headers := make(amqp.Table, len(m.Metadata)+1)
	for k, v := range m.Metadata {
		if len(k) > maxShortString {
			return amqp.Publishing{}, fmt.Errorf("%w: rabbitmq: metadata key %.40q… longer than %d bytes cannot be an AMQP header", oncebox.ErrInvalidInput, k, maxShortString)
		}
		headers[k] = v
	}
	headers[p.cfg.MessageUUIDHeader] = m.UUID
	return amqp.Publishing{Headers: headers, Body: m.Payload, DeliveryMode: amqp.Persistent}, nil
}

// messageID is the message-id property, which the broker echoes in a
// basic.return and which therefore names the returned message: the
// Watermill UUID, unless it is empty, too long or already used in the call,
// in which case a publisher-unique "oncebox-<n>".
func (p *Publisher) messageID(uuid string, taken map[string]int) string {
	if _, dup := taken[uuid]; uuid != "" && len(uuid) <= maxShortString && !dup {
		return uuid
	}
	for {
		id := "oncebox-" + strconv.FormatUint(p.seq.Add(1), 10)
		if _, dup := taken[id]; !dup {
			return id
		}
	}
}

// waiter publishes messages of one call on one channel of its slot and
// settles them.
type waiter struct {
	p       *Publisher
	ctx     context.Context // bounded by ConfirmTimeout
	parent  context.Context // the caller's
	s       *channel
	topic   string
	pubs    []amqp.Publishing
	ids     map[string]int // message-id -> index
	results []error
}

// attempt publishes the messages idx and waits for their confirms. It sets
// the result of each message it settled. When the broker closed the channel
// with a channel exception, it returns that exception and the messages left
// unconfirmed (published after the culprit, or whose confirm the closing
// swallowed). Any other loss of the channel, the timeout or the end of the
// caller's context is the call's error.
func (w *waiter) attempt(idx []int) (unconfirmed []int, refused *amqp.Error, err error) {
	p, s := w.p, w.s
	cn, err := p.ensureChannel(w.ctx, s)
	if err != nil {
		if perr := w.parent.Err(); perr != nil {
			return nil, nil, fmt.Errorf("rabbitmq: %w (%w)", perr, err)
		}
		return nil, nil, err
	}
	if reason := cn.blocked.Load(); reason != nil {
		return nil, nil, unavailable(fmt.Errorf("the broker blocked the connection: %s", *reason))
	}
	returns := s.returns
	returned := make(map[int]amqp.Return)
	record := func(r amqp.Return) {
		if i, ok := w.ids[r.MessageId]; ok {
			returned[i] = r
		}
	}
	// drain takes every return already queued. Called after a confirm, it
	// takes the return of that message, if any: the broker sends
	// basic.return before the basic.ack of the same message, and the
	// connection's reader queues the return before it releases the confirm.
	drain := func() {
		for returns != nil {
			select {
			case r, ok := <-returns:
				if !ok {
					returns = nil
					return
				}
				record(r)
			default:
				return
			}
		}
	}

	dcs := make([]*amqp.DeferredConfirmation, 0, len(idx))
	var sendErr error
	for _, i := range idx {
		drain()
		dc, err := s.ch.PublishWithDeferredConfirmWithContext(w.ctx, p.cfg.Exchange, w.topic, true, false, w.pubs[i])
		if err != nil {
			// The headers were checked by marshal: this is the channel or
			// the connection failing.
			sendErr = err
			break
		}
		dcs = append(dcs, dc)
	}

	for k, dc := range dcs {
		i := idx[k]
	wait:
		for {
			select {
			case r, ok := <-returns:
				if !ok {
					returns = nil
					continue
				}
				record(r)
			case <-dc.Done():
				break wait
			case <-w.ctx.Done():
				p.discard(s)
				if err := w.parent.Err(); err != nil {
					return nil, nil, fmt.Errorf("rabbitmq: waiting for confirms: %w", err)
				}
				return nil, nil, unavailable(fmt.Errorf("no confirm from the broker within %s (exchange %s, routing key %q)",
					p.cfg.ConfirmTimeout, exchangeName(p.cfg.Exchange), w.topic))
			}
		}
		drain()
		if r, ok := returned[i]; ok {
			w.results[i] = &ReturnedError{Exchange: r.Exchange, RoutingKey: r.RoutingKey, ReplyCode: r.ReplyCode, ReplyText: r.ReplyText}
			continue
		}
		switch {
		case dc.Acked():
			w.results[i] = nil
		case s.ch.IsClosed():
			// Not a nack: the closing released the wait.
			unconfirmed = append(unconfirmed, i)
		default:
			w.results[i] = fmt.Errorf("%w (exchange %s, routing key %q)", ErrNacked, exchangeName(p.cfg.Exchange), w.topic)
		}
	}
	unconfirmed = append(unconfirmed, idx[len(dcs):]...)
	if len(unconfirmed) == 0 {
		if s.ch.IsClosed() {
			p.discard(s)
		}
		return nil, nil, nil
	}

	var reason *amqp.Error
	if s.ch.IsClosed() {
		select {
		case reason = <-s.closes:
		default:
		}
	}
	p.discard(s)
	if isSoftChannelError(reason) {
		return unconfirmed, reason, nil
	}
	switch {
	case reason != nil:
		return nil, nil, unavailable(fmt.Errorf("channel closed: %w", reason))
	case sendErr != nil:
		return nil, nil, unavailable(fmt.Errorf("publish: %w", sendErr))
	default:
		return nil, nil, unavailable(errors.New("channel closed"))
	}
}

// writeDeadlineConn bounds every write, so that a broker that stopped
// reading (a connection blocked by a resource alarm, a frozen network)
// fails the connection instead of hanging a call forever.
type writeDeadlineConn struct {
	net.Conn
	timeout time.Duration
}

func (c *writeDeadlineConn) Write(b []byte) (int, error) {
	if err := c.Conn.SetWriteDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}
