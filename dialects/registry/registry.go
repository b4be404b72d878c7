// Package registry is the one place that maps a database's name to its
// dialect: the configuration's `database:`, the CLI's --database and its
// DSN schemes, the service's recognition of a database handle's driver,
// the oncetest schemas and the test targets all read it, and none of them
// lists databases itself. Adding a database is one folder under dialects/
// and one line in the list below (docs/dialects.md, "Adding a database").
//
// The database packages link no database/sql driver (their errors are
// recognised by type path and code), so a PostgreSQL-only binary that
// imports this package still links neither MySQL's nor Oracle's driver
// (scripts/check-modules.sh checks it).
package registry

import (
	"fmt"
	"slices"
	"strings"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/mysql"
	"github.com/oncebox/watermill-oncebox/dialects/oracle"
	"github.com/oncebox/watermill-oncebox/dialects/postgres"
	"github.com/oncebox/watermill-oncebox/dialects/sqlite"
)

// databases is every database oncebox supports, in the order the
// messages list them: one line a database.
var databases = []dialects.Database{
	postgres.Database,
	mysql.Database,
	oracle.Database,
	sqlite.Database,
}

// All returns the supported databases, in a fresh slice.
func All() []dialects.Database { return slices.Clone(databases) }

// Names returns the canonical names of the supported databases
// ("postgres", "mysql", "oracle").
func Names() []string {
	out := make([]string, len(databases))
	for i, d := range databases {
		out[i] = d.Name
	}
	return out
}

// Lookup returns the database called name, by its canonical name or one of
// its aliases ("mariadb" is MySQL's).
func Lookup(name string) (dialects.Database, bool) {
	for _, d := range databases {
		if d.Name == name || slices.Contains(d.Aliases, name) {
			return d, true
		}
	}
	return dialects.Database{}, false
}

// Known returns nil when name is a supported database, or an error wrapping
// oncebox.ErrInvalidConfig that names it and the supported ones.
func Known(name string) error {
	if _, ok := Lookup(name); ok {
		return nil
	}
	return fmt.Errorf("%w: unknown database %q (want %s)", oncebox.ErrInvalidConfig, name, strings.Join(Names(), ", "))
}

// New returns the dialect of the database called name for the tables
// placed by cfg.
func New(name string, cfg oncebox.TablesConfig) (dialects.Dialect, error) {
	d, ok := Lookup(name)
	if !ok {
		return nil, Known(name)
	}
	return d.New(cfg)
}

// ForURL returns the database whose URL schemes include dsn's
// ("mysql://…", "mariadb://…", "oracle://…"), and false when none does.
func ForURL(dsn string) (dialects.Database, bool) {
	scheme, _, ok := strings.Cut(dsn, "://")
	if !ok {
		return dialects.Database{}, false
	}
	for _, d := range databases {
		if slices.Contains(d.URLSchemes, strings.ToLower(scheme)) {
			return d, true
		}
	}
	return dialects.Database{}, false
}

// ForDriverPackage returns the database whose database/sql drivers live in
// the package pkgPath (the import path of a driver's type, as reflect
// tells it), and false when none does.
func ForDriverPackage(pkgPath string) (dialects.Database, bool) {
	for _, d := range databases {
		for _, p := range d.DriverPackages {
			if strings.Contains(pkgPath, p) {
				return d, true
			}
		}
	}
	return dialects.Database{}, false
}

// IsTransient reports whether err means "try later" rather than "this
// message is bad": the errors every database shares (dialects.IsTransient:
// a connection broke, a deadline passed, the broker is unavailable) and
// each supported database's own (a deadlock victim, a server shutting
// down, too many connections). The poison queue's default uses it.
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	if dialects.IsTransient(err) {
		return true
	}
	for _, d := range databases {
		if d.IsTransient != nil && d.IsTransient(err) {
			return true
		}
	}
	return false
}
