package mysql

import (
	"time"

	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// binder collects the arguments of ? placeholders in the order they are
// written.
type binder = sqlkit.Binder[style]

// style is MySQL's way of binding: ? placeholders, a time bound in UTC cut
// to microseconds (the DATETIME(6) columns hold UTC), no limit on an IN
// list beyond the bind parameters.
type style struct{}

func (style) Placeholder(int) string { return "?" }

func (style) Time(v time.Time, bind func(any) string) string { return bind(sqlkit.MicroUTC(v)) }

func (style) MaxInList() int { return 0 }
