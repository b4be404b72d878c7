package service_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/internal/dbtest"
	"github.com/oncebox/watermill-oncebox/service"
)

func TestRunCloseRunningInEveryOrder(t *testing.T) {
	tg := dbtest.Targets()[0]
	b := setup(t, tg)
	cfg := config(t, consumerYAML, b.schema)
	build := func() *service.Service { return b.newService(t, cfg, service.WithRelay(b.broker)) }

	t.Run("Close before Run", func(t *testing.T) {
		svc := build()
		ran := false
		svc.Go(func(context.Context) error { ran = true; return nil })
		require.NoError(t, svc.Close())
		<-svc.Running() // closed by Close already
		require.NoError(t, svc.Run(context.Background()), "Run after Close returns at once")
		require.False(t, ran, "Run after Close starts nothing")
		require.NoError(t, svc.Close(), "twice")
		require.ErrorContains(t, svc.Run(context.Background()), "oncebox: service: Run called twice", "also after Close")
	})
	t.Run("context done at start", func(t *testing.T) {
		e := tg.NewEmpty(t) // not migrated: a Run that started the relay would fail its start-up check
		schema := e.Tables.Events[:len(e.Tables.Events)-len(".outbox_events")]
		svc, err := service.New(e.Beginner, config(t, consumerYAML, schema), nil, service.WithRelay(b.broker))
		require.NoError(t, err)
		ran := false
		svc.Go(func(context.Context) error { ran = true; return nil })
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		require.NoError(t, svc.Run(ctx), "nil at once")
		<-svc.Running()
		require.False(t, ran, "Run with a done context starts nothing")
		require.NoError(t, svc.Close())
	})
	t.Run("Run then Close, Close again from many goroutines", func(t *testing.T) {
		svc := build()
		errc := make(chan error, 1)
		go func() { errc <- svc.Run(context.Background()) }()
		<-svc.Running()
		require.ErrorContains(t, svc.Run(context.Background()), "oncebox: service: Run called twice", "while it runs")
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() { require.NoError(t, svc.Close()) })
		}
		wg.Wait()
		require.NoError(t, <-errc)
		require.ErrorContains(t, svc.Run(context.Background()), "Run called twice")
	})
	t.Run("Run ended by its context", func(t *testing.T) {
		svc := build()
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- svc.Run(ctx) }()
		<-svc.Running()
		cancel()
		require.NoError(t, <-errc)
		require.NoError(t, svc.Close(), "Close after Run returned")
	})
	t.Run("Run ended by a component's error at start", func(t *testing.T) {
		e := tg.NewEmpty(t) // not migrated: the relay's start-up check refuses it
		schema := e.Tables.Events[:len(e.Tables.Events)-len(".outbox_events")]
		svc, err := service.New(e.Beginner, config(t, consumerYAML, schema), nil, service.WithRelay(b.broker))
		require.NoError(t, err)
		errc := make(chan error, 1)
		go func() { errc <- svc.Run(context.Background()) }()
		<-svc.Running() // closed although Run failed
		require.Error(t, <-errc)
		require.NoError(t, svc.Close())
	})
	t.Run("Close while Run starts", func(t *testing.T) {
		svc := build()
		errc := make(chan error, 1)
		go func() { errc <- svc.Run(context.Background()) }()
		require.NoError(t, svc.Close())
		select {
		case <-svc.Running():
		case <-time.After(time.Minute):
			t.Fatal("Running never closed")
		}
		require.NoError(t, <-errc)
	})
	t.Run("nothing to run", func(t *testing.T) {
		svc := b.newService(t, config(t, "  tables: {schema: %s}\n", b.schema))
		errc := make(chan error, 1)
		go func() { errc <- svc.Run(context.Background()) }()
		<-svc.Running()
		require.NoError(t, svc.Close())
		require.NoError(t, <-errc)
	})
}

func TestConfigurationErrorsNameTheKey(t *testing.T) {
	b := setup(t, dbtest.Targets()[0])
	for _, tc := range []struct {
		name, yaml string
		opts       []service.Option
		want       string
	}{
		{"inbox without relay", fmt.Sprintf(consumerYAML, b.schema), nil, "inbox.enabled: the poison queue parks failed messages"},
		{"inbox without DLQ", "  inbox: {enabled: true}\n", []service.Option{service.WithRelay(b.broker)},
			"config outbox.dlq.enabled: must be true when inbox.enabled is"},
		{"unknown database", "  database: db2\n", nil, `config database: must be one of postgres, mysql, oracle, sqlite, or empty, got "db2"`},
		{"retry policy", "  inbox: {retry: {initial-interval: 1s, max-interval: 10ms}}\n", nil,
			"config inbox.retry.max-interval: 10ms is shorter than initial-interval 1s"},
		{"cache size", "  inbox: {cache: {size: -1}}\n", nil, "config inbox.cache.size: must be > 0, got -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := oncebox.LoadConfig(stringsReader("oncebox:\n" + tc.yaml))
			if err == nil {
				_, err = service.New(b.Beginner, cfg, nil, tc.opts...)
			}
			require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
			require.ErrorContains(t, err, tc.want)
		})
	}
	t.Run("fields the service sets", func(t *testing.T) {
		_, err := service.New(b.Beginner, oncebox.Config{}, nil,
			service.WithInboxConfig(middlewareInboxConfigWithDialect(b)))
		require.ErrorContains(t, err, "WithInboxConfig: Dialect must be left zero: the service sets it")
	})
	t.Run("unknown driver", func(t *testing.T) {
		_, err := service.New(foreignBeginner{b.Beginner}, oncebox.Config{}, nil)
		require.ErrorContains(t, err, "config database: is empty and the database handle's driver (service_test.foreignBeginner) is not one oncebox knows")
		_, err = service.New(foreignBeginner{b.Beginner}, oncebox.Config{Database: "postgres"}, nil)
		require.NoError(t, err, "the database key says it")
	})
}

func TestStartupChecksOfTheSenderAndSourceTypes(t *testing.T) {
	b := setup(t, dbtest.Targets()[0])
	yaml := "  tables: {schema: %s}\n  inbox: {enabled: true, source: {type: kafka}}\n  outbox: {sender: {type: kafka}, dlq: {enabled: true}}\n"
	svc := b.newService(t, config(t, yaml, b.schema), service.WithRelay(b.broker))
	require.Equal(t, []string{
		`outbox.sender.type is "kafka" but the relay publishes with a *gochannel.GoChannel`,
		`outbox.sender.type is "kafka" but no check of the producer was given: pass service.WithSenderCheck(kafka.CheckProducerConfig(saramaConfig))`,
		`inbox.source.type is "kafka" but no check of the subscriber was given: pass service.WithSourceCheck(kafka.CheckSubscriberConfig(subscriberConfig))`,
	}, svc.Warnings())

	logger := watermill.NewCaptureLogger()
	svc, err := service.New(b.Beginner, config(t, yaml, b.schema), logger, service.WithRelay(b.broker),
		service.WithSenderCheck([]string{"acks=1"}), service.WithSourceCheck([]string{"auto-commit is on"}))
	require.NoError(t, err)
	require.Equal(t, []string{"outbox.sender: acks=1", "inbox.source: auto-commit is on",
		`outbox.sender.type is "kafka" but the relay publishes with a *gochannel.GoChannel`}, svc.Warnings())
	run(t, svc)
	logged := map[string]bool{}
	for _, m := range logger.Captured()[watermill.ErrorLogLevel] {
		if m.Err != nil {
			logged[m.Msg+": "+m.Err.Error()] = true
		}
	}
	require.True(t, logged["Start-up check: inbox.source: auto-commit is on"], "Run logs the warnings")
}
