package oncebox

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// MaxConfigSize is the largest configuration document LoadConfig and
// LoadConfigFile read: 1 MiB. A service's configuration is a few
// kilobytes; 8,000 event types take about 400 KB.
const MaxConfigSize = 1 << 20

// maxLoadErrors bounds the errors one LoadConfig reports about the keys and
// values of a document; the rest are counted.
const maxLoadErrors = 20

// maxNodeVisits bounds the nodes the decoder visits, aliases included: a
// document of 1 MiB has fewer than a million nodes, and an alias of an
// alias of … (the "billion laughs") must not expand without end.
const maxNodeVisits = 4 << 20

// LoadConfig reads a YAML or JSON document (JSON is a subset of YAML) whose
// top-level key is "oncebox", applies the defaults and validates the result.
// The keys are kebab-case: batch-size, min-fixed-delay, max-retries, …
// (docs/configuration.md lists them);
// durations are strings such as "250ms", "1m", "24h".
//
// Errors name the key by its YAML path and line
// ("line 6: outbox.events.order-placed.batch-sise: unknown key; did you
// mean batch-size?"), a wrong value by its path, line and value; they are
// *FieldError values wrapping ErrInvalidConfig. An unknown or misspelled
// key, a key repeated in one mapping, a 0 written for a setting whose range
// excludes it (0 means "default" only when the key is left out), and a
// document over MaxConfigSize are refused. Decoding is linear in the size
// of the document.
func LoadConfig(r io.Reader) (Config, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxConfigSize+1))
	if err != nil {
		return Config{}, fmt.Errorf("oncebox: read config: %w", err)
	}
	if len(data) > MaxConfigSize {
		return Config{}, fmt.Errorf("%w: the document is over 1 MiB (oncebox.MaxConfigSize); a configuration is a few kilobytes", ErrInvalidConfig)
	}
	return loadConfig(data)
}

// LoadConfigFile is LoadConfig on the file at path; errors name the file.
// It refuses what is not a regular file (a directory, a FIFO, a device
// such as /dev/zero) and a file over MaxConfigSize before reading it, and
// reads at most MaxConfigSize+1 bytes even if the file grows meanwhile.
func LoadConfigFile(path string) (Config, error) {
	if err := checkConfigFile(path, os.Stat); err != nil {
		return Config{}, err
	}
	// O_NONBLOCK: had the path been replaced by a FIFO since the Stat,
	// opening it would wait for a writer; this way it opens at once and
	// the check on the open file below refuses it. Reading a regular file
	// ignores the flag.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return Config{}, fmt.Errorf("oncebox: open config: %w", err)
	}
	defer f.Close()
	if err := checkConfigFile(path, func(string) (os.FileInfo, error) { return f.Stat() }); err != nil {
		return Config{}, err
	}
	cfg, err := LoadConfig(f)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// checkConfigFile refuses a path that is not a regular file of at most
// MaxConfigSize bytes.
func checkConfigFile(path string, stat func(string) (os.FileInfo, error)) error {
	fi, err := stat(path)
	if err != nil {
		return fmt.Errorf("oncebox: open config: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: %w: not a regular file (%s); give the path of a YAML file", path, ErrInvalidConfig, describeMode(fi.Mode()))
	}
	if fi.Size() > MaxConfigSize {
		return fmt.Errorf("%s: %w: the file is %d bytes, over 1 MiB (oncebox.MaxConfigSize); a configuration is a few kilobytes",
			path, ErrInvalidConfig, fi.Size())
	}
	return nil
}

func describeMode(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return "mode " + m.String()
}

// loadConfig decodes data in two steps: the YAML parser builds a node tree
// (linear, and it checks no duplicates: yaml.v3's check while decoding
// into a struct compares every pair of keys and reports each repeat), then
// decodeNode walks the tree against Config, checking each key once.
func loadConfig(data []byte) (Config, error) {
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return Config{}, fmt.Errorf("%w: the document is empty; it must have a top-level \"oncebox\" key", ErrInvalidConfig)
		}
		// The parser's errors name a line and no Go type
		// ("yaml: line 3: mapping values are not allowed in this context").
		return Config{}, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	d := &configDecoder{lines: map[string]int{}, budget: maxNodeVisits}
	var cfg Config
	found := d.root(&doc, &cfg)
	if err := d.err(); err != nil {
		return Config{}, err
	}
	if !found {
		return Config{}, fmt.Errorf("%w: the document has no top-level \"oncebox\" key", ErrInvalidConfig)
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		d.addLines(err)
		return Config{}, err
	}
	return cfg, nil
}

// configDecoder decodes a YAML node tree into a Config by reflection over
// the yaml tags, naming every problem by its YAML path and line.
type configDecoder struct {
	errs    []error
	dropped int
	// lines maps the YAML path of every key read to its line, for the
	// errors of Validate.
	lines  map[string]int
	budget int
	// stop is set by a repeated key or an exhausted budget: one error is
	// enough, and going on could cost as much as the bug it reports.
	stop bool
}

func (d *configDecoder) fail(line int, path, format string, args ...any) {
	if len(d.errs) >= maxLoadErrors {
		d.dropped++
		return
	}
	d.errs = append(d.errs, &FieldError{Field: path, Line: line, Message: fmt.Sprintf(format, args...)})
}

func (d *configDecoder) err() error {
	if d.dropped > 0 {
		d.errs = append(d.errs, fmt.Errorf("%w: and %d more errors", ErrInvalidConfig, d.dropped))
	}
	return errors.Join(d.errs...)
}

// addLines sets the line of each FieldError of err (as Validate returns
// them, joined) from the path of its field, or of its closest ancestor
// that the document wrote.
func (d *configDecoder) addLines(err error) {
	var fe *FieldError
	if errors.As(err, &fe) && fe.Line == 0 {
		for p := fe.Field; p != ""; {
			if line, ok := d.lines[p]; ok {
				fe.Line = line
				break
			}
			i := strings.LastIndexByte(p, '.')
			if i < 0 {
				break
			}
			p = p[:i]
		}
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			d.addLines(e)
		}
	}
}

// root decodes the document's top-level mapping; it reports whether the
// "oncebox" key was there.
func (d *configDecoder) root(doc *yaml.Node, cfg *Config) bool {
	n := doc
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	n = d.deref(n)
	if n == nil || d.stop {
		return false
	}
	if isNull(n) {
		return false
	}
	if n.Kind != yaml.MappingNode {
		d.fail(n.Line, "(document)", "must be a mapping with a top-level \"oncebox\" key, got %s", describeNode(n))
		return false
	}
	found := false
	d.mapping(n, "", func(k, v *yaml.Node) {
		if k.Value != "oncebox" {
			if _, ok := yamlFields(reflect.TypeFor[Config]())[k.Value]; ok {
				d.fail(k.Line, displayKey(k.Value), "unknown top-level key; the configuration goes under \"oncebox:\" (oncebox.%s)", k.Value)
			} else {
				d.fail(k.Line, displayKey(k.Value), "unknown top-level key%s", suggest(k.Value, []string{"oncebox"}, "at the top level"))
			}
			return
		}
		found = true
		v = d.deref(v)
		if v == nil {
			return
		}
		if isNull(v) {
			d.fail(k.Line, "oncebox", "is empty; write \"oncebox: {}\" to take every default")
			return
		}
		d.value(v, k.Line, "", reflect.ValueOf(cfg).Elem(), false)
	})
	return found
}

// deref follows aliases, counting every node against the budget.
func (d *configDecoder) deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	d.budget--
	if d.budget < 0 {
		if !d.stop {
			d.stop = true
			line := 0
			if n != nil {
				line = n.Line
			}
			d.fail(line, "(document)", "aliases expand to more than %d nodes", maxNodeVisits)
		}
		return nil
	}
	return n
}

// mapping calls set for each key of n, merged keys ("<<: *anchor") first so
// that the mapping's own keys override them. A key repeated in n itself is
// an error that stops the decoding: it is found with one map, in one pass.
func (d *configDecoder) mapping(n *yaml.Node, path string, set func(k, v *yaml.Node)) {
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merges = append(merges, n.Content[i+1])
		}
	}
	for _, m := range merges {
		m = d.deref(m)
		if m == nil {
			return
		}
		sources := []*yaml.Node{m}
		if m.Kind == yaml.SequenceNode {
			// Earlier mappings of a merge list override later ones.
			sources = sources[:0]
			for i := len(m.Content) - 1; i >= 0; i-- {
				sources = append(sources, m.Content[i])
			}
		}
		for _, s := range sources {
			if s = d.deref(s); s == nil || d.stop {
				return
			}
			if s.Kind != yaml.MappingNode {
				d.fail(s.Line, pathOr(path), "<< must merge a mapping, got %s", describeNode(s))
				continue
			}
			d.mapping(s, path, set)
		}
	}
	seen := make(map[string]*yaml.Node, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content) && !d.stop; i += 2 {
		k := d.deref(n.Content[i])
		if k == nil {
			return
		}
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			continue
		}
		if k.Kind != yaml.ScalarNode {
			d.fail(k.Line, pathOr(path), "a key must be a single value, got %s", describeNode(k))
			continue
		}
		if first, ok := seen[k.Value]; ok {
			where := fmt.Sprintf("line %d", first.Line)
			if first.Line == k.Line {
				where = fmt.Sprintf("column %d, repeated at column %d", first.Column, k.Column)
			}
			d.fail(k.Line, join(path, displayKey(k.Value)), "repeated key (first at %s); a key may appear once in a mapping", where)
			d.stop = true
			return
		}
		seen[k.Value] = k
		set(k, n.Content[i+1])
	}
}

// value decodes n, the value of the key at path written on line, into v.
func (d *configDecoder) value(n *yaml.Node, line int, path string, v reflect.Value, zeroAllowed bool) {
	if n = d.deref(n); n == nil || d.stop {
		return
	}
	if path != "" {
		d.lines[path] = line
	}
	if isNull(n) {
		v.SetZero()
		return
	}
	switch {
	case v.Kind() == reflect.Struct:
		fields := yamlFields(v.Type())
		if n.Kind != yaml.MappingNode {
			d.fail(line, pathOr(path), "must be a mapping of keys (%s), got %s", strings.Join(fieldNames(v.Type()), ", "), describeNode(n))
			return
		}
		d.mapping(n, path, func(k, val *yaml.Node) {
			i, ok := fields[k.Value]
			if !ok {
				where := "here"
				if path != "" {
					where = "of " + path
				}
				d.fail(k.Line, join(path, displayKey(k.Value)), "unknown key%s", suggest(k.Value, fieldNames(v.Type()), where))
				return
			}
			name := k.Value
			// 0 is documented for thread-pool-size (2 + n connections).
			d.value(val, k.Line, join(path, name), v.Field(i), path == "" && name == "thread-pool-size")
		})
	case v.Kind() == reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.fail(line, pathOr(path), "must be a mapping of event types to their settings, got %s", describeNode(n))
			return
		}
		if v.IsNil() {
			v.Set(reflect.MakeMapWithSize(v.Type(), len(n.Content)/2))
		}
		d.mapping(n, path, func(k, val *yaml.Node) {
			name := k.Value
			if isNull(k) {
				name = "" // "~:" names no type; Validate says so
			}
			key := reflect.ValueOf(name)
			// A fresh value, as yaml.v3 decodes a map: an event type written
			// here replaces one merged from an anchor, it is not merged
			// into it.
			elem := reflect.New(v.Type().Elem()).Elem()
			d.value(val, k.Line, eventPath(name), elem, false)
			v.SetMapIndex(key, elem)
		})
	case v.Kind() == reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		// A pointer is how a setting whose 0 means something is written
		// (max-retries: 0 is one attempt).
		d.value(n, line, path, v.Elem(), true)
	default:
		d.scalar(n, line, path, v, zeroAllowed)
	}
}

// scalar decodes a single value, naming its path, line and value when it
// is not of the setting's kind.
func (d *configDecoder) scalar(n *yaml.Node, line int, path string, v reflect.Value, zeroAllowed bool) {
	if n.Kind != yaml.ScalarNode {
		d.fail(line, path, "must be a single value, got %s", describeNode(n))
		return
	}
	if err := n.Decode(v.Addr().Interface()); err != nil {
		d.fail(n.Line, path, "%s is not %s", quoteValue(n.Value), describeKind(v.Type()))
		return
	}
	if !zeroAllowed && v.IsZero() && v.Kind() != reflect.String && v.Kind() != reflect.Bool {
		d.fail(n.Line, path, "0 is out of range (%s); leave the key out to take the default", zeroRange(path))
	}
}

// zeroRange is the documented range of the numeric setting at path
// (docs/configuration.md), for the error about a 0 written in the file.
func zeroRange(path string) string {
	key := path[strings.LastIndexByte(path, '.')+1:]
	switch key {
	case "batch-size":
		return fmt.Sprintf("1 to %s", "10,000")
	case "max-discovered-types":
		return fmt.Sprintf("1 to %d", MaxDiscoveredTypesLimit)
	case "min-fixed-delay", "max-fixed-delay", "delay", "initial-interval", "max-interval":
		return "at least " + MinDelay.String()
	case "multiplier":
		return "at least 1, finite"
	}
	return "more than 0"
}

// yamlFields maps the yaml keys of a struct type to its field indexes.
func yamlFields(t reflect.Type) map[string]int {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]int)
	}
	m := map[string]int{}
	for i := range t.NumField() {
		if name := yamlName(t.Field(i)); name != "" {
			m[name] = i
		}
	}
	fieldCache.Store(t, m)
	return m
}

var fieldCache sync.Map // reflect.Type → map[string]int

// fieldNames lists the yaml keys of a struct type in declaration order.
func fieldNames(t reflect.Type) []string {
	names := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		if name := yamlName(t.Field(i)); name != "" {
			names = append(names, name)
		}
	}
	return names
}

func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "-" {
		return ""
	}
	return name
}

// suggest returns "; did you mean X?" with the known key closest to key (in
// edit distance), or the list of the keys of where when none is close.
func suggest(key string, known []string, where string) string {
	best, bestD := "", -1
	if len(key) <= 64 {
		for _, k := range known {
			if dist := editDistance(key, k); bestD < 0 || dist < bestD {
				best, bestD = k, dist
			}
		}
	}
	if bestD >= 0 && bestD <= max(2, len(best)/4) {
		return "; did you mean " + best + "?"
	}
	if where == "" {
		return ""
	}
	if len(known) == 1 {
		return "; the one key " + where + " is " + known[0]
	}
	return "; the keys " + where + " are " + strings.Join(known, ", ")
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

func describeNode(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return quoteValue(n.Value)
	}
	return "nothing"
}

// describeKind says what a setting of type t is, in the file's terms.
func describeKind(t reflect.Type) string {
	if t == reflect.TypeFor[time.Duration]() {
		return "a duration; write a number and a unit: 250ms, 1m, 24h"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "a whole number (or it is too large)"
	case reflect.Float64, reflect.Float32:
		return "a number"
	case reflect.Bool:
		return "true or false"
	}
	return "text"
}

// quoteValue quotes a value of the document for an error, cut to 60 bytes.
func quoteValue(s string) string {
	const limit = 60
	if len(s) > limit {
		cut := limit
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return fmt.Sprintf("%q… (%d bytes)", s[:cut], len(s))
	}
	return fmt.Sprintf("%q", s)
}

// displayKey is a key as a path names it: as written when it is plain,
// quoted when it is empty, holds a control character or invalid UTF-8, cut when
// longer than an event type may be.
func displayKey(k string) string {
	if k != "" && len(k) <= MaxEventTypeLength && checkName(k) == "" {
		return k
	}
	return quoteValue(k)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func pathOr(path string) string {
	if path == "" {
		return "oncebox"
	}
	return path
}
