package rabbitmq

import (
	"errors"
	"net/url"
	"strconv"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"
)

// checkURL parses raw as amqp091-go will and returns nil, or a reason that
// never quotes the URL. The parsers' own errors cannot be passed on:
// url.Parse's quotes the whole URL, password included, and a password with
// an unescaped '#', '/' or '?' is split into a "port" that its error
// quotes too. The reason names the likely mistake instead.
func checkURL(raw string) error {
	_, err := amqp.ParseURI(raw)
	if err == nil {
		// url.Parse reads an unescaped '#' in the password as the start of
		// a fragment, and may still find a valid host and port before it:
		// the dial would then go to the user name as a host. AMQP URLs have
		// no fragment, so a '#' is always that mistake.
		if strings.Contains(raw, "#") {
			return errors.New("contains '#': AMQP URLs have no fragment; write a '#' in the password as %23")
		}
		return nil
	}
	var (
		ue  *url.Error
		ee  url.EscapeError
		he  url.InvalidHostError
		ne  *strconv.NumError
		msg = err.Error()
	)
	switch {
	case strings.Contains(msg, "whitespace"):
		return errors.New("contains whitespace")
	case strings.Contains(msg, "scheme"):
		return errors.New("must start with amqp:// or amqps://")
	case strings.HasPrefix(msg, "heartbeat "), strings.HasPrefix(msg, "connection_timeout "):
		// amqp091-go's own messages about the query; they quote the
		// parameter's value, never the user information.
		return errors.New("has an invalid query parameter: " + msg)
	case errors.As(err, &ee):
		return errors.New("has an invalid %-escape; write a '%' in the password as %25")
	case errors.As(err, &he):
		return errors.New("has an invalid character in the host")
	case errors.As(err, &ne), errors.As(err, &ue) && strings.Contains(ue.Err.Error(), "invalid port"):
		return errors.New("has an invalid port; if the password has a '#', '/', '?' or '@', write them %23, %2F, %3F, %40")
	case errors.As(err, &ue) && strings.Contains(ue.Err.Error(), "userinfo"):
		return errors.New("has a character not allowed in the user name or password; %-escape it")
	}
	return errors.New("is not a valid AMQP URL")
}

// redact returns raw with the password replaced by "xxxxx". It does not
// trust url.Parse, which reads a password with an unescaped '#', '/' or
// '?' as something else and leaves it in plain sight: everything between
// the first ':' after the scheme and the last '@' is the password. When
// that hides part of a path that holds an '@', too much is hidden, never
// too little.
func redact(raw string) string {
	prefix, rest := "", raw
	if i := strings.Index(raw, "://"); i > 0 && isScheme(raw[:i]) {
		prefix, rest = raw[:i+3], raw[i+3:]
	} else if strings.HasPrefix(raw, "//") {
		prefix, rest = "//", raw[2:]
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return raw // no user information
	}
	user, _, hasPassword := strings.Cut(rest[:at], ":")
	if !hasPassword {
		return raw
	}
	return prefix + user + ":xxxxx" + rest[at:]
}

// isScheme reports whether s can be a URL scheme (RFC 3986: a letter, then
// letters, digits, '+', '-', '.'), so that a "://" inside a password of a
// URL without a scheme is not taken for the end of one.
func isScheme(s string) bool {
	for i, c := range s {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || !(c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	return s != ""
}
