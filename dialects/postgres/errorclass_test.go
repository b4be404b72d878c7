package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/internal/dbtest"
	"github.com/oncebox/watermill-oncebox/migrate"
)

// errorTexts are hostile and varied error texts: quotes unbalanced,
// nested and across lines, UUIDs in both cases and inside quotes, hex,
// digits of other scripts, multibyte characters across the 1,000th, the
// mask's own replacements, HTML.
var errorTexts = []string{
	"",
	"order 42: 'abc' timed out",
	`order 7: "x" timed out`,
	`dial tcp 10.0.3.1:9092: i/o timeout`,
	`row 0190A3C2-7B1D-7E4F-9A0B-1C2D3E4F5A6B locked by 17`,
	`id '0190a3c2-7b1d-7e4f-9a0b-1c2d3e4f5a6b' in "quotes" and 0xDEADbeef, 0X1f, 0x`,
	`unbalanced 'quote 12 and "double 34`,
	"multi\nline 'quoted\nvalue' 5\r\n\t\"x\ny\" 6",
	`it's "it's" 'say "hi"' ""'' 99`,
	`Arabic-Indic ٣٤ and fullwidth １２ and superscript ² stay; 12 goes`,
	`<script>alert(1)</script><img src=x onerror=alert(2)> ? <id> <hex> N`,
	strings.Repeat("é1", 600),
	strings.Repeat("x", 998) + "'12345'",
	strings.Repeat("日", 999) + "1234",
	`deadbeef-dead-beef-dead-beefdeadbeef0 and 123e4567-e89b-12d3-a456-42661417400`,
	`\x00 escaped, % and _ and \\ and $1 and \1`,
}

// TestErrorClassMatchesGo checks that the stored error_class column
// (migration 0005) masks each text exactly as dialects.ErrorClass.
func TestErrorClassMatchesGo(t *testing.T) {
	t.Parallel()
	env := dbtest.TargetNamed(t, "postgres").New(t)
	ctx := context.Background()
	for _, text := range errorTexts {
		parkRow(t, env.Dialect, env.Beginner, text)
	}
	rows, err := env.DB.QueryContext(ctx, "SELECT coalesce(last_error, ''), error_class FROM "+env.Tables.DLQ)
	require.NoError(t, err)
	defer rows.Close()
	n := 0
	for rows.Next() {
		var stored, class string
		require.NoError(t, rows.Scan(&stored, &class))
		require.Equal(t, dialects.ErrorClass(stored), class, "error text %q", stored)
		n++
	}
	require.NoError(t, rows.Err())
	require.Equal(t, len(errorTexts), n)
	require.Equal(t, "order N: ? timed out", dialects.ErrorClass("order 42: 'abc' timed out"))
}

// TestErrorClassUpgrade applies migrations 1 to 4, parks rows, then
// migrates: the rows already there get their error_class.
func TestErrorClassUpgrade(t *testing.T) {
	t.Parallel()
	env := dbtest.TargetNamed(t, "postgres").NewEmpty(t)
	ctx := context.Background()
	scripts, err := migrate.Statements(env.Dialect, 0, 4)
	require.NoError(t, err)
	for _, s := range scripts {
		for _, q := range s.Statements {
			_, err := env.DB.ExecContext(ctx, q)
			require.NoError(t, err, "migration %s: %s", s.Name, q)
		}
	}
	for _, text := range errorTexts {
		parkRow(t, env.Dialect, env.Beginner, text)
	}
	require.NoError(t, migrate.Migrate(ctx, env.Beginner, env.Dialect))
	var mismatched, total int
	rows, err := env.DB.QueryContext(ctx, "SELECT coalesce(last_error, ''), error_class FROM "+env.Tables.DLQ)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var stored, class string
		require.NoError(t, rows.Scan(&stored, &class))
		if dialects.ErrorClass(stored) != class {
			mismatched++
		}
		total++
	}
	require.NoError(t, rows.Err())
	require.Equal(t, len(errorTexts), total)
	require.Zero(t, mismatched)
}

func parkRow(t *testing.T, d dialects.Dialect, db wsql.ContextExecutor, text string) {
	t.Helper()
	id, err := oncebox.NewEventID()
	require.NoError(t, err)
	require.NoError(t, d.PoisonUpsert(context.Background(), db, dialects.DLQRow{ID: id, HandlerName: "h",
		EventType: "t", Topic: "t", MessageUUID: "m-" + id.String(), Payload: []byte("{}"), Metadata: "{}",
		Error: text, FailedAt: time.Now().UTC()}))
}
