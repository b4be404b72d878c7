package poller_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/postgres"
	"github.com/oncebox/watermill-oncebox/poller"
)

func TestConfigValidateNamesTheField(t *testing.T) {
	t.Parallel()
	require.ErrorContains(t, poller.Config{}.Validate(), "poller: Config.Dialect is nil")
	pg, err := postgres.New(oncebox.TablesConfig{})
	require.NoError(t, err)
	require.NoError(t, poller.Config{Dialect: pg}.Validate())
	err = poller.Config{Dialect: pg, CloseTimeout: -1, JobBatchSize: -1}.Validate()
	require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
	require.ErrorContains(t, err, "CloseTimeout must be > 0")
	require.ErrorContains(t, err, "JobBatchSize must be between 1")
}

// outbox.finalize: delete needs a dialect that can delete at finalize
// (dialects.ConfirmedDeleter): the four of oncebox can; another is refused
// by New with the setting's name, not at the first finalize.
func TestFinalizeDeleteNeedsAConfirmedDeleter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := b.config("order-created")
	cfg.Oncebox.Outbox.Finalize = oncebox.FinalizeDelete
	_, err := poller.New(b.schema.Beginner, newRecorder(), cfg, nil)
	require.NoError(t, err)

	cfg.Dialect = plainDialect{b.schema.Dialect} // the Dialect interface alone
	_, err = poller.New(b.schema.Beginner, newRecorder(), cfg, nil)
	require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
	require.ErrorContains(t, err, `outbox.finalize: "delete": the postgres dialect cannot delete at finalize`)
}

// plainDialect hides every method of a dialect beyond dialects.Dialect.
type plainDialect struct{ dialects.Dialect }
