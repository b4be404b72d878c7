package sqlkit

import (
	"strings"
	"time"

	"github.com/oncebox/watermill-oncebox/dialects"
)

// Style is how one database writes bind parameters: each database package
// defines its own (a zero-size type), and its statements are built with a
// Binder of it.
type Style interface {
	// Placeholder returns the placeholder of the n-th parameter, counting
	// from 1: $n, ? or :n.
	Placeholder(n int) string
	// Time binds v with bind and returns the SQL that stands for it: the
	// placeholder alone, or an expression around it (Oracle's
	// SYS_EXTRACT_UTC), with v converted as the database's columns hold
	// it (UTC, cut to microseconds on MySQL).
	Time(v time.Time, bind func(any) string) string
	// MaxInList is the most values one IN (…) list may hold (Oracle:
	// 1,000, ORA-01795); 0 for no limit.
	MaxInList() int
}

// Binder numbers the bind parameters of one statement in the order they
// are written, in its database's Style, and collects their arguments. A
// placeholder is never reused: a value needed twice is bound twice (Oracle
// binds by position). The zero value is ready to use.
type Binder[S Style] struct {
	// Args are the arguments bound so far, in placeholder order.
	Args  []any
	style S
}

// P binds v and returns its placeholder.
func (b *Binder[S]) P(v any) string {
	b.Args = append(b.Args, v)
	return b.style.Placeholder(len(b.Args))
}

// T binds a time and returns the SQL that stands for it.
func (b *Binder[S]) T(v time.Time) string { return b.style.Time(v, b.P) }

// In returns "col IN (…)" over vals, split as "(col IN (…) OR col IN (…))"
// where the style limits the values of one list, in one statement. vals
// must not be empty.
func (b *Binder[S]) In(col string, vals []any) string {
	per := b.style.MaxInList()
	if per <= 0 {
		per = len(vals)
	}
	var s strings.Builder
	groups := (len(vals) + per - 1) / per
	if groups > 1 {
		s.WriteString("(")
	}
	for g := 0; g < groups; g++ {
		if g > 0 {
			s.WriteString(" OR ")
		}
		s.WriteString(col + " IN (")
		end := min((g+1)*per, len(vals))
		for i := g * per; i < end; i++ {
			if i > g*per {
				s.WriteString(", ")
			}
			s.WriteString(b.P(vals[i]))
		}
		s.WriteString(")")
	}
	if groups > 1 {
		s.WriteString(")")
	}
	return s.String()
}

// Query returns the statement sql with the bound arguments.
func (b *Binder[S]) Query(sql string) dialects.Query { return dialects.Query{SQL: sql, Args: b.Args} }
