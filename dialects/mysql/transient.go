package mysql

import (
	"reflect"

	"github.com/oncebox/watermill-oncebox/dialects"
)

// IsTransient reports the MySQL and MariaDB server errors a later try may
// not meet: too many connections (1040), server shutdown in progress
// (1053), lock wait timeout (1205), deadlock victim (1213), connection
// killed (MariaDB 1927), query interrupted by max_execution_time (MySQL
// 3024). The errors every database shares are dialects.IsTransient's.
func IsTransient(err error) bool {
	number, ok := errorNumber(err)
	if !ok {
		return false
	}
	switch number {
	case 1040, 1053, 1205, 1213, 1927, 3024:
		return true
	}
	return false
}

// isDeadlock reports whether err says the transaction was chosen as a
// deadlock victim (error 1213): it changed nothing and is run again.
func isDeadlock(err error) bool {
	number, ok := errorNumber(err)
	return ok && number == 1213
}

// driverPkg is the import path of go-sql-driver/mysql. This package does
// not import the driver, so that a PostgreSQL or Oracle binary does not
// link it (docs/modules.md): its errors are recognised by their type's
// package path and name. errors_test.go checks this against the
// driver's real values.
const driverPkg = "github.com/go-sql-driver/mysql"

// errorNumber returns the server error number of the first
// *mysql.MySQLError in err's chain (the chain errors.As walks), and false
// when there is none.
func errorNumber(err error) (number uint16, ok bool) {
	dialects.InChain(err, func(e error) bool {
		v := reflect.ValueOf(e)
		if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
			return false
		}
		t := v.Elem().Type()
		if t.Name() != "MySQLError" || t.PkgPath() != driverPkg {
			return false
		}
		f := v.Elem().FieldByName("Number")
		if f.Kind() != reflect.Uint16 {
			return false
		}
		number, ok = uint16(f.Uint()), true
		return true
	})
	return number, ok
}
