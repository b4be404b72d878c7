package oncebox_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
)

// briefConfig is testdata/brief.yaml written as Go structs.
func briefConfig() oncebox.Config {
	return oncebox.Config{
		MaxConcurrentQueries: 5,
		Outbox: oncebox.OutboxConfig{
			Sender: oncebox.SenderConfig{Type: "kafka"},
			Defaults: oncebox.EventSettings{
				BatchSize: 200,
				Polling: oncebox.PollingSettings{Type: oncebox.PollingAdaptive,
					MinFixedDelay: 250 * time.Millisecond, MaxFixedDelay: time.Minute, Multiplier: 1.5},
				MaxRetries: oncebox.Int(3),
				Backoff:    oncebox.BackoffSettings{Enabled: oncebox.Bool(true), Delay: 10 * time.Second, Multiplier: 3.0},
			},
			Events: map[string]oncebox.EventSettings{
				"high-priority": {Topic: "events", Polling: oncebox.PollingSettings{MinFixedDelay: 250 * time.Millisecond}},
				"low-priority": {Topic: "events",
					Polling: oncebox.PollingSettings{MinFixedDelay: 10 * time.Second, MaxFixedDelay: 5 * time.Minute, Multiplier: 2.0},
					Backoff: oncebox.BackoffSettings{Enabled: oncebox.Bool(false)}},
				"create-order": {Topic: "orders"},
				"daily-report": {Topic: "reports",
					Polling: oncebox.PollingSettings{MinFixedDelay: 10 * time.Second, MaxFixedDelay: 5 * time.Minute}},
			},
			DLQ: oncebox.DLQConfig{Enabled: true},
		},
		Inbox: oncebox.InboxConfig{
			Source:  oncebox.SourceConfig{Type: "kafka"},
			CleanUp: oncebox.CleanUpConfig{TTL: 24 * time.Hour},
			Cache:   oncebox.CacheConfig{Enabled: true, CacheName: "orders-service:oncebox:inbox"},
		},
	}
}

func TestLoadConfigBriefYAMLAndJSONEqualTheStructs(t *testing.T) {
	t.Parallel()
	want := briefConfig().WithDefaults()
	require.NoError(t, want.Validate())
	for _, file := range []string{"testdata/brief.yaml", "testdata/brief.json"} {
		got, err := oncebox.LoadConfigFile(file)
		require.NoError(t, err, file)
		require.Equal(t, want, got, file)
	}
}

func TestConfigInheritance(t *testing.T) {
	t.Parallel()
	cfg, err := oncebox.LoadConfigFile("testdata/brief.yaml")
	require.NoError(t, err)
	require.Equal(t, []string{"create-order", "daily-report", "high-priority", "low-priority"}, cfg.EventTypes())

	low, err := cfg.Event("low-priority")
	require.NoError(t, err)
	require.Equal(t, oncebox.EventConfig{
		EventType: "low-priority", Topic: "events", BatchSize: 200, MaxRetries: 3,
		Polling: oncebox.PollingSettings{Type: oncebox.PollingAdaptive,
			MinFixedDelay: 10 * time.Second, MaxFixedDelay: 5 * time.Minute, Multiplier: 2.0},
		Backoff:  oncebox.Backoff{Enabled: false, Delay: 10 * time.Second, Multiplier: 3.0},
		Ordering: oncebox.OrderingNone, OnFailure: oncebox.OnFailureSkip,
	}, low)

	report, err := cfg.Event("daily-report")
	require.NoError(t, err)
	require.Equal(t, 1.5, report.Polling.Multiplier, "multiplier inherited from the defaults")
	require.Equal(t, 10*time.Second, report.Polling.MinFixedDelay)
	require.True(t, report.Backoff.Enabled)

	// A type nobody configured resolves to the defaults, as the forwarder
	// relays whatever is published; in strict mode it is unknown.
	other, err := cfg.Event("create-ordr")
	require.NoError(t, err)
	require.Equal(t, "create-ordr", other.Topic, "topic = the event type when the defaults name none")
	require.Equal(t, 200, other.BatchSize)
	strict := cfg
	strict.Outbox.StrictEventTypes = true
	_, err = strict.Event("create-ordr")
	require.ErrorIs(t, err, oncebox.ErrUnknownEventType)
	require.NoError(t, strict.Validate())
	require.ErrorContains(t, oncebox.Config{Outbox: oncebox.OutboxConfig{StrictEventTypes: true}}.Validate(),
		"outbox.strict-event-types")

	// With no event types configured, any type resolves to the defaults and
	// publishes to the topic of its own name.
	any, err := oncebox.Config{}.Event("anything")
	require.NoError(t, err)
	require.Equal(t, "anything", any.Topic)
	require.Equal(t, oncebox.DefaultBatchSize, any.BatchSize)
	require.Equal(t, oncebox.DefaultMaxRetries, any.MaxRetries)

	// max-retries: 0 overrides the inherited 3 (a pointer, not a zero).
	zero := oncebox.Config{Outbox: oncebox.OutboxConfig{Events: map[string]oncebox.EventSettings{
		"once": {MaxRetries: oncebox.Int(0)}}}}
	once, err := zero.Event("once")
	require.NoError(t, err)
	require.Equal(t, 0, once.MaxRetries)
}

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	c := oncebox.Config{}.WithDefaults()
	require.NoError(t, c.Validate())
	d := c.Outbox.Defaults
	require.Equal(t, 200, d.BatchSize)
	require.Equal(t, oncebox.PollingSettings{Type: oncebox.PollingAdaptive,
		MinFixedDelay: 250 * time.Millisecond, MaxFixedDelay: time.Minute, Multiplier: 1.5}, d.Polling)
	require.Equal(t, 3, *d.MaxRetries)
	require.Equal(t, 300*time.Second, c.Outbox.MaxBatchProcessingTime)
	require.Equal(t, 24*time.Hour, c.Outbox.CleanUp.TTL)
	require.Equal(t, 24*time.Hour, c.Inbox.CleanUp.TTL)
	require.Equal(t, time.Hour, c.Inbox.Cache.TTL)
	require.Equal(t, 1<<20, c.Outbox.MaxPayloadSize)
	require.Equal(t, 100, c.Outbox.MaxDiscoveredTypes)
}

func TestLoadConfigReadsMaxDiscoveredTypes(t *testing.T) {
	t.Parallel()
	cfg, err := oncebox.LoadConfig(strings.NewReader("oncebox:\n  outbox: {max-discovered-types: 250}\n"))
	require.NoError(t, err)
	require.Equal(t, 250, cfg.Outbox.MaxDiscoveredTypes)
	for _, bad := range []string{"-1", "1000"} {
		_, err := oncebox.LoadConfig(strings.NewReader("oncebox:\n  outbox: {max-discovered-types: " + bad + "}\n"))
		require.ErrorIs(t, err, oncebox.ErrInvalidConfig, bad)
		require.ErrorContains(t, err, "outbox.max-discovered-types: must be between 1 and 999, got "+bad)
	}
	_, err = oncebox.LoadConfig(strings.NewReader("oncebox:\n  outbox: {max-discoverd-types: 5}\n"))
	require.ErrorContains(t, err, "max-discoverd-types", "a misspelt key is refused")
}

func TestBackoffRetryDelaysAreExact(t *testing.T) {
	t.Parallel()
	ec, err := oncebox.Config{}.Event("t")
	require.NoError(t, err)
	require.Equal(t, []time.Duration{10 * time.Second, 30 * time.Second, 90 * time.Second},
		[]time.Duration{ec.Backoff.RetryDelay(1), ec.Backoff.RetryDelay(2), ec.Backoff.RetryDelay(3)})
	b := oncebox.Backoff{Enabled: true, Delay: 1500 * time.Millisecond, Multiplier: 1.5}
	require.Equal(t, 3375*time.Millisecond, b.RetryDelay(3), "no rounding to whole seconds")
	require.Equal(t, time.Duration(0), oncebox.Backoff{Enabled: false, Delay: time.Second}.RetryDelay(1))
}

func TestConfigValidationNamesTheField(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		mutate func(c *oncebox.Config)
		want   string
	}{
		{"min above max", func(c *oncebox.Config) {
			c.Outbox.Defaults.Polling.MinFixedDelay = 2 * time.Minute
		}, "outbox.defaults.polling.min-fixed-delay: 2m0s is greater than max-fixed-delay 1m0s"},
		{"min above inherited max", func(c *oncebox.Config) {
			c.Outbox.Events = map[string]oncebox.EventSettings{"slow": {Polling: oncebox.PollingSettings{MinFixedDelay: 5 * time.Minute}}}
		}, "outbox.events.slow.polling.min-fixed-delay: 5m0s is greater than max-fixed-delay 1m0s"},
		{"polling multiplier below 1", func(c *oncebox.Config) {
			c.Outbox.Events = map[string]oncebox.EventSettings{"x": {Polling: oncebox.PollingSettings{Multiplier: 0.5}}}
		}, "outbox.events.x.polling.multiplier: must be >= 1, got 0.5"},
		{"backoff multiplier below 1", func(c *oncebox.Config) {
			c.Outbox.Defaults.Backoff.Multiplier = 0.9
		}, "outbox.defaults.backoff.multiplier: must be >= 1, got 0.9"},
		{"negative batch size", func(c *oncebox.Config) {
			c.Outbox.Defaults.BatchSize = -1
		}, "outbox.defaults.batch-size: must be between 1 and 10000, got -1"},
		{"batch size too large", func(c *oncebox.Config) {
			c.Outbox.Events = map[string]oncebox.EventSettings{"x": {BatchSize: 20000}}
		}, "outbox.events.x.batch-size: must be between 1 and 10000, got 20000"},
		{"unknown polling type", func(c *oncebox.Config) {
			c.Outbox.Defaults.Polling.Type = "cron"
		}, `outbox.defaults.polling.type: must be "adaptive" or "fixed", got "cron"`},
		{"negative max retries", func(c *oncebox.Config) {
			c.Outbox.Defaults.MaxRetries = oncebox.Int(-2)
		}, "outbox.defaults.max-retries: must be >= 0, got -2"},
		{"cache ttl above inbox ttl", func(c *oncebox.Config) {
			c.Inbox.Cache.TTL = 48 * time.Hour
		}, "inbox.cache.ttl: 48h0m0s is longer than inbox.clean-up.ttl 24h0m0s"},
		{"cache without name", func(c *oncebox.Config) {
			c.Inbox.Cache = oncebox.CacheConfig{Enabled: true, TTL: time.Minute}
		}, "inbox.cache.cache-name: is required when the cache is enabled"},
		{"negative ttl", func(c *oncebox.Config) {
			c.Outbox.CleanUp.TTL = -time.Hour
		}, "outbox.clean-up.ttl: must be > 0, got -1h0m0s"},
		{"negative processing time", func(c *oncebox.Config) {
			c.Outbox.MaxBatchProcessingTime = -time.Second
		}, "outbox.max-batch-processing-time: must be > 0"},
		{"unknown sender", func(c *oncebox.Config) {
			c.Outbox.Sender.Type = "nats"
		}, `outbox.sender.type: must be "kafka", "rabbitmq" or empty, got "nats"`},
		{"negative thread pool", func(c *oncebox.Config) {
			c.MaxConcurrentQueries = -1
		}, "thread-pool-size: must be >= 0, got -1"},
		{"schema injection", func(c *oncebox.Config) {
			c.Tables.Schema = "public; DROP TABLE users"
		}, `tables.schema: "public; DROP TABLE users" is not a plain identifier`},
		{"reserved schema user", func(c *oncebox.Config) {
			c.Tables.Schema = "user"
		}, `tables.schema: "user" is a reserved word (SQL:2016, PostgreSQL, Oracle)`},
		{"reserved schema select", func(c *oncebox.Config) {
			c.Tables.Schema = "select"
		}, `tables.schema: "select" is a reserved word`},
		{"reserved schema Order, any case", func(c *oncebox.Config) {
			c.Tables.Schema = "Order"
		}, `tables.schema: "Order" is a reserved word`},
		{"reserved schema TABLE", func(c *oncebox.Config) {
			c.Tables.Schema = "TABLE"
		}, `tables.schema: "TABLE" is a reserved word`},
		{"reserved in one engine only", func(c *oncebox.Config) {
			c.Tables.Schema = "varchar2"
		}, `tables.schema: "varchar2" is a reserved word (Oracle)`},
		{"prefix injection", func(c *oncebox.Config) {
			c.Tables.Prefix = "x\"y"
		}, `tables.prefix: "x\"y" is not a plain identifier`},
		{"database not a name", func(c *oncebox.Config) {
			c.Database = "Postgres; DROP"
		}, `database: must be a database's name in lower case (postgres, mysql, …) or empty, got "Postgres; DROP"`},
		{"inbox without the DLQ", func(c *oncebox.Config) {
			c.Inbox.Enabled = true
		}, "outbox.dlq.enabled: must be true when inbox.enabled is"},
		{"consumer retries out of range", func(c *oncebox.Config) {
			c.Inbox.Retry.MaxRetries = oncebox.Int(1001)
		}, "inbox.retry.max-retries: must be between 0 and 1000, got 1001"},
		{"consumer retry wait below 1ms", func(c *oncebox.Config) {
			c.Inbox.Retry.InitialInterval = time.Microsecond
		}, "inbox.retry.initial-interval: must be at least 1ms"},
		{"consumer retry multiplier NaN", func(c *oncebox.Config) {
			c.Inbox.Retry.Multiplier = math.NaN()
		}, "inbox.retry.multiplier: must be a finite number"},
		{"consumer retry max below initial", func(c *oncebox.Config) {
			c.Inbox.Retry.InitialInterval = time.Minute
		}, "inbox.retry.max-interval: 10s is shorter than initial-interval 1m0s"},
		{"negative cache size", func(c *oncebox.Config) {
			c.Inbox.Cache.Size = -5
		}, "inbox.cache.size: must be > 0, got -5"},
		{"oversized event type", func(c *oncebox.Config) {
			c.Outbox.Events = map[string]oncebox.EventSettings{strings.Repeat("e", 256): {}}
		}, "event type must be 1 to 255 characters"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := oncebox.Config{}.WithDefaults()
			tc.mutate(&c)
			err := c.Validate()
			require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
			require.ErrorContains(t, err, tc.want)
			var fe *oncebox.FieldError
			require.True(t, errors.As(err, &fe))
		})
	}
}

func TestLoadConfigReadsTheServiceKeys(t *testing.T) {
	t.Parallel()
	cfg, err := oncebox.LoadConfig(strings.NewReader(`
oncebox:
  database: mysql
  outbox: {dlq: {enabled: true}}
  inbox:
    enabled: true
    retry: {max-retries: 0, initial-interval: 50ms, max-interval: 2s, multiplier: 3}
    cache: {enabled: true, cache-name: billing, size: 500}
`))
	require.NoError(t, err)
	require.Equal(t, "mysql", cfg.Database)
	require.True(t, cfg.Inbox.Enabled)
	require.Equal(t, oncebox.RetryConfig{MaxRetries: oncebox.Int(0), InitialInterval: 50 * time.Millisecond,
		MaxInterval: 2 * time.Second, Multiplier: 3}, cfg.Inbox.Retry, "0 retries is kept, not defaulted")
	require.Equal(t, 500, cfg.Inbox.Cache.Size)

	d := oncebox.Config{}.WithDefaults()
	require.Equal(t, oncebox.RetryConfig{MaxRetries: oncebox.Int(3), InitialInterval: 100 * time.Millisecond,
		MaxInterval: 10 * time.Second, Multiplier: 2}, d.Inbox.Retry)
	require.Equal(t, oncebox.DefaultCacheSize, d.Inbox.Cache.Size)
	require.False(t, d.Inbox.Enabled)
}

func TestConfigValidationReportsEveryProblem(t *testing.T) {
	t.Parallel()
	c := oncebox.Config{}.WithDefaults()
	c.Outbox.Defaults.BatchSize = -1
	c.Inbox.CleanUp.TTL = -time.Second
	err := c.Validate()
	require.ErrorContains(t, err, "outbox.defaults.batch-size")
	require.ErrorContains(t, err, "inbox.clean-up.ttl")
}

func TestLoadConfigRejectsUnknownKeys(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"misspelled key":         "oncebox:\n  outbox:\n    defaults:\n      batch-sise: 10\n",
		"unknown section":        "oncebox:\n  outbx: {}\n",
		"misspelled in an event": "oncebox:\n  outbox:\n    events:\n      a: { polling: { min-delay: 1s } }\n",
	}
	for name, doc := range cases {
		_, err := oncebox.LoadConfig(strings.NewReader(doc))
		require.ErrorIs(t, err, oncebox.ErrInvalidConfig, name)
		require.ErrorContains(t, err, "unknown key", name)
	}
	_, err := oncebox.LoadConfig(strings.NewReader("outbox: {}\n"))
	require.ErrorContains(t, err, `outbox: unknown top-level key; the configuration goes under "oncebox:" (oncebox.outbox) (line 1)`)
	_, err = oncebox.LoadConfig(strings.NewReader("{}\n"))
	require.ErrorContains(t, err, `top-level "oncebox" key`)
	_, err = oncebox.LoadConfig(strings.NewReader(""))
	require.ErrorContains(t, err, "empty")
	_, err = oncebox.LoadConfig(strings.NewReader("oncebox:\n  outbox:\n    max-batch-processing-time: soon\n"))
	require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
	require.ErrorContains(t, err, "soon")
	_, err = oncebox.LoadConfig(strings.NewReader("oncebox:\n  outbox:\n    defaults:\n      batch-size: 5\n      polling: { multiplier: 0.5 }\n"))
	require.ErrorContains(t, err, "outbox.defaults.polling.multiplier")
	_, err = oncebox.LoadConfigFile("testdata/missing.yaml")
	require.ErrorContains(t, err, "missing.yaml")
}

// TestConfigRefusesHostileNumbers covers numbers that used to pass
// validation and then broke the relay: NaN and infinite multipliers (the
// backoff turned into a negative delay), nanosecond polling, a billion
// retries and a backoff whose last delay does not fit in a time.Duration.
func TestConfigRefusesHostileNumbers(t *testing.T) {
	t.Parallel()
	nan, inf := math.NaN(), math.Inf(1)
	cases := []struct {
		name   string
		mutate func(c *oncebox.Config)
		want   string
	}{
		{"NaN polling multiplier", func(c *oncebox.Config) {
			c.Outbox.Defaults.Polling.Multiplier = nan
		}, "outbox.defaults.polling.multiplier: must be a finite number, got NaN"},
		{"infinite polling multiplier in an event", func(c *oncebox.Config) {
			c.Outbox.Events = map[string]oncebox.EventSettings{"x": {Polling: oncebox.PollingSettings{Multiplier: inf}}}
		}, "outbox.events.x.polling.multiplier: must be a finite number, got +Inf"},
		{"NaN backoff multiplier", func(c *oncebox.Config) {
			c.Outbox.Defaults.Backoff.Multiplier = nan
		}, "outbox.defaults.backoff.multiplier: must be a finite number, got NaN"},
		{"infinite backoff multiplier in an event", func(c *oncebox.Config) {
			c.Outbox.Events = map[string]oncebox.EventSettings{"x": {Backoff: oncebox.BackoffSettings{Multiplier: inf}}}
		}, "outbox.events.x.backoff.multiplier: must be a finite number, got +Inf"},
		{"nanosecond min delay", func(c *oncebox.Config) {
			c.Outbox.Defaults.Polling.MinFixedDelay = time.Nanosecond
		}, "outbox.defaults.polling.min-fixed-delay: must be at least 1ms, got 1ns"},
		{"microsecond max delay in an event", func(c *oncebox.Config) {
			c.Outbox.Events = map[string]oncebox.EventSettings{"x": {Polling: oncebox.PollingSettings{
				Type: oncebox.PollingFixed, MaxFixedDelay: time.Microsecond}}}
		}, "outbox.events.x.polling.max-fixed-delay: must be at least 1ms, got 1µs"},
		{"nanosecond backoff delay", func(c *oncebox.Config) {
			c.Outbox.Defaults.Backoff.Delay = time.Nanosecond
		}, "outbox.defaults.backoff.delay: must be at least 1ms, got 1ns"},
		{"a billion retries", func(c *oncebox.Config) {
			c.Outbox.Defaults.MaxRetries = oncebox.Int(1_000_000_000)
		}, "outbox.defaults.max-retries: must be at most 1000, got 1000000000"},
		{"backoff overflowing time.Duration", func(c *oncebox.Config) {
			c.Outbox.Defaults.MaxRetries = oncebox.Int(1000)
		}, "outbox.defaults.backoff: the delay before retry 1000 (10s × 3^999) is longer than 168h0m0s"},
		{"backoff over the ceiling, inherited", func(c *oncebox.Config) {
			c.Outbox.Events = map[string]oncebox.EventSettings{"x": {MaxRetries: oncebox.Int(20),
				Backoff: oncebox.BackoffSettings{Multiplier: 2}}}
		}, "outbox.events.x.backoff: the delay before retry 20 (10s × 2^19) is longer than 168h0m0s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := oncebox.Config{}.WithDefaults()
			tc.mutate(&c)
			err := c.Validate()
			require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
			require.ErrorContains(t, err, tc.want)
			var fe *oncebox.FieldError
			require.True(t, errors.As(err, &fe))
		})
	}
}

// TestConfigAcceptsTheEdges keeps the floors and ceilings usable: the 1ms
// polling the tests and benchmarks use, 1,000 retries without backoff or
// with a backoff that stays under the ceiling.
func TestConfigAcceptsTheEdges(t *testing.T) {
	t.Parallel()
	c := oncebox.Config{}.WithDefaults()
	c.Outbox.Defaults.Polling = oncebox.PollingSettings{Type: oncebox.PollingAdaptive,
		MinFixedDelay: time.Millisecond, MaxFixedDelay: 20 * time.Millisecond, Multiplier: 2}
	c.Outbox.Defaults.Backoff.Delay = time.Millisecond
	c.Outbox.Events = map[string]oncebox.EventSettings{
		"no-backoff": {MaxRetries: oncebox.Int(oncebox.MaxRetriesLimit), Backoff: oncebox.BackoffSettings{Enabled: oncebox.Bool(false)}},
		"flat":       {MaxRetries: oncebox.Int(oncebox.MaxRetriesLimit), Backoff: oncebox.BackoffSettings{Multiplier: 1}},
		// The 9th retry waits 1m × 3^8 = 6,561 minutes, about 109h.
		"days": {MaxRetries: oncebox.Int(9), Backoff: oncebox.BackoffSettings{Delay: time.Minute, Multiplier: 3}},
	}
	require.NoError(t, c.Validate())
}

// TestLoadConfigRefusesHostileNumbers feeds the same values through YAML,
// where .nan and .inf are ordinary floats.
func TestLoadConfigRefusesHostileNumbers(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"oncebox:\n  outbox:\n    defaults:\n      polling: { multiplier: .nan }\n":                    "outbox.defaults.polling.multiplier: must be a finite number, got NaN",
		"oncebox:\n  outbox:\n    defaults:\n      backoff: { multiplier: .inf }\n":                    "outbox.defaults.backoff.multiplier: must be a finite number, got +Inf",
		"oncebox:\n  outbox:\n    events:\n      a: { backoff: { multiplier: .NaN } }\n":               "outbox.events.a.backoff.multiplier: must be a finite number, got NaN",
		"oncebox:\n  outbox:\n    defaults:\n      polling: { min-fixed-delay: 1ns }\n":                "outbox.defaults.polling.min-fixed-delay: must be at least 1ms, got 1ns",
		"oncebox:\n  outbox:\n    events:\n      a: { polling: { min-fixed-delay: 999us } }\n":         "outbox.events.a.polling.min-fixed-delay: must be at least 1ms, got 999µs",
		"oncebox:\n  outbox:\n    defaults:\n      max-retries: 1000000000\n":                          "outbox.defaults.max-retries: must be at most 1000, got 1000000000",
		"oncebox:\n  outbox:\n    events:\n      a: { max-retries: 60, backoff: { multiplier: 2 } }\n": "outbox.events.a.backoff: the delay before retry 60 (10s × 2^59) is longer than 168h0m0s",
	}
	for doc, want := range cases {
		_, err := oncebox.LoadConfig(strings.NewReader(doc))
		require.ErrorIs(t, err, oncebox.ErrInvalidConfig, doc)
		require.ErrorContains(t, err, want, doc)
	}
}

// TestBackoffRetryDelayNeverGoesNegative: a delay at or past the largest
// time.Duration, or a NaN multiplier that validation would refuse, saturates
// instead of wrapping to −292 years.
func TestBackoffRetryDelayNeverGoesNegative(t *testing.T) {
	t.Parallel()
	maxD := time.Duration(math.MaxInt64)
	require.Equal(t, maxD, oncebox.Backoff{Enabled: true, Delay: maxD, Multiplier: 1}.RetryDelay(1))
	require.Equal(t, maxD, oncebox.Backoff{Enabled: true, Delay: maxD / 2, Multiplier: 2}.RetryDelay(2))
	require.Equal(t, maxD, oncebox.Backoff{Enabled: true, Delay: time.Second, Multiplier: math.NaN()}.RetryDelay(2))
	require.Equal(t, maxD, oncebox.Backoff{Enabled: true, Delay: time.Second, Multiplier: math.Inf(1)}.RetryDelay(2))
}
