package subscriber_test

import (
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/jackc/pgx/v5"
)

func wsqlTx(tx pgx.Tx) wsql.Tx { return wsql.TxFromPgx(tx) }
