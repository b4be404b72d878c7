package oncebox_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
)

// requireNoGoNames fails when a configuration error leaks the Go side:
// a type, a package or the decoder's own wording.
func requireNoGoNames(t *testing.T, err error) {
	t.Helper()
	for _, leak := range []string{"oncebox.EventSettings", "fileConfig", "oncebox.Config", "time.Duration",
		"not found in type", "unmarshal", "!!str", "!!int", "float64"} {
		require.NotContains(t, err.Error(), leak)
	}
}

// requireLineErr checks that err holds a *FieldError on the line and with
// the text of want, written "line N: path: message" (the message may be
// cut short); Error() puts the line last: "path: message (line N)".
func requireLineErr(t *testing.T, err error, want string, msgAndArgs ...any) {
	t.Helper()
	var line int
	var rest string
	_, scanErr := fmt.Sscanf(want, "line %d:", &line)
	require.NoError(t, scanErr, "want %q", want)
	_, rest, _ = strings.Cut(want, ": ")
	require.ErrorContains(t, err, rest, msgAndArgs...)
	var found []string
	var walk func(error)
	walk = func(e error) {
		if fe, ok := e.(*oncebox.FieldError); ok {
			found = append(found, fe.Error())
			if fe.Line == line && strings.Contains(fe.Field+": "+fe.Message, rest) {
				require.True(t, strings.HasSuffix(fe.Error(), fmt.Sprintf(" (line %d)", line)), fe.Error())
				found = nil
				return
			}
		}
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				if walk(e); found == nil {
					return
				}
			}
		}
	}
	walk(err)
	require.Nil(t, found, "no error on line %d with %q", line, rest)
}

// An unknown key is named by its YAML path and line, with the closest
// known key; never by a Go type.
func TestLoadConfigUnknownKeySpeaksYAML(t *testing.T) {
	t.Parallel()
	for doc, want := range map[string]string{
		"oncebox:\n  outbox:\n    events:\n      order-placed:\n        topic: orders\n        batch-sise: 10\n": "line 6: outbox.events.order-placed.batch-sise: unknown key; did you mean batch-size?",
		"oncebox:\n  outbx: {}\n":                        "line 2: outbx: unknown key; did you mean outbox?",
		"oncebox:\n  tables:\n    shema: billing\n":      "line 3: tables.shema: unknown key; did you mean schema?",
		"oncebox:\n  outbox: {max-discoverd-types: 5}\n": "line 2: outbox.max-discoverd-types: unknown key; did you mean max-discovered-types?",
		"outbox: {}\n":            `line 1: outbox: unknown top-level key; the configuration goes under "oncebox:" (oncebox.outbox)`,
		"billing: {}\n":           "line 1: billing: unknown top-level key; the one key at the top level is oncebox",
		"oncebx:\n  outbox: {}\n": "line 1: oncebx: unknown top-level key; did you mean oncebox?",
		"oncebox:\n  outbox:\n    events:\n      a: { polling: { min-delay: 1s } }\n": "line 4: outbox.events.a.polling.min-delay: unknown key; the keys of outbox.events.a.polling are type, min-fixed-delay, max-fixed-delay, multiplier",
	} {
		_, err := oncebox.LoadConfig(strings.NewReader(doc))
		require.ErrorIs(t, err, oncebox.ErrInvalidConfig, doc)
		requireLineErr(t, err, want, doc)
		requireNoGoNames(t, err)
		var fe *oncebox.FieldError
		require.ErrorAs(t, err, &fe, doc)
		require.NotZero(t, fe.Line, doc)
	}
}

// A value of the wrong type names its path, its line and the value.
func TestLoadConfigTypeErrorsNamePathLineAndValue(t *testing.T) {
	t.Parallel()
	for doc, want := range map[string]string{
		"oncebox:\n  outbox:\n    max-batch-processing-time: soon\n":      `line 3: outbox.max-batch-processing-time: "soon" is not a duration`,
		"oncebox:\n  outbox:\n    defaults:\n      batch-size: ten\n":     `line 4: outbox.defaults.batch-size: "ten" is not a whole number`,
		"oncebox:\n  outbox:\n    defaults:\n      batch-size: 1e99\n":    `line 4: outbox.defaults.batch-size: "1e99" is not a whole number`,
		"oncebox:\n  outbox:\n    dlq: {enabled: maybe}\n":                `line 3: outbox.dlq.enabled: "maybe" is not true or false`,
		"oncebox:\n  outbox:\n    defaults: {polling: {multiplier: x}}\n": `line 3: outbox.defaults.polling.multiplier: "x" is not a number`,
		"oncebox:\n  outbox:\n    defaults: {polling: 5}\n":               `line 3: outbox.defaults.polling: must be a mapping of keys (type, min-fixed-delay, max-fixed-delay, multiplier), got "5"`,
		"oncebox:\n  outbox:\n    defaults: {topic: [a, b]}\n":            `line 3: outbox.defaults.topic: must be a single value, got a list`,
		"oncebox:\n  outbox:\n    defaults: {max-retries: {a: 1}}\n":      `line 3: outbox.defaults.max-retries: must be a single value, got a mapping`,
		"oncebox:\n  tables: [x]\n":                                       `line 2: tables: must be a mapping of keys (schema, prefix), got a list`,
		"oncebox: 7\n":                                                    `line 1: oncebox: must be a mapping of keys`,
	} {
		_, err := oncebox.LoadConfig(strings.NewReader(doc))
		require.ErrorIs(t, err, oncebox.ErrInvalidConfig, doc)
		requireLineErr(t, err, want, doc)
		requireNoGoNames(t, err)
	}
}

// A numeric key written as 0 is out of its documented range: 0 is how Go
// says "unset", but in a file it is a value someone wrote. thread-pool-size
// documents 0 (2 + n) and max-retries is a count where 0 means one attempt.
func TestLoadConfigRefusesAWrittenZero(t *testing.T) {
	t.Parallel()
	for doc, want := range map[string]string{
		"outbox:\n    defaults:\n      batch-size: 0\n":             "line 4: outbox.defaults.batch-size: 0 is out of range (1 to 10,000)",
		"outbox:\n    events:\n      a: {batch-size: 0}\n":          "line 4: outbox.events.a.batch-size: 0 is out of range (1 to 10,000)",
		"outbox:\n    clean-up: {batch-size: 0}\n":                  "line 3: outbox.clean-up.batch-size: 0 is out of range (1 to 10,000)",
		"outbox:\n    max-discovered-types: 0\n":                    "line 3: outbox.max-discovered-types: 0 is out of range (1 to 999)",
		"outbox:\n    defaults: {polling: {min-fixed-delay: 0s}}\n": "line 3: outbox.defaults.polling.min-fixed-delay: 0 is out of range (at least 1ms)",
		"outbox:\n    defaults: {backoff: {multiplier: 0}}\n":       "line 3: outbox.defaults.backoff.multiplier: 0 is out of range (at least 1, finite)",
		"outbox:\n    max-payload-size: 0\n":                        "line 3: outbox.max-payload-size: 0 is out of range (more than 0)",
		"inbox:\n    cache: {size: 0}\n":                            "line 3: inbox.cache.size: 0 is out of range (more than 0)",
		"inbox:\n    clean-up: {ttl: 0s}\n":                         "line 3: inbox.clean-up.ttl: 0 is out of range (more than 0)",
	} {
		_, err := oncebox.LoadConfig(strings.NewReader("oncebox:\n  " + doc))
		require.ErrorIs(t, err, oncebox.ErrInvalidConfig, doc)
		requireLineErr(t, err, want, doc)
		require.ErrorContains(t, err, "leave the key out", doc)
	}
	cfg, err := oncebox.LoadConfig(strings.NewReader("oncebox:\n  thread-pool-size: 0\n  outbox:\n    defaults: {max-retries: 0}\n  inbox:\n    retry: {max-retries: 0}\n"))
	require.NoError(t, err)
	require.Equal(t, 0, cfg.MaxConcurrentQueries)
	require.Equal(t, 0, *cfg.Outbox.Defaults.MaxRetries)
}

// Validate's errors carry the line of the key they are about when the
// configuration came from a file.
func TestLoadConfigValidationErrorsCarryTheLine(t *testing.T) {
	t.Parallel()
	_, err := oncebox.LoadConfig(strings.NewReader("oncebox:\n  outbox:\n    events:\n      order-created:\n        polling: { multiplier: 0.5 }\n"))
	require.ErrorContains(t, err, "oncebox: config outbox.events.order-created.polling.multiplier: must be >= 1, got 0.5 (line 5)")
	var fe *oncebox.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, 5, fe.Line)
}

// A control character in an event type or a topic is refused when the
// configuration is loaded or validated: PostgreSQL refuses a NUL in text,
// and the failed insert aborts the caller's business transaction.
func TestConfigRefusesControlCharactersInNames(t *testing.T) {
	t.Parallel()
	for doc, want := range map[string]string{
		"outbox:\n    events:\n      \"order\\0placed\": {}\n":    `line 4: outbox.events."order\x00placed": event type contains the control character U+0000 at byte 5`,
		"outbox:\n    events:\n      a: {topic: \"or\\0ders\"}\n": `line 4: outbox.events.a.topic: contains the control character U+0000 at byte 2`,
		"outbox:\n    defaults: {topic: \"x\\ty\"}\n":             `line 3: outbox.defaults.topic: contains the control character U+0009 at byte 1`,
		"outbox:\n    events:\n      \"a\\x7f\": {}\n":            `line 4: outbox.events."a\x7f": event type contains the control character U+007F at byte 1`,
		"outbox:\n    events:\n      \"a\\u0085b\": {}\n":         `line 4: outbox.events."a\u0085b": event type contains the control character U+0085 at byte 1`,
	} {
		_, err := oncebox.LoadConfig(strings.NewReader("oncebox:\n  " + doc))
		require.ErrorIs(t, err, oncebox.ErrInvalidConfig, doc)
		requireLineErr(t, err, want, doc)
	}
	c := oncebox.Config{}.WithDefaults()
	c.Outbox.Events = map[string]oncebox.EventSettings{"a\x00": {}, "b": {Topic: "t\x00"}, "c": {Topic: "\xff"}}
	err := c.Validate()
	require.ErrorContains(t, err, `outbox.events."a\x00": event type contains the control character U+0000 at byte 1`)
	require.ErrorContains(t, err, `outbox.events.b.topic: contains the control character U+0000 at byte 1`)
	require.ErrorContains(t, err, `outbox.events.c.topic: is not valid UTF-8`)
	ec := mustEvent(t, "ok")
	ec.EventType = "o\x00k"
	require.ErrorContains(t, ec.Validate(), "control character U+0000")
	// Printable names, dots and non-ASCII letters stay valid.
	c.Outbox.Events = map[string]oncebox.EventSettings{"billing.invoice-paid": {Topic: "facturación"}}
	require.NoError(t, c.Validate())
}

// A key repeated in one mapping is one short error naming the first
// repeat and both lines, found in one pass: yaml.v3's own check reports
// every pair (n²/2 lines: 108 MB for 2,000 repeats).
func TestLoadConfigDuplicateKeysOneShortError(t *testing.T) {
	// Not parallel: the measure is the process's allocation counter.
	_, err := oncebox.LoadConfig(strings.NewReader("oncebox:\n  outbox:\n    defaults:\n      batch-size: 5\n      topic: t\n      batch-size: 6\n"))
	require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
	requireLineErr(t, err, "line 6: outbox.defaults.batch-size: repeated key (first at line 4)")

	for _, n := range []int{2_000, 100_000} {
		doc := "oncebox: {outbox: {events: {" + strings.Repeat("a: {}, ", n) + "}}}\n"
		require.Less(t, len(doc), oncebox.MaxConfigSize)
		var err error
		bytes := allocatedBytes(func() { _, err = oncebox.LoadConfig(strings.NewReader(doc)) })
		require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
		require.ErrorContains(t, err, "outbox.events.a: repeated key (first at column 29, repeated at column 36)")
		require.Less(t, len(err.Error()), 200, "one short error, not one per pair")
		// Linear: the node tree is ~300 bytes a key; a quadratic pass over
		// 100,000 keys allocates gigabytes.
		t.Logf("%d repeats: %d bytes", n, bytes)
		require.Less(t, bytes, uint64(2_000*n), "%d repeats", n)
	}
}

// Validation is linear in the number of event types: it used to copy the
// whole events map once per type (3,000 types: 1.8 GB per LoadConfig;
// 8,000: 19 GB). Measured in bytes allocated, not in time.
func TestValidateIsLinearInEventTypes(t *testing.T) {
	// Not parallel: the measure is the process's allocation counter.
	const n = 8_000
	var b strings.Builder
	b.WriteString("oncebox:\n  outbox:\n    events:\n")
	for i := range n {
		fmt.Fprintf(&b, "      type-%d: {topic: t-%d, batch-size: 10}\n", i, i)
	}
	var cfg oncebox.Config
	var err error
	loaded := allocatedBytes(func() { cfg, err = oncebox.LoadConfig(strings.NewReader(b.String())) })
	require.NoError(t, err)
	require.Len(t, cfg.EventTypes(), n)
	validated := allocatedBytes(func() { err = cfg.Validate() })
	require.NoError(t, err)
	t.Logf("%d types: LoadConfig %d bytes, Validate %d bytes", n, loaded, validated)
	// Generous bounds: about 10 KB a type to load (the node tree, the
	// lines of the keys) and 2 KB a type to validate. The quadratic
	// validation allocated about 2.4 MB a type.
	require.Less(t, loaded, uint64(10_000*n), "LoadConfig of %d types", n)
	require.Less(t, validated, uint64(2_000*n), "Validate of %d types", n)
}

// allocatedBytes returns the bytes allocated while f runs (by the whole
// process: keep the test that calls it out of t.Parallel).
func allocatedBytes(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// infinite is a reader that never ends.
type infinite struct{}

func (infinite) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '#'
	}
	return len(p), nil
}

// LoadConfig reads at most MaxConfigSize (1 MiB) and refuses a larger
// document; LoadConfigFile refuses a larger file before reading it.
func TestLoadConfigRefusesDocumentsOver1MiB(t *testing.T) {
	t.Parallel()
	big := "oncebox: {}\n" + strings.Repeat("# comment\n", oncebox.MaxConfigSize/10)
	_, err := oncebox.LoadConfig(strings.NewReader(big))
	require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
	require.ErrorContains(t, err, "over 1 MiB")
	_, err = oncebox.LoadConfig(io.MultiReader(strings.NewReader("oncebox: {}\n"), infinite{}))
	require.ErrorContains(t, err, "over 1 MiB")

	path := filepath.Join(t.TempDir(), "big.yaml")
	require.NoError(t, os.WriteFile(path, []byte(big), 0o600))
	_, err = oncebox.LoadConfigFile(path)
	require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
	require.ErrorContains(t, err, path)
	require.ErrorContains(t, err, "over 1 MiB")

	exact := "oncebox: {}\n" + strings.Repeat("#", oncebox.MaxConfigSize-13) + "\n"
	require.Len(t, exact, oncebox.MaxConfigSize)
	_, err = oncebox.LoadConfig(strings.NewReader(exact))
	require.NoError(t, err, "1 MiB exactly is accepted")
}

// LoadConfigFile refuses what is not a regular file, naming it, instead
// of blocking on a FIFO or reading /dev/zero for ever.
func TestLoadConfigFileRefusesNonRegularFiles(t *testing.T) {
	t.Parallel()
	paths := []string{t.TempDir()}
	if _, err := os.Stat("/dev/zero"); err == nil {
		paths = append(paths, "/dev/zero")
	}
	if fifo, ok := makeFIFO(t); ok {
		paths = append(paths, fifo)
	}
	for _, path := range paths {
		done := make(chan error, 1)
		go func() {
			_, err := oncebox.LoadConfigFile(path)
			done <- err
		}()
		var err error
		select {
		case err = <-done:
		case <-time.After(time.Minute): // a guard, not a pace: the bug blocked for ever
			t.Fatalf("LoadConfigFile(%s) still blocked after a minute", path)
		}
		require.ErrorIs(t, err, oncebox.ErrInvalidConfig, path)
		require.ErrorContains(t, err, path)
		require.ErrorContains(t, err, "not a regular file", path)
	}
	_, err := oncebox.LoadConfigFile(filepath.Join(t.TempDir(), "missing.yaml"))
	require.Error(t, err)
	require.False(t, errors.Is(err, oncebox.ErrInvalidConfig), "a missing file is not an invalid configuration")
	require.ErrorContains(t, err, "missing.yaml")
}

// Anchors, aliases and merge keys decode as yaml.v3 decodes them: a merged
// mapping's keys are overridden by the mapping's own, and no key is
// reported as repeated for being both merged and written.
func TestLoadConfigAnchorsAndMergeKeys(t *testing.T) {
	t.Parallel()
	cfg, err := oncebox.LoadConfig(strings.NewReader(`
oncebox:
  outbox:
    defaults: &base {batch-size: 50, polling: {type: fixed, min-fixed-delay: 2s}}
    events:
      a: {<<: *base, batch-size: 70}
      b: *base
      c: {<<: [{topic: first}, {topic: second, batch-size: 9}]}
`))
	require.NoError(t, err)
	a, err := cfg.Event("a")
	require.NoError(t, err)
	require.Equal(t, 70, a.BatchSize)
	require.Equal(t, oncebox.PollingFixed, a.Polling.Type)
	require.Equal(t, 2*time.Second, a.Polling.MinFixedDelay)
	b, err := cfg.Event("b")
	require.NoError(t, err)
	require.Equal(t, 50, b.BatchSize)
	c, err := cfg.Event("c")
	require.NoError(t, err)
	require.Equal(t, "first", c.Topic, "the first mapping of a merge list wins")
	require.Equal(t, 9, c.BatchSize)

	// Null values leave a key to its default; max-retries: ~ inherits.
	cfg, err = oncebox.LoadConfig(strings.NewReader("oncebox:\n  outbox:\n    defaults: {batch-size: ~, max-retries: null}\n    events: ~\n"))
	require.NoError(t, err)
	require.Equal(t, oncebox.DefaultBatchSize, cfg.Outbox.Defaults.BatchSize)
	require.Equal(t, oncebox.DefaultMaxRetries, *cfg.Outbox.Defaults.MaxRetries)
	_, err = oncebox.LoadConfig(strings.NewReader("oncebox:\n  outbox:\n    events: {~: {}}\n"))
	requireLineErr(t, err, `line 3: outbox.events."": event type must be 1 to 255 characters`)
	_, err = oncebox.LoadConfig(strings.NewReader("oncebox:\n"))
	requireLineErr(t, err, `line 1: oncebox: is empty; write "oncebox: {}" to take every default`)
	_, err = oncebox.LoadConfig(strings.NewReader("oncebox:\n  outbox: {<<: 5}\n"))
	requireLineErr(t, err, `line 2: outbox: << must merge a mapping, got "5"`)
}

// Aliases that expand exponentially (the "billion laughs") stop at a
// bound instead of running for ever.
func TestLoadConfigBoundsAliasExpansion(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("x0: &x0 {topic: a}\n")
	for i := 1; i < 10; i++ {
		fmt.Fprintf(&b, "x%d: &x%d {<<: [%s]}\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*x%d, ", i-1), 10), ", "))
	}
	doc := "anchors:\n" + indent(b.String()) + "oncebox:\n  outbox:\n    events:\n      t: *x9\n"
	_, err := oncebox.LoadConfig(strings.NewReader(doc))
	require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
	require.ErrorContains(t, err, "aliases expand to more than")
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n  ") + "\n"
}

// A document of a thousand unknown keys gets a bounded error: the first
// twenty and a count of the rest.
func TestLoadConfigBoundsTheErrors(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("oncebox:\n  outbox:\n    defaults:\n")
	for i := range 1000 {
		fmt.Fprintf(&b, "      key-%d: 1\n", i)
	}
	_, err := oncebox.LoadConfig(strings.NewReader(b.String()))
	require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
	require.ErrorContains(t, err, "outbox.defaults.key-0: unknown key")
	require.ErrorContains(t, err, "and 980 more errors")
	require.Less(t, len(err.Error()), 8_000)
	requireNoGoNames(t, err)
}
