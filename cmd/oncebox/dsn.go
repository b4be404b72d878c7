package main

import (
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// The connection string is a secret: it usually holds the password. No
// message of the CLI quotes it, nor any error text of a parser that was
// given it (url.Parse, pgx, go-sql-driver and go-ora quote their input, each
// in its own form, so replacing the input string is not enough). Messages
// name the DSN by shownDSN, and the text of a connection error, which does
// not quote the DSN but could echo the password, goes through
// secrets.scrub.

// hintURL is the advice of a URL that does not parse.
const hintURL = "check the port, and %-escape the characters : / ? # [ ] @ % \" and spaces in the user name and password " +
	"(the parser's own message is not shown: it can contain the password)"

// isURL reports whether dsn is in URL form (scheme://…) rather than
// PostgreSQL's key=value form.
func isURL(dsn string) bool { return strings.Contains(dsn, "://") }

// shownDSN returns dsn as a message may show it: scheme://host/path, with
// the user name, password, query and fragment left out ("…@" marks a left
// out user, "?…" a left out query). When the URL does not parse, or parses
// in a way where part of the password could have landed in the host or the
// path (an unescaped '#', '/', '?' before the '@'), only the scheme is
// shown. The key=value form is not shown at all.
func shownDSN(dsn string) string {
	if !isURL(dsn) {
		return "(key=value connection string)"
	}
	scheme, _, _ := strings.Cut(dsn, "://")
	opaque := scheme + "://…"
	if strings.Contains(dsn, "#") {
		return opaque
	}
	u, err := url.Parse(dsn)
	if err != nil || u.Opaque != "" {
		return opaque
	}
	if (u.User == nil && strings.Contains(dsn, "@")) || strings.Contains(u.Path, "@") || strings.Contains(u.RawQuery, "@") {
		return opaque
	}
	out := scheme + "://"
	if u.User != nil {
		out += "…@"
	}
	out += u.Host + u.EscapedPath()
	if u.RawQuery != "" {
		out += "?…"
	}
	return out
}

// secrets are strings a connection error must not show: the password and
// the forms it takes in a DSN.
type secrets []string

// secretsOf returns the passwords and their escaped forms; "" is left out.
func secretsOf(passwords ...string) secrets {
	var out secrets
	for _, p := range passwords {
		if p == "" {
			continue
		}
		out = append(out, p, url.QueryEscape(p), url.PathEscape(p), strings.TrimSuffix(url.UserPassword("", p).String(), "@")[1:])
	}
	// Longest first, so a form is not half replaced by a shorter one.
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// scrub returns err's text with every secret replaced by "xxxxx", as a new
// error: the cause's chain is dropped with its text.
func (s secrets) scrub(err error) error {
	msg := err.Error()
	for _, p := range s {
		if p != "" {
			msg = strings.ReplaceAll(msg, p, "xxxxx")
		}
	}
	return errors.New(dedupLines(msg))
}

// dedupLines drops the lines of msg equal to an earlier one: pgx lists
// each connection attempt's error, and with sslmode=prefer (its default)
// the TLS attempt and the plain one fail the same way, so a refused
// connection was printed twice.
func dedupLines(msg string) string {
	lines := strings.Split(msg, "\n")
	seen := make(map[string]bool, len(lines))
	out := lines[:0]
	for _, l := range lines {
		if seen[l] {
			continue
		}
		seen[l] = true
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

// dsnError is the usage error of a connection string that cannot be read.
func dsnError(dsn, reason string) error {
	return usageErr("--dsn %s: %s", shownDSN(dsn), reason)
}

// checkURL refuses a URL DSN with a '#': no driver reads a fragment, so it
// is an unescaped '#' of the password, and everything after it would be
// cut off (and quoted back by the parser).
func checkURL(dsn string) error {
	if isURL(dsn) && strings.Contains(dsn, "#") {
		return dsnError(dsn, "has a '#': a URL fragment means nothing here; %-escape a '#' of the user name or password as %23")
	}
	return nil
}

// mysqlConfig turns mysql://user:password@host:port/database?param=value
// into go-sql-driver's configuration, with the times the MySQL dialect
// needs: parseTime=true and UTC. Its errors never contain the DSN or the
// password: they name the part at fault.
func mysqlConfig(dsn string) (*mysql.Config, error) {
	if err := checkURL(dsn); err != nil {
		return nil, err
	}
	u, err := url.Parse(strings.Replace(dsn, "mariadb://", "mysql://", 1))
	if err != nil {
		return nil, dsnError(dsn, "cannot parse it as a URL: "+hintURL)
	}
	cfg := mysql.NewConfig()
	cfg.Net, cfg.Addr = "tcp", u.Host
	if u.Port() == "" {
		cfg.Addr = u.Host + ":3306"
	}
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	if u.RawQuery != "" {
		params, err := url.ParseQuery(u.RawQuery)
		if err != nil {
			return nil, dsnError(dsn, "cannot parse the query string: %-escape its values")
		}
		// Let the driver read its own parameters (tls, timeouts, …). Each
		// is first tried alone on a DSN without credentials, so that a
		// refusal can name the parameter without quoting the rest.
		keys := make([]string, 0, len(params))
		for k := range params {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if _, err := mysql.ParseDSN("/?" + url.Values{k: params[k]}.Encode()); err != nil {
				return nil, dsnError(dsn, fmt.Sprintf("the query parameter %q is not one go-sql-driver/mysql accepts, or its value is not valid", k))
			}
		}
		base, sep := cfg.FormatDSN(), "?"
		if strings.Contains(base, "?") {
			sep = "&"
		}
		parsed, err := mysql.ParseDSN(base + sep + params.Encode())
		if err != nil {
			return nil, dsnError(dsn, "go-sql-driver/mysql refused the parameters together")
		}
		cfg = parsed
	}
	cfg.ParseTime, cfg.Loc = true, time.UTC
	return cfg, nil
}

// dsnHasPassword reports whether dsn holds a password: in the URL's user
// info or a password parameter, or a password key of the key=value form.
// A URL that does not parse counts as holding one if it has user info with
// a ':'.
func dsnHasPassword(dsn string) bool {
	if !isURL(dsn) {
		return strings.Contains(dsn, "password=")
	}
	u, err := url.Parse(dsn)
	if err != nil {
		_, rest, _ := strings.Cut(dsn, "://")
		i := strings.LastIndex(rest, "@")
		return i >= 0 && strings.Contains(rest[:i], ":")
	}
	if _, ok := u.User.Password(); ok {
		return true
	}
	return u.Query().Has("password")
}

// warnFlagSecret warns on stderr that the secret flag name, given on the
// command line, can be read by other users in the process list.
func (a *app) warnFlagSecret(name, instead string) {
	fmt.Fprintf(a.stderr, "oncebox: warning: %s is visible to other users of the machine in the process list (ps); use %s instead\n", name, instead)
}

// sqliteParams are the DSN parameters oncebox needs on SQLite
// (docs/sqlite.md), added to a DSN that does not set them: every
// transaction BEGIN IMMEDIATE, a busy timeout, and times stored and read as
// INTEGER microseconds. The journal mode is the file's own and is left
// alone.
var sqliteParams = []struct{ key, value, present string }{
	{"_txlock", "immediate", "_txlock="},
	{"_pragma", "busy_timeout(10000)", "busy_timeout"},
	{"_inttotime", "1", "_inttotime="},
	{"_time_integer_format", "unix_micro", "_time_integer_format="},
}

// sqliteDriverDSN turns sqlite:///path/to/file.db (or sqlite://file.db,
// relative, or a DSN already in the driver's form file:…) into
// modernc.org/sqlite's DSN, file:<path>?<params>, with the parameters of
// sqliteParams the DSN does not set.
func sqliteDriverDSN(dsn string) (string, error) {
	path, query := dsn, ""
	if i := strings.IndexByte(dsn, '?'); i >= 0 {
		path, query = dsn[:i], dsn[i+1:]
	}
	switch {
	case strings.HasPrefix(path, "file:"):
		path = strings.TrimPrefix(path, "file:")
	default:
		scheme, rest, ok := strings.Cut(path, "://")
		if !ok || (scheme != "sqlite" && scheme != "sqlite3") {
			return "", dsnError(dsn, "is not a SQLite DSN: use sqlite:///path/to/file.db or file:/path/to/file.db")
		}
		p, err := url.PathUnescape(rest)
		if err != nil {
			return "", dsnError(dsn, "cannot read the file's path: %-escape only what a URL path must")
		}
		path = p
	}
	if path == "" {
		return "", dsnError(dsn, "names no file: use sqlite:///path/to/file.db")
	}
	params := query
	for _, p := range sqliteParams {
		if strings.Contains(query, p.present) {
			continue
		}
		if params != "" {
			params += "&"
		}
		params += p.key + "=" + p.value
	}
	return "file:" + path + "?" + params, nil
}
