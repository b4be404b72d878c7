package service_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox/internal/dbtest"
	"github.com/oncebox/watermill-oncebox/service"
)

// The start-up checks' warnings are logged with the warning as the error
// (they were logged at ERROR with err=<nil>), and a service whose relay
// fails its start-up check does not log "Service running".
func TestStartUpLogs(t *testing.T) {
	tg := dbtest.Targets()[0]
	b := setup(t, tg)
	e := tg.NewEmpty(t) // not migrated: the relay's start-up check refuses it
	schema := e.Tables.Events[:len(e.Tables.Events)-len(".outbox_events")]
	logs := watermill.NewCaptureLogger()
	svc, err := service.New(e.Beginner, config(t, "  tables: {schema: %s}\n  outbox: {sender: {type: kafka}}\n", schema), logs,
		service.WithRelay(b.broker))
	require.NoError(t, err)
	require.Error(t, svc.Run(context.Background()))

	var checks int
	for _, m := range logs.Captured()[watermill.ErrorLogLevel] {
		require.Error(t, m.Err, "logged at ERROR without an error: %q", m.Msg)
		if strings.HasPrefix(m.Msg, "Start-up check") {
			checks++
			require.Contains(t, m.Err.Error(), "outbox.sender.type is \"kafka\"")
		}
	}
	require.Equal(t, 2, checks, "the relay's type and the missing producer check")
	for _, m := range logs.Captured()[watermill.InfoLogLevel] {
		require.NotEqual(t, "Service running", m.Msg, "the relay did not start")
	}
}

// Run tells Hooks.OnHandlers the router's handlers before it runs them, so
// that metrics has their series at 0 from the start.
func TestRunTellsTheRouterHandlers(t *testing.T) {
	b := setup(t, dbtest.Targets()[0])
	router := newRouter(t)
	router.AddConsumerHandler("ship-order", "order-placed", newBroker(t, true), func(*message.Message) error { return nil })
	router.AddConsumerHandler("bill-order", "order-placed", newBroker(t, true), func(*message.Message) error { return nil })
	got := make(chan []string, 1)
	svc := b.newService(t, config(t, relayYAML, b.schema), service.WithRelay(b.broker), service.WithRouter(router),
		service.WithHooks(service.Hooks{OnHandlers: func(h []string) { got <- h }}))
	errc := runAsync(context.Background(), svc)
	<-svc.Running()
	require.Equal(t, []string{"bill-order", "ship-order"}, <-got)
	require.NoError(t, svc.Close())
	require.NoError(t, returned(t, errc))
}
