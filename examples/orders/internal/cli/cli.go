// Package cli holds what the commands of the orders example share: flags
// whose default comes from an environment variable, the logger, and where
// to find oncebox.yaml.
//
// Precedence is the usual one: a flag given on the command line wins, then
// the environment variable, then the built-in default.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/examples/orders/internal/events"
)

// Defaults shared by the commands.
const (
	// DefaultDatabaseURL is the PostgreSQL of a development machine.
	DefaultDatabaseURL = "postgres://root@127.0.0.1:5432/test?sslmode=disable"
	// DefaultAMQPURL is a local RabbitMQ with its default user.
	DefaultAMQPURL = "amqp://guest:guest@127.0.0.1:5672/"
	// DefaultBroker is the broker used when neither -broker nor $BROKER is set.
	DefaultBroker = "kafka"
)

// FlagSet is a flag.FlagSet whose flags take their default from an
// environment variable. A malformed environment value is reported by Parse,
// naming the variable, instead of being silently ignored.
type FlagSet struct {
	*flag.FlagSet
	envErrs []error
}

// NewFlagSet returns a FlagSet for the command name that reports errors
// (and -h) on output.
func NewFlagSet(name string, output io.Writer) *FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(output)
	return &FlagSet{FlagSet: fs}
}

func usage(text, env string) string {
	if env == "" {
		return text
	}
	return text + " ($" + env + ")"
}

// String defines a string flag whose default is $env, or def when $env is
// empty or unset.
func (f *FlagSet) String(name, env, def, text string) *string {
	if v := os.Getenv(env); env != "" && v != "" {
		def = v
	}
	return f.FlagSet.String(name, def, usage(text, env))
}

// Int defines an int flag with a default from $env.
func (f *FlagSet) Int(name, env string, def int, text string) *int {
	if v := os.Getenv(env); env != "" && v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			f.envErrs = append(f.envErrs, fmt.Errorf("$%s=%q: not an integer", env, v))
		} else {
			def = n
		}
	}
	return f.FlagSet.Int(name, def, usage(text, env))
}

// Float64 defines a float flag with a default from $env.
func (f *FlagSet) Float64(name, env string, def float64, text string) *float64 {
	if v := os.Getenv(env); env != "" && v != "" {
		x, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			f.envErrs = append(f.envErrs, fmt.Errorf("$%s=%q: not a number", env, v))
		} else {
			def = x
		}
	}
	return f.FlagSet.Float64(name, def, usage(text, env))
}

// Duration defines a duration flag with a default from $env ("15s", "2m").
func (f *FlagSet) Duration(name, env string, def time.Duration, text string) *time.Duration {
	if v := os.Getenv(env); env != "" && v != "" {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil {
			f.envErrs = append(f.envErrs, fmt.Errorf("$%s=%q: not a duration (examples: 500ms, 15s, 2m)", env, v))
		} else {
			def = d
		}
	}
	return f.FlagSet.Duration(name, def, usage(text, env))
}

// Bool defines a boolean flag with a default from $env (1, true, 0, false…).
func (f *FlagSet) Bool(name, env string, def bool, text string) *bool {
	if v := os.Getenv(env); env != "" && v != "" {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			f.envErrs = append(f.envErrs, fmt.Errorf("$%s=%q: not a boolean (true or false)", env, v))
		} else {
			def = b
		}
	}
	return f.FlagSet.Bool(name, def, usage(text, env))
}

// Parse parses args and returns the malformed environment variables and the
// command-line errors. flag.ErrHelp is returned as it is for -h. Positional
// arguments are refused: every command takes flags only.
func (f *FlagSet) Parse(args []string) error {
	if err := f.FlagSet.Parse(args); err != nil {
		return err
	}
	errs := f.envErrs
	if f.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected argument %q: this command takes flags only (-h lists them)", f.Arg(0)))
	}
	return errors.Join(errs...)
}

// SplitList splits a comma-separated list, dropping empty items and spaces.
func SplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// NewLogger returns a text logger on w at level ("debug", "info", "warn",
// "error") and its Watermill adapter.
func NewLogger(w io.Writer, level string) (*slog.Logger, watermill.LoggerAdapter, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, nil, fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	logger := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))
	return logger, watermill.NewSlogLogger(logger), nil
}

// ConfigCandidates are the places DefaultConfigPath looks for oncebox.yaml:
// the working directory (the services' image, or `cd examples/orders`) and
// the example's directory seen from the repository root.
var ConfigCandidates = []string{"oncebox.yaml", "examples/orders/oncebox.yaml"}

// DefaultConfigPath returns $ONCEBOX_CONFIG, or the first of
// ConfigCandidates that exists, or "oncebox.yaml" (whose absence the loader
// then reports).
func DefaultConfigPath() string {
	if p := os.Getenv("ONCEBOX_CONFIG"); p != "" {
		return p
	}
	for _, p := range ConfigCandidates {
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	return "oncebox.yaml"
}

// Exit codes of the commands.
const (
	// ExitFailure: the run failed (a service could not start, the check
	// found a loss or a double).
	ExitFailure = 1
	// ExitUsage: bad flags or configuration.
	ExitUsage = 2
)

// Fatal prints err on stderr with the command's name and exits with code.
func Fatal(name string, code int, err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
	os.Exit(code)
}

// LoadOncebox loads the oncebox configuration at path and, when topic is
// not empty, sends the order-created events to topic instead of the file's
// topic. It returns the configuration and the topic in force.
func LoadOncebox(path, topic string) (oncebox.Config, string, error) {
	cfg, err := oncebox.LoadConfigFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			err = fmt.Errorf("%w (looked in %s; give the file with -config or $ONCEBOX_CONFIG)", err, strings.Join(ConfigCandidates, ", "))
		}
		return oncebox.Config{}, "", err
	}
	cfg = events.WithTopic(cfg, topic)
	t, err := events.Topic(cfg)
	if err != nil {
		return oncebox.Config{}, "", fmt.Errorf("%s: %w", path, err)
	}
	return cfg, t, nil
}
