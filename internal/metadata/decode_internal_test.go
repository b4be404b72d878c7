package metadata

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// decodeCases are inputs the fast path must decode as encoding/json does,
// and inputs it must leave to encoding/json (fast false).
var decodeCases = []struct {
	name string
	in   string
	fast bool
}{
	{"empty object", `{}`, true},
	{"jsonb's spacing", `{"a": "b", "oncebox_event_id": "0193a0c4-0000-7000-8000-000000000001"}`, true},
	{"compact", `{"a":"b","c":""}`, true},
	{"all whitespace", " \t\r\n{ \n\"a\"\t:\r\"b\" , \"c\" : \"d\" }\n", true},
	{"duplicate keys: the last wins", `{"a":"1","a":"2"}`, true},
	{"simple escapes", `{"k\"\\\/":"\b\f\n\r\t"}`, true},
	{"\\u escapes", `{"\u00e9":"\u0001 \u2028 \uFFFD \u0041"}`, true},
	{"escape then raw UTF-8", `{"k":"\n zürich ✓ 😀"}`, true},
	{"raw UTF-8", `{"zürich":"✓ 😀"}`, true},
	{"surrogate pair", `{"k":"\ud83d\ude00"}`, false},
	{"lone surrogate", `{"k":"\ud83d"}`, false},
	{"invalid UTF-8", "{\"k\":\"\xff\"}", false},
	{"invalid UTF-8 after an escape", "{\"k\":\"\\n\xc3\"}", false},
	{"invalid UTF-8 before an escape", "{\"k\":\"\xc3\\u00a9\"}", false},
	{"null", `null`, false},
	{"number value", `{"a":1}`, false},
	{"null value", `{"a":null}`, false},
	{"nested", `{"a":{"b":"c"}}`, false},
	{"array", `["a"]`, false},
	{"trailing comma", `{"a":"b",}`, false},
	{"trailing garbage", `{"a":"b"}x`, false},
	{"two objects", `{}{}`, false},
	{"unterminated", `{"a":"b`, false},
	{"control character", "{\"a\":\"\x01\"}", false},
	{"bad escape", `{"a":"\x"}`, false},
	{"short \\u", `{"a":"\u12"}`, false},
	{"empty", ``, false},
}

func TestDecodeMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range decodeCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, fast := decodeFast([]byte(tc.in))
			require.Equal(t, tc.fast, fast, "fast path taken")
			requireSameAsEncodingJSON(t, []byte(tc.in))
		})
	}
}

// requireSameAsEncodingJSON checks that Decode and the fast path, when it
// is taken, give what json.Unmarshal gives into an empty map.
func requireSameAsEncodingJSON(t *testing.T, in []byte) {
	t.Helper()
	want := map[string]string{}
	wantErr := json.Unmarshal(in, &want)
	got, err := Decode(in)
	if wantErr != nil {
		require.EqualError(t, err, wantErr.Error(), "%q", in)
		return
	}
	require.NoError(t, err, "%q", in)
	require.Equal(t, want, got, "%q", in)
	require.Equal(t, want == nil, got == nil, "%q", in)
	if fast, ok := decodeFast(in); ok {
		require.Equal(t, want, fast, "fast path of %q", in)
	}
}

func FuzzMetadataDecode(f *testing.F) {
	for _, tc := range decodeCases {
		f.Add([]byte(tc.in))
	}
	f.Add([]byte(Encode(map[string]string{"a\"b": "\x01\n\\", "é": "\u2028"}, "oncebox_event_id", "id")))
	f.Fuzz(func(t *testing.T, in []byte) {
		requireSameAsEncodingJSON(t, in)
	})
}

// FuzzEncodeDecode checks that what Encode writes comes back whole, through
// the fast path.
func FuzzEncodeDecode(f *testing.F) {
	f.Add("key", "value", "line\nbreak \"quoted\" back\\slash \x01 zürich ✓")
	f.Fuzz(func(t *testing.T, k1, v1, v2 string) {
		md := map[string]string{k1: v1, "k2": v2}
		if Validate(md) != nil {
			return
		}
		got, ok := decodeFast([]byte(Encode(md)))
		require.True(t, ok)
		require.Equal(t, md, got)
	})
}

// benchMetadata is the metadata the publisher writes for an event with two
// headers of its own, as PostgreSQL's jsonb gives it back.
var benchMetadata = []byte(`{"tenant": "acme", "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", ` +
	`"oncebox_event_id": "0193a0c4-8f5e-7c3a-9b1d-2e4f6a8c0b1d", "oncebox_event_type": "order.created"}`)

func BenchmarkDecode(b *testing.B) {
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m := map[string]string{}
			if err := json.Unmarshal(benchMetadata, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Decode(benchMetadata); err != nil {
				b.Fatal(err)
			}
		}
	})
}
