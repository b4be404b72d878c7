package dialecttest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/middleware"
)

// hostileTexts are error texts and header values that a database refuses
// when bound as they are: a NUL (PostgreSQL text), invalid UTF-8 (every
// database), and a text over the 4,000 bytes kept of an error whose cut
// falls inside a character.
var hostileTexts = map[string]string{
	"nul":            "broker said \x00 no",
	"invalid-utf8":   "broker said \xff\xfe no",
	"cut-mid-char":   strings.Repeat("x", 3999) + "€ and more",
	"long-multibyte": strings.Repeat("é", 5000),
}

// A send error that cannot be stored as it is still counts an attempt: the
// event is retried on its schedule, ends FAILED and moves to the DLQ with
// its retry count. Before the text was cleaned, the finalize failed, the
// rows were recovered without an attempt and the event was sent forever.
func testUnstorableSendErrorsStillCountAttempts(t *testing.T, tg Target) {
	for name, text := range hostileTexts {
		t.Run(name, func(t *testing.T) {
			s := setup(t, tg)
			ids := s.publish(t, s.clock, "order-created", 1)
			rec := newRecorder()
			rec.fn = func(string, []*message.Message) error { return errors.New(text) }
			cfg := s.pollerConfig("order-created")
			cfg.Oncebox.Outbox.Defaults.MaxRetries = oncebox.Int(1)
			cfg.Oncebox.Outbox.DLQ.Enabled = true
			h := &hooks{}
			cfg.Hooks = h
			s.startPoller(t, nil, rec, cfg)
			stepUntil(t, s.clock, waitersPerPollerDLQ, 250*time.Millisecond, 10*time.Minute,
				func() bool { return s.Count(t, s.Tables.DLQ, "") == 1 })

			require.Len(t, h.Snapshot().Failures, 2, "max-retries 1: two attempts, each counted")
			var retries int
			var lastErr string
			require.NoError(t, s.DB.QueryRowContext(context.Background(),
				"SELECT retry_count, last_error FROM "+s.Tables.DLQ+" WHERE event_id = "+s.P(1), s.ID(ids[0])).Scan(&retries, &lastErr))
			require.Equal(t, 2, retries)
			require.True(t, utf8.ValidString(lastErr))
			require.NotContains(t, lastErr, "\x00")
			require.LessOrEqual(t, len(lastErr), 4000)
			require.NotEmpty(t, lastErr)
		})
	}
}

// refuseText installs a trigger that makes the database refuse any row of
// table whose column contains marker: a storage failure of the outcome's
// text that no cleaning can foresee.
func refuseText(t *testing.T, s *suite, table, column, marker string) {
	t.Helper()
	name := "refuse_" + column + "_" + strings.ToLower(strings.ReplaceAll(newID(t).String()[24:], "-", ""))
	schema := table[:strings.IndexByte(table, '.')]
	switch s.Target.Name {
	case "postgres":
		s.exec(t, `CREATE FUNCTION `+schema+`.`+name+`() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.`+column+` LIKE '%`+marker+`%' THEN RAISE EXCEPTION 'refused by test trigger'; END IF;
  RETURN NEW;
END $$`)
		s.exec(t, `CREATE TRIGGER `+name+` BEFORE INSERT OR UPDATE ON `+table+` FOR EACH ROW EXECUTE FUNCTION `+schema+`.`+name+`()`)
	case "mysql":
		for _, op := range []string{"INSERT", "UPDATE"} {
			s.exec(t, `CREATE TRIGGER `+schema+`.`+name+`_`+strings.ToLower(op)+` BEFORE `+op+` ON `+table+` FOR EACH ROW
BEGIN
  IF NEW.`+column+` LIKE '%`+marker+`%' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused by test trigger'; END IF;
END`)
		}
	case "sqlite":
		// The trigger's name takes the schema; its table may not.
		bare := table[strings.IndexByte(table, '.')+1:]
		for _, op := range []string{"INSERT", "UPDATE"} {
			s.exec(t, `CREATE TRIGGER `+schema+`.`+name+`_`+strings.ToLower(op)+` BEFORE `+op+` ON `+bare+` FOR EACH ROW
WHEN NEW.`+column+` LIKE '%`+marker+`%'
BEGIN SELECT RAISE(ABORT, 'refused by test trigger'); END`)
		}
	default:
		t.Skipf("no test trigger for %s", s.Target.Name)
	}
}

// The general rule: no input can make an event loop forever without
// counting an attempt. When the database refuses the outcome's text for a
// reason nobody foresaw (a trigger here), the relay records the attempt with
// a plain text instead, so the event still reaches FAILED and the DLQ.
func testRelayCountsTheAttemptWhenTheErrorTextIsRefused(t *testing.T, tg Target) {
	s := setup(t, tg)
	refuseText(t, s, s.Tables.Events, "last_error", "unstorable")
	ids := s.publish(t, s.clock, "order-created", 1)
	rec := newRecorder()
	rec.fn = func(string, []*message.Message) error { return errors.New("unstorable reason") }
	cfg := s.pollerConfig("order-created")
	cfg.Oncebox.Outbox.Defaults.MaxRetries = oncebox.Int(1)
	cfg.Oncebox.Outbox.DLQ.Enabled = true
	s.startPoller(t, nil, rec, cfg)
	stepUntil(t, s.clock, waitersPerPollerDLQ, 250*time.Millisecond, 10*time.Minute,
		func() bool { return s.Count(t, s.Tables.DLQ, "") == 1 })
	var retries int
	var lastErr string
	require.NoError(t, s.DB.QueryRowContext(context.Background(),
		"SELECT retry_count, last_error FROM "+s.Tables.DLQ+" WHERE event_id = "+s.P(1), s.ID(ids[0])).Scan(&retries, &lastErr))
	require.Equal(t, 2, retries, "both attempts counted")
	require.Contains(t, lastErr, "could not be stored")
}

// A poison message whose event type header, handler error or metadata
// holds what the database refuses is parked all the same, and acked: it is
// never redelivered forever.
func testPoisonQueueParksMessagesWithUnstorableText(t *testing.T, tg Target) {
	s := setup(t, tg)
	pq, err := middleware.NewPoisonQueue(s.Beginner, middleware.PoisonConfig{Dialect: s.Dialect}, watermill.NopLogger{})
	require.NoError(t, err)
	n := 0
	for name, text := range hostileTexts {
		msg := message.NewMessage(watermill.NewUUID(), []byte("p"))
		msg.Metadata.Set(oncebox.HeaderEventID, newID(t).String())
		msg.Metadata.Set(oncebox.HeaderEventType, text)
		msg.Metadata.Set("x-"+name, text)
		_, err := pq.Middleware(func(*message.Message) ([]*message.Message, error) {
			return nil, errors.New(text)
		})(msg)
		require.NoError(t, err, "%s: parked and acked", name)
		n++
		require.Equal(t, n, s.Count(t, s.Tables.DLQ, ""), "%s: one row", name)
	}
	rows, err := s.DB.QueryContext(context.Background(), "SELECT event_type, last_error FROM "+s.Tables.DLQ)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var eventType, lastErr string
		require.NoError(t, rows.Scan(&eventType, &lastErr))
		for _, v := range []string{eventType, lastErr} {
			require.True(t, utf8.ValidString(v))
			require.NotContains(t, v, "\x00")
		}
		require.LessOrEqual(t, len(eventType), 255)
	}
	require.NoError(t, rows.Err())
}

// The general rule for the poison queue: when the database refuses the
// row's text for a reason nobody foresaw, the message is parked with a
// plain error text instead of being nacked and redelivered forever.
func testPoisonQueueParksWhenTheErrorTextIsRefused(t *testing.T, tg Target) {
	s := setup(t, tg)
	refuseText(t, s, s.Tables.DLQ, "last_error", "unstorable")
	var failed int
	pq, err := middleware.NewPoisonQueue(s.Beginner, middleware.PoisonConfig{Dialect: s.Dialect,
		OnStoreFailed: func(string, error) { failed++ }}, watermill.NopLogger{})
	require.NoError(t, err)
	msg := message.NewMessage(watermill.NewUUID(), []byte("p"))
	msg.Metadata.Set(oncebox.HeaderEventID, newID(t).String())
	_, err = pq.Middleware(func(*message.Message) ([]*message.Message, error) {
		return nil, errors.New("unstorable reason")
	})(msg)
	require.NoError(t, err, "parked and acked")
	require.Equal(t, 1, s.Count(t, s.Tables.DLQ, ""))
	var lastErr string
	var payload []byte
	require.NoError(t, s.DB.QueryRowContext(context.Background(), "SELECT last_error, payload FROM "+s.Tables.DLQ).Scan(&lastErr, &payload))
	require.Contains(t, lastErr, "could not be stored")
	require.Equal(t, "p", string(payload), "the payload is kept")
	require.Equal(t, 1, failed, "the first, refused store is reported")
}

// Two different messages that carry the same event id are parked apart, so
// neither payload is lost; the same message parked again counts one more
// attempt on its row.
func testPoisonQueueKeepsAMessageWithACollidingEventIDApart(t *testing.T, tg Target) {
	s := setup(t, tg)
	pq, err := middleware.NewPoisonQueue(s.Beginner, middleware.PoisonConfig{Dialect: s.Dialect}, watermill.NopLogger{})
	require.NoError(t, err)
	fail := pq.Middleware(func(*message.Message) ([]*message.Message, error) { return nil, errors.New("bad") })
	eventID := newID(t).String()
	park := func(uuid, payload string) {
		msg := message.NewMessage(uuid, []byte(payload))
		msg.Metadata.Set(oncebox.HeaderEventID, eventID)
		_, err := fail(msg)
		require.NoError(t, err)
	}
	park("m-1", "first")
	park("m-1", "first") // redelivered
	park("m-2", "second")
	park("m-2", "second") // redelivered: found by its message UUID
	rows, err := s.DB.QueryContext(context.Background(), "SELECT payload, retry_count, message_uuid FROM "+s.Tables.DLQ+" ORDER BY message_uuid")
	require.NoError(t, err)
	defer rows.Close()
	type parked struct {
		payload string
		retries int
		uuid    string
	}
	var got []parked
	for rows.Next() {
		var p parked
		var payload []byte
		require.NoError(t, rows.Scan(&payload, &p.retries, &p.uuid))
		p.payload = string(payload)
		got = append(got, p)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []parked{{"first", 2, "m-1"}, {"second", 2, "m-2"}}, got)
}
