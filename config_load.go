package oncebox

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"go.yaml.in/yaml/v3"
)

// fileConfig is the shape of a configuration file: everything under a
// top-level "oncebox" key.
type fileConfig struct {
	Oncebox *Config `yaml:"oncebox"`
}

// LoadConfig reads a YAML or JSON document (JSON is a subset of YAML) whose
// top-level key is "oncebox", applies the defaults and validates the result.
// The keys are kebab-case: batch-size, min-fixed-delay, max-retries, …
// (docs/configuration.md lists them);
// durations are strings such as "250ms", "1m", "24h". An unknown or misspelled
// key is an error naming its line, never silently ignored.
func LoadConfig(r io.Reader) (Config, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return Config{}, fmt.Errorf("oncebox: read config: %w", err)
	}
	var fc fileConfig
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&fc); err != nil {
		if errors.Is(err, io.EOF) {
			return Config{}, fmt.Errorf("%w: the document is empty; it must have a top-level \"oncebox\" key", ErrInvalidConfig)
		}
		return Config{}, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	if fc.Oncebox == nil {
		return Config{}, fmt.Errorf("%w: the document has no top-level \"oncebox\" key", ErrInvalidConfig)
	}
	cfg := fc.Oncebox.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// LoadConfigFile is LoadConfig on the file at path; errors name the file.
func LoadConfigFile(path string) (Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return Config{}, fmt.Errorf("oncebox: open config: %w", err)
	}
	defer f.Close()
	cfg, err := LoadConfig(f)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}
