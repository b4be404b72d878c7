package sqlkit

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/internal/dbtext"
)

// EventInsertColumns is the column list of EventsInsert, shared with the
// dialects that insert the same way.
const EventInsertColumns = "id, event_type, topic, partition_key, message_uuid, payload, metadata, " +
	"status, retry_count, next_retry_at, created_at, updated_at"

// EventInsertParams is the number of bind parameters per inserted row:
// the seven values of the row, its creation time and its first due time
// (next_retry_at, a delayed event's time).
const EventInsertParams = 9

// DueAt is the next_retry_at of r when inserted: its NextRetryAt, or its
// creation time when that is zero or earlier (a time in the past is now).
func DueAt(r dialects.EventRow) time.Time {
	if r.NextRetryAt.After(r.CreatedAt) {
		return r.NextRetryAt
	}
	return r.CreatedAt
}

// AdvisoryKey derives the advisory lock key from the migrations table name so
// that schemas migrated side by side do not wait on each other.
func AdvisoryKey(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte("oncebox-migrate:" + name))
	return int64(h.Sum64())
}

// nullable returns nil for "" (stored as NULL) and s otherwise.
func Nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func NonNilBytes(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// RenderMigrations reads the numbered .sql files of dir in fsys (a
// database package's embedded migrations), renders them with data (the
// table names, or a template data of the database's own) and splits them
// into statements with split.
func RenderMigrations(fsys fs.FS, dir string, data any, split func(string) []string) ([]dialects.Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("dialects: read migrations %s: %w", dir, err)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	var out []dialects.Migration
	for i, e := range entries {
		name := e.Name()
		version, err := strconv.Atoi(strings.SplitN(name, "_", 2)[0])
		if err != nil || version != i+1 {
			return nil, fmt.Errorf("dialects: migration %s/%s: want version %d in its name", dir, name, i+1)
		}
		raw, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return nil, err
		}
		tmpl, err := template.New(name).Option("missingkey=error").Parse(string(raw))
		if err != nil {
			return nil, fmt.Errorf("dialects: migration %s: %w", name, err)
		}
		var buf bytes.Buffer
		if err := tmpl.Execute(&buf, data); err != nil {
			return nil, fmt.Errorf("dialects: migration %s: %w", name, err)
		}
		out = append(out, dialects.Migration{Version: version, Name: name, Statements: split(buf.String())})
	}
	return out, nil
}

// ErrorText is an error text as every dialect binds it to last_error:
// cleaned and cut by dbtext, so that no error, whatever it holds, can make
// the statement that records an outcome fail. The relay and the poison
// queue clean it too; this keeps a caller of the seam from forgetting.
func ErrorText(s string) string { return dbtext.Text(s, dbtext.MaxErrorBytes) }
