package cli

import (
	"errors"
	"flag"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestFlagsTakeTheirDefaultFromTheEnvironment(t *testing.T) {
	t.Setenv("T_STR", "from-env")
	t.Setenv("T_INT", "7")
	t.Setenv("T_DUR", "3s")
	t.Setenv("T_FLOAT", "0.25")
	t.Setenv("T_BOOL", "true")
	fs := NewFlagSet("t", io.Discard)
	s := fs.String("s", "T_STR", "def", "")
	i := fs.Int("i", "T_INT", 1, "")
	d := fs.Duration("d", "T_DUR", time.Second, "")
	f := fs.Float64("f", "T_FLOAT", 1, "")
	b := fs.Bool("b", "T_BOOL", false, "")
	unset := fs.String("u", "T_UNSET", "def", "")
	require.NoError(t, fs.Parse([]string{"-i", "9"}))
	require.Equal(t, "from-env", *s)
	require.Equal(t, 9, *i, "a flag wins over the environment")
	require.Equal(t, 3*time.Second, *d)
	require.Equal(t, 0.25, *f)
	require.True(t, *b)
	require.Equal(t, "def", *unset)
}

func TestMalformedEnvironmentAndArgumentsAreErrors(t *testing.T) {
	t.Setenv("T_INT", "seven")
	t.Setenv("T_DUR", "3")
	fs := NewFlagSet("t", io.Discard)
	fs.Int("i", "T_INT", 1, "")
	fs.Duration("d", "T_DUR", time.Second, "")
	err := fs.Parse(nil)
	require.ErrorContains(t, err, "$T_INT")
	require.ErrorContains(t, err, "$T_DUR")

	fs = NewFlagSet("t", io.Discard)
	require.ErrorContains(t, fs.Parse([]string{"stray"}), `unexpected argument "stray"`)
	fs = NewFlagSet("t", io.Discard)
	require.True(t, errors.Is(fs.Parse([]string{"-h"}), flag.ErrHelp))
}

func TestSplitList(t *testing.T) {
	require.Equal(t, []string{"a:1", "b:2"}, SplitList(" a:1 ,, b:2 ,"))
	require.Nil(t, SplitList(""))
}

func TestLoadOnceboxOverridesTheTopic(t *testing.T) {
	_, topic, err := LoadOncebox("../../oncebox.yaml", "")
	require.NoError(t, err)
	require.Equal(t, "orders", topic)
	cfg, topic, err := LoadOncebox("../../oncebox.yaml", "orders_test")
	require.NoError(t, err)
	require.Equal(t, "orders_test", topic)
	require.True(t, cfg.Outbox.DLQ.Enabled)

	_, _, err = LoadOncebox("does-not-exist.yaml", "")
	require.ErrorContains(t, err, "-config")
}

func TestNewLoggerRefusesUnknownLevels(t *testing.T) {
	_, _, err := NewLogger(io.Discard, "loud")
	require.Error(t, err)
	_, l, err := NewLogger(io.Discard, "warn")
	require.NoError(t, err)
	require.NotNil(t, l)
}
