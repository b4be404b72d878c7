package postgres

import (
	"strconv"
	"time"

	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// binder numbers bind parameters $1, $2, … in the order they are written.
type binder = sqlkit.Binder[style]

// style is PostgreSQL's way of binding: $n placeholders, a time bound as
// it is (timestamptz), no limit on an IN list beyond the bind parameters.
type style struct{}

func (style) Placeholder(n int) string { return "$" + strconv.Itoa(n) }

func (style) Time(v time.Time, bind func(any) string) string { return bind(v) }

func (style) MaxInList() int { return 0 }
