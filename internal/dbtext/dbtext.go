// Package dbtext makes text that comes from outside (a broker's error, a
// handler's error, a header, a handler's name) storable in every database
// oncebox supports: valid UTF-8, no NUL, cut at a character boundary. It is
// the one place where such text is cleaned; the relay, the poison queue and
// the dialects all go through it, so that no input can make a statement that
// records an outcome fail.
package dbtext

import (
	"strings"
	"unicode/utf8"
)

// Replacement stands for every byte sequence that cannot be stored: an
// invalid UTF-8 sequence or a NUL (PostgreSQL text refuses NUL; MySQL's
// utf8mb4 and Oracle's AL32UTF8 refuse invalid UTF-8).
const Replacement = "\uFFFD"

// MaxErrorBytes bounds the error texts stored in last_error: Oracle binds a
// longer string as LONG, which its functions refuse, and nobody reads past
// the first 4,000 bytes of an error.
const MaxErrorBytes = 4000

// Clean returns s as valid UTF-8 without NUL: each invalid sequence and each
// NUL becomes Replacement. A clean s is returned as it is, without copying.
func Clean(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, Replacement), "\x00", Replacement)
}

// Clip returns the longest prefix of s of at most n bytes that does not end
// in the middle of a UTF-8 sequence. n < 0 counts as 0.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// Text returns s cleaned and clipped to at most n bytes: what may be bound
// to a text column of that width in bytes.
func Text(s string, n int) string { return Clip(Clean(s), n) }

// Error returns err's text as it is stored in last_error: cleaned, at most
// MaxErrorBytes bytes. A nil err gives "".
func Error(err error) string {
	if err == nil {
		return ""
	}
	return Text(err.Error(), MaxErrorBytes)
}

// Map returns a copy of m with every key and value cleaned; a key that is
// empty once cleaned is dropped.
func Map(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if k = Clean(k); k != "" {
			out[k] = Clean(v)
		}
	}
	return out
}
