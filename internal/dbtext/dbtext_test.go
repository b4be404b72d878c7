package dbtext

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestCleanMakesAnyStringStorable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"plain", "plain"},
		{"a\x00b", "a\uFFFDb"},
		{"bad \xff\xfe utf8", "bad \uFFFD utf8"},
		{"cut é"[:5], "cut \uFFFD"},
		{"\x00\xff", "\uFFFD\uFFFD"},
		{"", ""},
	} {
		got := Clean(tc.in)
		require.Equal(t, tc.want, got, "Clean(%q)", tc.in)
		require.True(t, utf8.ValidString(got))
		require.NotContains(t, got, "\x00")
	}
}

func TestClipNeverSplitsACharacter(t *testing.T) {
	t.Parallel()
	s := strings.Repeat("é", 3000) // 6,000 bytes, 2 a character
	for _, n := range []int{-1, 0, 1, 2, 3, 3999, 4000, 4001, 6000, 7000} {
		got := Clip(s, n)
		require.True(t, utf8.ValidString(got), "Clip(_, %d) is valid UTF-8", n)
		require.LessOrEqual(t, len(got), max(n, 0))
		require.GreaterOrEqual(t, len(got), min(max(n, 0), len(s))-1, "at most one partial character dropped")
	}
	require.Equal(t, "ab", Clip("ab", 5))
	require.Equal(t, "", Clip("€", 2), "a 3-byte character does not fit in 2 bytes")
}

func TestErrorIsCleanAndBounded(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", MaxErrorBytes-1) + "€€" // the cut falls inside a character
	for _, err := range []error{
		errors.New("nul \x00 inside"),
		errors.New("invalid \xc3\x28 utf8"),
		errors.New(long),
	} {
		got := Error(err)
		require.True(t, utf8.ValidString(got))
		require.NotContains(t, got, "\x00")
		require.LessOrEqual(t, len(got), MaxErrorBytes)
	}
	require.Equal(t, "", Error(nil))
}

func TestMapCleansKeysAndValuesAndDropsEmptyKeys(t *testing.T) {
	t.Parallel()
	got := Map(map[string]string{"ok": "v\x00", "\xff": "x", "": "dropped"})
	require.Equal(t, map[string]string{"ok": "v\uFFFD", "\uFFFD": "x"}, got)
}

func FuzzTextIsStorable(f *testing.F) {
	f.Add("hello", 3)
	f.Add("\x00\xff€", 2)
	f.Fuzz(func(t *testing.T, s string, n int) {
		got := Text(s, n)
		if !utf8.ValidString(got) || strings.IndexByte(got, 0) >= 0 || len(got) > max(n, 0) {
			t.Fatalf("Text(%q, %d) = %q", s, n, got)
		}
	})
}
