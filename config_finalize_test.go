package oncebox

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFinalizeConfig(t *testing.T) {
	t.Parallel()
	c := Config{}.WithDefaults()
	require.Equal(t, FinalizeMark, c.Outbox.Finalize, "mark is the default")
	require.NoError(t, c.Validate())

	loaded, err := LoadConfig(strings.NewReader("oncebox:\n  outbox:\n    finalize: delete\n"))
	require.NoError(t, err)
	require.Equal(t, FinalizeDelete, loaded.Outbox.Finalize)

	_, err = LoadConfig(strings.NewReader("oncebox:\n  outbox:\n    finalize: drop\n"))
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.ErrorContains(t, err, `outbox.finalize: must be "mark" or "delete", got "drop"`)
}
