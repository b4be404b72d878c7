package oracle

import (
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// EventsList implements Dialect.
func (d *Dialect) EventsList() dialects.Query { return sqlkit.EventsList(d.tables) }
