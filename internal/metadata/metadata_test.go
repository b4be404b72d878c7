package metadata_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/internal/metadata"
)

func FuzzEncodeMatchesEncodingJSON(f *testing.F) {
	f.Add("key", "value", "k2", "line\nbreak \"quoted\" back\\slash \x01 zürich ✓")
	f.Add("", "", "a", "\u2028")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		md := map[string]string{k1: v1, k2: v2}
		if metadata.Validate(md) != nil {
			return
		}
		got := metadata.Encode(md, "oncebox_event_id", "id-1")
		var back map[string]string
		require.NoError(t, json.Unmarshal([]byte(got), &back), got)
		want := map[string]string{k1: v1, k2: v2, "oncebox_event_id": "id-1"}
		require.Equal(t, want, back)
	})
}

func TestEncodeOverridesAndValidate(t *testing.T) {
	got := metadata.Encode(map[string]string{"oncebox_event_id": "old", "a": "b"}, "oncebox_event_id", "new")
	var back map[string]string
	require.NoError(t, json.Unmarshal([]byte(got), &back))
	require.Equal(t, map[string]string{"a": "b", "oncebox_event_id": "new"}, back)
	require.Equal(t, "{}", metadata.Encode(nil))

	require.ErrorContains(t, metadata.Validate(map[string]string{"": "v"}), "empty key")
	require.ErrorContains(t, metadata.Validate(map[string]string{"k": "\xff"}), `metadata "k"`)
	require.ErrorContains(t, metadata.Validate(map[string]string{"k\x00": "v"}), "metadata key")
}

func TestEncodeWithoutLeavesTheOmittedKeysOut(t *testing.T) {
	md := map[string]string{"oncebox_event_id": "old", "oncebox_event_type": "t", "a": "b"}
	got := metadata.EncodeWithout(md, []string{"oncebox_event_id", "oncebox_event_type"}, "traceparent", "00-x")
	var back map[string]string
	require.NoError(t, json.Unmarshal([]byte(got), &back))
	require.Equal(t, map[string]string{"a": "b", "traceparent": "00-x"}, back)
	require.Len(t, md, 3, "the caller's map is left as it was")
	// extra still sets an omitted key.
	require.JSONEq(t, `{"a":"b","k":"v"}`, metadata.EncodeWithout(map[string]string{"a": "b", "k": "old"}, []string{"k"}, "k", "v"))
}

func TestWithColumnsSetsTheEventIDAndType(t *testing.T) {
	t.Parallel()
	id, err := oncebox.NewEventID()
	require.NoError(t, err)
	require.Equal(t, map[string]string{oncebox.HeaderEventID: id.String(), oncebox.HeaderEventType: "t"},
		metadata.WithColumns(nil, id, "t"), "no metadata: a new map")
	old := map[string]string{"a": "b", oncebox.HeaderEventID: "stale", oncebox.HeaderEventType: "stale"}
	require.Equal(t, map[string]string{"a": "b", oncebox.HeaderEventID: id.String(), oncebox.HeaderEventType: "t"},
		metadata.WithColumns(old, id, "t"), "the columns win over copies in the metadata")
	require.ElementsMatch(t, []string{oncebox.HeaderEventID, oncebox.HeaderEventType}, metadata.InColumns)
}
