package oncetest

import (
	"context"
	"errors"
	"fmt"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/poller"
)

// Drain relays every committed event that is due into pub, synchronously,
// and returns the number sent once none is left: the relay's own claim,
// send and finalize (poller.Poller.Drain), so the messages pub receives are
// the ones a broker would (UUID, payload, metadata with the oncebox headers
// and the key) and the rows end PROCESSED. With types, only events of those
// types are relayed; without, every type.
//
// db is a pool (sql.BeginnerFromPgx, sql.BeginnerFromStdSQL): the events of
// a transaction still open are not visible to it. An event pub refuses
// counts an attempt, waits for its retry and is named in the error; an
// error pub returns that means the broker is unavailable (poller.IsUnavailable)
// stops the drain. For the relay's other settings (retries, backoff, hooks,
// a fake clock), build a poller.Poller with poller.New and call its Drain.
func Drain(ctx context.Context, db wsql.Beginner, d dialects.Dialect, pub message.Publisher, types ...string) (int, error) {
	if d == nil {
		return 0, fmt.Errorf("%w: oncetest.Drain: the dialect is nil", oncebox.ErrInvalidConfig)
	}
	cfg := poller.Config{Dialect: d, DisableWakeOnCommit: true}
	if len(types) > 0 {
		// Those types only: no discovery of the others.
		cfg.Oncebox.Outbox.Events = make(map[string]oncebox.EventSettings, len(types))
		for _, t := range types {
			cfg.Oncebox.Outbox.Events[t] = oncebox.EventSettings{}
		}
		cfg.Oncebox.Outbox.StrictEventTypes = true
	}
	p, err := poller.New(db, pub, cfg, nil)
	if err != nil {
		return 0, fmt.Errorf("oncetest.Drain: %w", err)
	}
	n, err := p.Drain(ctx)
	return n, errors.Join(err, p.Close())
}
