// Package metadata encodes Watermill metadata as the JSON object stored in
// the metadata columns, and checks that it can be stored.
package metadata

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Validate reports the first key or value that cannot be stored: empty keys,
// invalid UTF-8 (JSON encoders would silently replace it) and NUL characters
// (PostgreSQL's jsonb refuses \u0000).
func Validate(md map[string]string) error {
	for k, v := range md {
		if k == "" {
			return errors.New("metadata has an empty key")
		}
		if !utf8.ValidString(k) || strings.ContainsRune(k, 0) {
			return fmt.Errorf("metadata key %q is not valid UTF-8 text without NUL", k)
		}
		if !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
			return fmt.Errorf("metadata %q has a value that is not valid UTF-8 text without NUL", k)
		}
	}
	return nil
}

// Encode returns md, with the pairs of extra (key, value, key, value, …)
// overriding it, as a JSON object. The caller has validated md; extra must be
// valid too. It is written by hand because encoding/json's reflection over a
// map costs more than the rest of a publish (bench/: publish).
func Encode(md map[string]string, extra ...string) string {
	return EncodeWithout(md, nil, extra...)
}

// EncodeWithout is Encode with the keys of omit left out of md (extra may
// still set them). The publisher omits the event id and type, which the
// outbox row holds in its own columns and the relay adds when it sends
// (issue 28: narrower rows).
func EncodeWithout(md map[string]string, omit []string, extra ...string) string {
	size := 2
	for k, v := range md {
		size += len(k) + len(v) + 6
	}
	for _, s := range extra {
		size += len(s) + 3
	}
	b := make([]byte, 0, size)
	b = append(b, '{')
	first := true
	pair := func(k, v string) {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendString(b, k)
		b = append(b, ':')
		b = appendString(b, v)
	}
	for k, v := range md {
		if overridden(k, extra) || omitted(k, omit) {
			continue
		}
		pair(k, v)
	}
	for i := 0; i+1 < len(extra); i += 2 {
		pair(extra[i], extra[i+1])
	}
	b = append(b, '}')
	return string(b)
}

func omitted(k string, omit []string) bool {
	for _, o := range omit {
		if o == k {
			return true
		}
	}
	return false
}

func overridden(k string, extra []string) bool {
	for i := 0; i < len(extra); i += 2 {
		if extra[i] == k {
			return true
		}
	}
	return false
}

const hex = "0123456789abcdef"

// appendString appends s as a JSON string. s is valid UTF-8, so only quotes,
// backslashes and control characters need escaping.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
