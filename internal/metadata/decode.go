package metadata

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// Decode returns the JSON object data as a map, exactly as
// json.Unmarshal(data, &m) would leave an empty, non-nil map m: the same
// pairs, the last of duplicate keys winning, invalid UTF-8 replaced, nil for
// the JSON null, the same error for anything that is not an object of
// strings.
//
// The relay decodes the metadata of every event it sends, and
// encoding/json's reflection over a map was most of the relay's CPU in a
// no-op drain (issue 28). The shape the publisher writes, as PostgreSQL's
// jsonb, MariaDB's JSON or SQLite's text give it back, is decoded by hand:
// one string for the whole object, the keys and values without escapes
// sliced from it. Anything else (\u surrogate pairs, invalid UTF-8, numbers,
// nested values, syntax errors) is left to encoding/json, so what is stored
// by watermill-sql or an older version decodes as it always did.
func Decode(data []byte) (map[string]string, error) {
	if m, ok := decodeFast(data); ok {
		return m, nil
	}
	m := map[string]string{}
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// decodeFast decodes data if it is a JSON object whose values are all
// strings free of \u surrogates and invalid UTF-8; ok is false otherwise,
// and then the caller must decode it with encoding/json.
func decodeFast(data []byte) (m map[string]string, ok bool) {
	s := string(data)
	i := skipSpace(s, 0)
	if i == len(s) || s[i] != '{' {
		return nil, false
	}
	i = skipSpace(s, i+1)
	// Each pair takes at least four quotes; escaped quotes only make the
	// hint larger than needed.
	m = make(map[string]string, strings.Count(s, `"`)/4)
	if i < len(s) && s[i] == '}' {
		return m, skipSpace(s, i+1) == len(s)
	}
	for {
		var k, v string
		if k, i, ok = parseString(s, i); !ok {
			return nil, false
		}
		if i = skipSpace(s, i); i == len(s) || s[i] != ':' {
			return nil, false
		}
		if v, i, ok = parseString(s, skipSpace(s, i+1)); !ok {
			return nil, false
		}
		m[k] = v
		if i = skipSpace(s, i); i == len(s) {
			return nil, false
		}
		switch s[i] {
		case ',':
			i = skipSpace(s, i+1)
		case '}':
			return m, skipSpace(s, i+1) == len(s)
		default:
			return nil, false
		}
	}
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t') {
		i++
	}
	return i
}

// parseString parses the JSON string starting at s[i] and returns its value
// and the index after its closing quote. A string without escapes is a
// substring of s; ok is false for what decodeFast leaves to encoding/json.
func parseString(s string, i int) (v string, next int, ok bool) {
	if i == len(s) || s[i] != '"' {
		return "", 0, false
	}
	start := i + 1
	ascii := true
	for j := start; j < len(s); j++ {
		switch c := s[j]; {
		case c == '"':
			if !ascii && !utf8.ValidString(s[start:j]) {
				return "", 0, false
			}
			return s[start:j], j + 1, true
		case c == '\\':
			return unescape(s, start, j)
		case c < 0x20:
			return "", 0, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return "", 0, false
}

// unescape parses the rest of the JSON string that starts at s[start] and
// has its first backslash at s[j].
func unescape(s string, start, j int) (v string, next int, ok bool) {
	b := make([]byte, 0, len(s)-start)
	seg := start // start of the raw bytes not yet copied
	for j < len(s) {
		c := s[j]
		switch {
		case c == '"' || c == '\\':
			// Raw bytes are checked a run at a time: an escape yields
			// whole runes, so a run that is invalid UTF-8 on its own
			// stays invalid in the result.
			if !utf8.ValidString(s[seg:j]) {
				return "", 0, false
			}
			b = append(b, s[seg:j]...)
			if c == '"' {
				return string(b), j + 1, true
			}
			if j+1 == len(s) {
				return "", 0, false
			}
			switch e := s[j+1]; e {
			case '"', '\\', '/':
				b = append(b, e)
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r, ok := hex4(s, j+2)
				if !ok || utf8.RuneLen(r) < 0 { // a surrogate: encoding/json pairs them
					return "", 0, false
				}
				b = utf8.AppendRune(b, r)
				j += 4
			default:
				return "", 0, false
			}
			j += 2
			seg = j
		case c < 0x20:
			return "", 0, false
		default:
			j++
		}
	}
	return "", 0, false
}

// hex4 parses the four hexadecimal digits at s[i].
func hex4(s string, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[i : i+4]) {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
