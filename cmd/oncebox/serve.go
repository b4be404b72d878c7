package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/oncebox/watermill-oncebox/console"
	"github.com/oncebox/watermill-oncebox/dlq"
	"github.com/oncebox/watermill-oncebox/metrics"
)

func (a *app) adminCmd() *cobra.Command {
	c := group(&cobra.Command{Use: "admin", Short: "Administration servers"})
	c.AddCommand(a.serveCmd())
	return c
}

func (a *app) serveCmd() *cobra.Command {
	var addr, token, tokenFile, basePath string
	var insecure, withConsole bool
	var readTimeout, requestTimeout, idleTimeout time.Duration
	c := &cobra.Command{
		Use:   "serve",
		Short: "Serve the DLQ REST API and the operator's console, behind a bearer token, until SIGINT or SIGTERM",
		Args:  usageArgs(cobra.NoArgs),
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("token") {
				a.warnFlagSecret("--token", "ONCEBOX_ADMIN_TOKEN or --token-file")
			}
			if tokenFile != "" {
				if token != "" {
					return usageErr("--token-file and --token exclude each other")
				}
				if insecure {
					return usageErr("--token-file and --insecure-no-auth exclude each other")
				}
				var err error
				if token, err = readTokenFile(tokenFile); err != nil {
					return err
				}
			}
			if token == "" {
				token = a.getenv("ONCEBOX_ADMIN_TOKEN")
			}
			if token == "" && !insecure {
				return usageErr("no token: set ONCEBOX_ADMIN_TOKEN or pass --token-file (--insecure-no-auth serves without one)")
			}
			if token != "" && insecure {
				return usageErr("--token and --insecure-no-auth exclude each other")
			}
			for _, d := range []struct {
				name string
				v    time.Duration
			}{{"--read-timeout", readTimeout}, {"--request-timeout", requestTimeout}, {"--idle-timeout", idleTimeout}} {
				if d.v <= 0 {
					return usageErr("%s must be positive, got %s", d.name, d.v)
				}
			}
			// Checked before connecting: a base path ServeMux cannot serve
			// must be a usage error naming it, never a panic.
			if err := dlq.ValidateBasePath(basePath); err != nil {
				return usageErr("--base-path: %v", err)
			}
			if basePath == "/" || strings.HasSuffix(basePath, "/") {
				return usageErr("--base-path %q must not end with / (the API and /metrics share the server)", basePath)
			}
			cfg := dlq.HandlerConfig{Logger: watermill.NewStdLoggerWithOut(a.stderr, false, false),
				BasePath: basePath, AllowUnauthenticatedDangerously: insecure}
			if !insecure {
				auth, err := dlq.BearerToken(token)
				if err != nil {
					return usageErr("--token: %v", err)
				}
				cfg.Authorize = auth
			}

			base := cmd.Context()
			if base == nil {
				base = context.Background()
			}
			ctx, stop := signal.NotifyContext(base, syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			grace := a.g.timeout
			if grace <= 0 {
				grace = 30 * time.Second
			}
			connectCtx, cancel := context.WithTimeout(ctx, grace)
			c, err := a.connect(connectCtx)
			cancel()
			if err != nil {
				return err
			}
			defer c.Close()
			// GET /metrics: the DLQ actions taken through this server and
			// the backlog (COUNTs cached 30s), for Prometheus. It is served
			// without the bearer token, as scrape targets usually are.
			reg := prometheus.NewRegistry()
			actions, err := metrics.NewDLQActionHooks(reg)
			if err != nil {
				return err
			}
			backlog, err := metrics.NewBacklogCollector(c.db, c.d, metrics.BacklogConfig{})
			if err != nil {
				return err
			}
			if err := reg.Register(backlog); err != nil {
				return err
			}
			st, err := dlq.NewStore(c.db, dlq.Config{Dialect: c.d, Clock: a.clock, OnAction: actions.OnAction})
			if err != nil {
				return err
			}
			cfg.Store = st
			api, err := dlq.NewHandler(cfg)
			if err != nil {
				return err
			}
			h := withTimeout(api, requestTimeout)
			// The console at the root: the same store, token and limits
			// (docs/console.md).
			var ui http.Handler
			if withConsole {
				ui, err = console.NewHandler(console.Config{Store: st, DB: c.db, Dialect: c.d, Authorize: cfg.Authorize,
					AllowUnauthenticatedDangerously: insecure, Logger: cfg.Logger, Clock: a.clock})
				if err != nil {
					return err
				}
				ui = withTimeout(ui, requestTimeout)
			}
			mux, err := serveMux(basePath, h, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ui)
			if err != nil {
				return usageErr("--base-path %q: %v", basePath, err)
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("listen on %s: %w", addr, err)
			}
			srv := newServer(mux, readTimeout, requestTimeout, idleTimeout)
			if insecure {
				fmt.Fprintln(a.stderr, "oncebox: WARNING: serving without authentication (--insecure-no-auth)")
			}
			fmt.Fprintf(a.stderr, "oncebox: serving the DLQ API on http://%s%s\n", ln.Addr(), basePath)
			if withConsole {
				fmt.Fprintf(a.stderr, "oncebox: serving the console on http://%s/\n", ln.Addr())
			}
			if a.onListen != nil {
				a.onListen(ln.Addr().String())
			}
			errc := make(chan error, 1)
			go func() { errc <- srv.Serve(ln) }()
			select {
			case err := <-errc:
				return fmt.Errorf("serve: %w", err)
			case <-ctx.Done():
			}
			fmt.Fprintln(a.stderr, "oncebox: shutting down")
			sctx, cancel := context.WithTimeout(context.Background(), grace)
			defer cancel()
			if err := srv.Shutdown(sctx); err != nil {
				return fmt.Errorf("shutdown: %w", err)
			}
			if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("serve: %w", err)
			}
			return nil
		}),
	}
	c.Flags().StringVar(&addr, "addr", "127.0.0.1:8081", "address to listen on")
	c.Flags().StringVar(&token, "token", "", "bearer token callers must send (default $ONCEBOX_ADMIN_TOKEN); visible in ps, prefer the variable or --token-file")
	c.Flags().StringVar(&tokenFile, "token-file", "", "read the bearer token from this file (its first line)")
	_ = c.MarkFlagFilename("token-file")
	c.Flags().StringVar(&basePath, "base-path", "/dlq", "path prefix of the API")
	c.Flags().BoolVar(&withConsole, "console", true, "serve the operator's console at / (--console=false: the API and /metrics only)")
	c.Flags().BoolVar(&insecure, "insecure-no-auth", false, "DANGEROUS: serve without authentication")
	c.Flags().DurationVar(&readTimeout, "read-timeout", defaultReadTimeout, "time limit to read a request, headers and body")
	c.Flags().DurationVar(&requestTimeout, "request-timeout", defaultRequestTimeout, "time limit of a request's database work")
	c.Flags().DurationVar(&idleTimeout, "idle-timeout", defaultIdleTimeout, "how long an idle keep-alive connection is kept open")
	return c
}

// serveMux routes the DLQ API under basePath, GET /metrics and, when ui is
// not nil, the console at the root (every other path). A pattern
// ServeMux refuses (a base path ValidateBasePath let through, one that
// conflicts with /metrics) is returned as an error instead of its panic.
func serveMux(basePath string, api, metrics, ui http.Handler) (mux *http.ServeMux, err error) {
	defer func() {
		if v := recover(); v != nil {
			mux, err = nil, fmt.Errorf("cannot be served: %v", v)
		}
	}()
	mux = http.NewServeMux()
	mux.Handle(basePath, api)
	mux.Handle(basePath+"/", api)
	mux.Handle("GET /metrics", metrics)
	if ui != nil {
		mux.Handle("/", ui)
	}
	return mux, nil
}

// The admin server's limits, documented in docs/cli.md. A client must not
// hold a connection (and a goroutine) for longer than it needs to send a
// request and read the answer: without ReadTimeout a client that stalls its
// body, before or after the token is checked, keeps the connection forever.
const (
	// defaultReadTimeout bounds the reading of a request, headers and body
	// (at most dlq.MaxBodyBytes): generous for 1 MiB on a slow link.
	defaultReadTimeout = 30 * time.Second
	// maxHeaderTimeout bounds the headers alone, within the read timeout.
	maxHeaderTimeout = 10 * time.Second
	// defaultRequestTimeout bounds the database work of one request (a
	// bulk change of many rows is one statement).
	defaultRequestTimeout = 30 * time.Second
	// writeMargin is the time left to write the response after the
	// database work: a page is at most 1,000 rows.
	writeMargin = 30 * time.Second
	// defaultIdleTimeout closes keep-alive connections left idle: an
	// operator's curl or a dashboard polls now and then, and a connection
	// (with its goroutine) kept for net/http's default of 2 minutes
	// serves nobody.
	defaultIdleTimeout = 30 * time.Second
	// maxHeaderBytes caps the request line and headers: the API needs a
	// token and a short query string (the status filter takes at most four
	// values), so 64 KiB is ample; more is a 431.
	maxHeaderBytes = 64 << 10
)

// newServer returns the admin http.Server with its limits. WriteTimeout
// counts from the end of the headers, so it covers the body's reading, the
// handler's database work (bounded by requestTimeout) and the writing of the
// response: a WriteTimeout shorter than the handler's work would cut off
// its answer.
func newServer(h http.Handler, readTimeout, requestTimeout, idleTimeout time.Duration) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: min(readTimeout, maxHeaderTimeout),
		ReadTimeout:       readTimeout,
		WriteTimeout:      readTimeout + requestTimeout + writeMargin,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
	}
}

// withTimeout bounds the context of every request, which the Store's
// statements run under, by d.
func withTimeout(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// readTokenFile reads the bearer token from the file at path: the file
// without its trailing line break and spaces. Errors name the path, never
// the content.
func readTokenFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		// The *PathError names the path and the reason, not the content.
		return "", usageErr("--token-file: %v", err)
	}
	token := strings.TrimRight(string(b), " \t\r\n")
	if token == "" {
		return "", usageErr("--token-file %q is empty", path)
	}
	return token, nil
}
