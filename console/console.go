// Package console is the operator's console: an http.Handler that shows the
// outbox and its dead letters in a browser and changes DLQ rows through the
// same dlq.Store, Authorize hook and status rules as the DLQ REST API
// (package dlq). Pages are rendered on the server with html/template; the
// one script and the style sheet are embedded, so there is nothing to build
// and nothing fetched from elsewhere. See docs/console.md.
package console

import (
	"cmp"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dlq"
	"github.com/oncebox/watermill-oncebox/internal/clock"
)

// Defaults of Config.
const (
	// DefaultSessionTTL is how long a login lasts when Config.SessionTTL
	// is 0.
	DefaultSessionTTL = 8 * time.Hour
	// DefaultProcessedWindow is the overview's "processed in the last …"
	// when Config.ProcessedWindow is 0.
	DefaultProcessedWindow = 5 * time.Minute
)

// Config configures the console.
type Config struct {
	// Store changes and reads the DLQ rows. Required.
	Store *dlq.Store
	// DB is the pool the overview's reads run on. Required.
	DB wsql.ContextExecutor
	// Dialect builds the overview's statements. Required. A dialect that
	// implements dialects.ConsoleInspector (PostgreSQL) gives the full
	// overview and the fingerprints; another gives the counts alone.
	Dialect dialects.Dialect
	// Authorize is the DLQ REST API's hook (e.g. dlq.BearerToken): the
	// login page posts a token once, and every later request is
	// authorized by calling Authorize with "Authorization: Bearer
	// <token>". Required unless AllowUnauthenticatedDangerously.
	Authorize func(r *http.Request) error
	// AllowUnauthenticatedDangerously serves the console without a login:
	// only for a console reachable by trusted callers alone. Requests that
	// change rows still need the CSRF token.
	AllowUnauthenticatedDangerously bool
	// Logger logs the errors behind 500 responses. Optional.
	Logger watermill.LoggerAdapter
	// BasePath is the prefix the console is mounted under, default "/";
	// dlq.ValidateBasePath says what it may be. Mount it without
	// http.StripPrefix: mux.Handle("/console/", h) for "/console".
	BasePath string
	// SecureCookies marks the session cookie Secure even when the request
	// did not come over TLS (a TLS-terminating proxy in front). Over TLS
	// it is Secure anyway.
	SecureCookies bool
	// SessionTTL is how long a login lasts, default DefaultSessionTTL.
	SessionTTL time.Duration
	// ProcessedWindow is the overview's "processed in the last …",
	// default DefaultProcessedWindow.
	ProcessedWindow time.Duration
	// Clock is the time of the overview and of sessions; nil is the real
	// clock.
	Clock oncebox.Clock
	// LoginFailures is how many refused logins one client address may
	// make per LoginWindow; beyond it the login page answers 429 Too Many
	// Requests with Retry-After, without trying the token. Default
	// DefaultLoginFailures (5); negative turns the limit off (a proxy in
	// front that limits already).
	LoginFailures int
	// LoginWindow is LoginFailures's window, default DefaultLoginWindow
	// (a minute): the budget refills at LoginFailures per LoginWindow.
	LoginWindow time.Duration
}

// Validate checks cfg as NewHandler does; the error names every field at
// fault and wraps oncebox.ErrInvalidConfig.
func (cfg Config) Validate() error {
	var errs []error
	if cfg.Store == nil {
		errs = append(errs, errors.New("Config.Store is nil"))
	}
	if cfg.DB == nil {
		errs = append(errs, errors.New("Config.DB is nil"))
	}
	if cfg.Dialect == nil {
		errs = append(errs, errors.New("Config.Dialect is nil"))
	}
	if cfg.Authorize == nil && !cfg.AllowUnauthenticatedDangerously {
		errs = append(errs, errors.New("Config.Authorize is nil: set it (e.g. dlq.BearerToken) or set AllowUnauthenticatedDangerously"))
	}
	if cfg.Authorize != nil && cfg.AllowUnauthenticatedDangerously {
		errs = append(errs, errors.New("Config.Authorize and AllowUnauthenticatedDangerously exclude each other"))
	}
	if err := dlq.ValidateBasePath(cmp.Or(cfg.BasePath, "/")); err != nil {
		errs = append(errs, fmt.Errorf("Config.%w", err))
	}
	if cfg.SessionTTL < 0 {
		errs = append(errs, fmt.Errorf("Config.SessionTTL is negative: %s", cfg.SessionTTL))
	}
	if cfg.ProcessedWindow < 0 {
		errs = append(errs, fmt.Errorf("Config.ProcessedWindow is negative: %s", cfg.ProcessedWindow))
	}
	if cfg.LoginWindow < 0 {
		errs = append(errs, fmt.Errorf("Config.LoginWindow is negative: %s", cfg.LoginWindow))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: console: %w", oncebox.ErrInvalidConfig, err)
	}
	return nil
}

//go:embed static templates
var assets embed.FS

// NewHandler returns the console. Errors wrap oncebox.ErrInvalidConfig and
// name the field at fault.
func NewHandler(cfg Config) (http.Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	h := &handler{
		cfg:       cfg,
		base:      strings.TrimSuffix(cmp.Or(cfg.BasePath, "/"), "/"),
		logger:    logger,
		clock:     clock.Or(cfg.Clock),
		ttl:       cmp.Or(cfg.SessionTTL, DefaultSessionTTL),
		window:    cmp.Or(cfg.ProcessedWindow, DefaultProcessedWindow),
		sessions:  newSessions(),
		mux:       http.NewServeMux(),
		pages:     map[string]*template.Template{},
		inspector: nil,
	}
	if ci, ok := cfg.Dialect.(dialects.ConsoleInspector); ok {
		h.inspector = ci
	}
	if cfg.LoginFailures >= 0 {
		h.logins = newLoginLimiter(cmp.Or(cfg.LoginFailures, DefaultLoginFailures), cmp.Or(cfg.LoginWindow, DefaultLoginWindow))
	}
	if err := h.parseTemplates(); err != nil {
		return nil, err
	}
	static, err := fs.Sub(assets, "static")
	if err != nil {
		return nil, err
	}
	b := h.base
	h.mux.Handle("GET "+b+"/static/", http.StripPrefix(b+"/static/", http.FileServerFS(static)))
	h.mux.HandleFunc("GET "+b+"/login", h.loginPage)
	h.mux.HandleFunc("POST "+b+"/login", h.login)
	h.mux.HandleFunc("POST "+b+"/logout", h.authed(h.logout))
	h.mux.HandleFunc("GET "+b+"/{$}", h.authed(h.overview))
	h.mux.HandleFunc("GET "+b+"/dead-letters", h.authed(h.list))
	h.mux.HandleFunc("GET "+b+"/dead-letters/{id}", h.authed(h.row))
	h.mux.HandleFunc("GET "+b+"/fingerprints", h.authed(h.fingerprints))
	h.mux.HandleFunc("POST "+b+"/confirm", h.authed(h.confirm))
	h.mux.HandleFunc("POST "+b+"/apply", h.authed(h.apply))
	return h, nil
}
