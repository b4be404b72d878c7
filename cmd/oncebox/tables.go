package main

import (
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/sijms/go-ora/v2/network"
)

// missingTablesHint is added to an error that says a table does not exist:
// the schema was never migrated, or --schema, --prefix or the DSN's
// database points elsewhere.
const missingTablesHint = "the oncebox tables are not there: run `oncebox migrate` " +
	"with the same --dsn, --schema, --prefix and --config, or check those"

// isMissingTable reports whether err is the database saying that a table
// does not exist: PostgreSQL's SQLSTATE 42P01 (undefined_table, also for a
// schema that does not exist), MySQL's and MariaDB's error 1146
// (ER_NO_SUCH_TABLE, also for a database that does not exist), Oracle's
// ORA-00942. The drivers' typed errors, never the text of a message.
func isMissingTable(err error) bool {
	var pg *pgconn.PgError
	var my *mysql.MySQLError
	var ora *network.OracleError
	switch {
	case errors.As(err, &pg):
		return pg.Code == "42P01"
	case errors.As(err, &my):
		return my.Number == 1146
	case errors.As(err, &ora):
		return ora.ErrCode == 942
	}
	return false
}

// withTablesHint adds missingTablesHint to err when it says a table does
// not exist, keeping err (and its chain) whole.
func withTablesHint(err error) error {
	if err == nil || !isMissingTable(err) {
		return err
	}
	return fmt.Errorf("%w\n%s", err, missingTablesHint)
}
