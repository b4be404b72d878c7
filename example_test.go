package oncebox_test

import (
	"fmt"
	"strings"

	"github.com/oncebox/watermill-oncebox"
)

// A service's YAML: each event type inherits the defaults block and
// overrides what it sets; LoadConfig applies the defaults and validates.
func ExampleLoadConfig() {
	cfg, err := oncebox.LoadConfig(strings.NewReader(`
oncebox:
  outbox:
    defaults:
      max-retries: 5
    events:
      order-created: { topic: orders, batch-size: 500 }
      daily-report: { topic: reports, polling: { max-fixed-delay: 5m } }
    dlq: { enabled: true }
  inbox:
    clean-up: { ttl: 72h }
`))
	if err != nil {
		panic(err)
	}
	for _, t := range cfg.EventTypes() {
		ec, _ := cfg.Event(t)
		fmt.Printf("%s → topic %s, batch %d, attempts %d, idle poll every %s at most\n",
			t, ec.Topic, ec.BatchSize, 1+ec.MaxRetries, ec.Polling.MaxFixedDelay)
	}
	// A type nobody configured takes the defaults, its topic its name.
	ec, _ := cfg.Event("order-shipped")
	fmt.Printf("order-shipped → topic %s, batch %d\n", ec.Topic, ec.BatchSize)
	fmt.Println("inbox ids kept", cfg.Inbox.CleanUp.TTL, "DLQ", cfg.Outbox.DLQ.Enabled)
	// Output:
	// daily-report → topic reports, batch 200, attempts 6, idle poll every 5m0s at most
	// order-created → topic orders, batch 500, attempts 6, idle poll every 1m0s at most
	// order-shipped → topic order-shipped, batch 200
	// inbox ids kept 72h0m0s DLQ true
}

// A misspelled key is an error naming its line, never silently ignored; a
// bad value names its field by its YAML path.
func ExampleLoadConfig_errors() {
	_, err := oncebox.LoadConfig(strings.NewReader(`
oncebox:
  outbox:
    defaults:
      batch-sise: 500
`))
	fmt.Println(err)
	_, err = oncebox.LoadConfig(strings.NewReader(`
oncebox:
  outbox:
    events:
      order-created: { polling: { multiplier: 0.5 } }
`))
	fmt.Println(err)
	// Output:
	// oncebox: config outbox.defaults.batch-sise: unknown key; did you mean batch-size? (line 5)
	// oncebox: config outbox.events.order-created.polling.multiplier: must be >= 1, got 0.5 (line 5)
}
