package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/oncebox/watermill-oncebox/dlq"
)

// cookieName is the session cookie. Its value is a random session id; the
// token and the CSRF token stay in the server's memory.
const cookieName = "oncebox_console"

// maxSessions bounds the sessions kept in memory: a login beyond it drops
// the session nearest its end.
const maxSessions = 10000

// session is a logged-in browser.
type session struct {
	token   string // the credential Authorize checks on every request
	csrf    string // the form field every state change must carry
	expires time.Time
}

// sessions are the logins, in memory: a restart logs everyone out.
type sessions struct {
	mu sync.Mutex
	m  map[string]*session
}

func newSessions() *sessions { return &sessions{m: map[string]*session{}} }

func (s *sessions) get(id string, now time.Time) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.m[id]
	if se == nil {
		return nil
	}
	if !now.Before(se.expires) {
		delete(s.m, id)
		return nil
	}
	return se
}

func (s *sessions) add(se *session, now time.Time) string {
	id := randomToken()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range s.m {
		if !now.Before(v.expires) {
			delete(s.m, k)
		}
	}
	if len(s.m) >= maxSessions {
		var oldest string
		for k, v := range s.m {
			if oldest == "" || v.expires.Before(s.m[oldest].expires) {
				oldest = k
			}
		}
		delete(s.m, oldest)
	}
	s.m[id] = se
	return id
}

func (s *sessions) remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}

// randomToken returns 32 random bytes in base64url.
func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// securityHeaders are set on every response: a strict CSP (scripts and
// styles from this origin only, no inline script, no frames, forms posted
// here only), no framing, no MIME sniffing, no referrer to other sites, no caching.
func securityHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "+
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin") // not no-referrer: Chrome then sends "Origin: null" on a same-origin POST
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

// ServeHTTP sets the security headers, bounds the body, routes and turns a
// panic into a 500.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w)
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			h.logger.Error("console panicked", errors.New("panic"), watermill.LogFields{"method": r.Method, "path": r.URL.Path, "panic": v})
			http.Error(w, "internal error", http.StatusInternalServerError)
		}
	}()
	if r.Body != nil {
		r.Body = http.MaxBytesReader(w, r.Body, dlq.MaxBodyBytes)
	}
	h.mux.ServeHTTP(w, r)
}

// sameOrigin refuses a POST whose Origin (sent by browsers on every POST)
// is another site's: a second line behind SameSite=Strict and the CSRF
// token.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

// authed wraps a page: without a valid session a GET goes to the login
// page and anything else is refused; every request is authorized again
// with the session's token; a POST must carry the session's CSRF token.
func (h *handler) authed(next func(w http.ResponseWriter, r *http.Request, se *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		now := h.clock.Now()
		var se *session
		if c, err := r.Cookie(cookieName); err == nil {
			se = h.sessions.get(c.Value, now)
		}
		if se == nil && h.cfg.AllowUnauthenticatedDangerously && r.Method == http.MethodGet {
			se = &session{csrf: randomToken(), expires: now.Add(h.ttl)}
			h.setCookie(w, r, h.sessions.add(se, now))
		}
		if se == nil {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, h.base+"/login", http.StatusSeeOther)
				return
			}
			http.Error(w, "no session: log in first", http.StatusForbidden)
			return
		}
		if h.cfg.Authorize != nil {
			probe := r.Clone(r.Context())
			probe.Header.Set("Authorization", "Bearer "+se.token)
			if err := h.cfg.Authorize(probe); err != nil {
				if errors.Is(err, dlq.ErrForbidden) {
					http.Error(w, "this caller may not do this", http.StatusForbidden)
					return
				}
				if c, err := r.Cookie(cookieName); err == nil {
					h.sessions.remove(c.Value)
				}
				http.Redirect(w, r, h.base+"/login", http.StatusSeeOther)
				return
			}
		}
		if r.Method != http.MethodGet {
			if !sameOrigin(r) {
				http.Error(w, "cross-origin request refused", http.StatusForbidden)
				return
			}
			if err := r.ParseForm(); err != nil {
				http.Error(w, "bad form: "+err.Error(), http.StatusBadRequest)
				return
			}
			got := r.PostForm.Get("csrf")
			if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(se.csrf)) != 1 {
				http.Error(w, "missing or invalid CSRF token", http.StatusForbidden)
				return
			}
		}
		next(w, r, se)
	}
}

func (h *handler) setCookie(w http.ResponseWriter, r *http.Request, value string) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: value, Path: h.base + "/", HttpOnly: true,
		Secure: r.TLS != nil || h.cfg.SecureCookies, SameSite: http.SameSiteStrictMode, MaxAge: int(h.ttl / time.Second)})
}

// loginPage serves GET /login.
func (h *handler) loginPage(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, http.StatusOK, "login", nil, map[string]any{"Unauthenticated": h.cfg.AllowUnauthenticatedDangerously})
}

// login serves POST /login: the token is checked once with Authorize and
// kept in the server's memory; the browser gets a random session id.
func (h *handler) login(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		http.Error(w, "cross-origin request refused", http.StatusForbidden)
		return
	}
	if h.cfg.AllowUnauthenticatedDangerously {
		http.Redirect(w, r, h.base+"/", http.StatusSeeOther)
		return
	}
	now := h.clock.Now()
	addr := clientAddress(r)
	if h.logins != nil {
		if wait := h.logins.wait(addr, now); wait > 0 {
			secs := retryAfter(wait)
			w.Header().Set("Retry-After", strconv.Itoa(secs))
			h.render(w, r, http.StatusTooManyRequests, "login", nil,
				map[string]any{"Error": fmt.Sprintf("Too many refused tokens from your address: try again in %d s.", secs)})
			return
		}
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form: "+err.Error(), http.StatusBadRequest)
		return
	}
	token := r.PostForm.Get("token")
	probe := r.Clone(r.Context())
	probe.Header.Set("Authorization", "Bearer "+token)
	if token == "" || h.cfg.Authorize(probe) != nil {
		if h.logins != nil {
			h.logins.failed(addr, now)
		}
		h.render(w, r, http.StatusUnauthorized, "login", nil, map[string]any{"Error": "That token was refused."})
		return
	}
	id := h.sessions.add(&session{token: token, csrf: randomToken(), expires: now.Add(h.ttl)}, now)
	h.setCookie(w, r, id)
	http.Redirect(w, r, h.base+"/", http.StatusSeeOther)
}

// logout serves POST /logout.
func (h *handler) logout(w http.ResponseWriter, r *http.Request, _ *session) {
	if c, err := r.Cookie(cookieName); err == nil {
		h.sessions.remove(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: h.base + "/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil || h.cfg.SecureCookies})
	http.Redirect(w, r, h.base+"/login", http.StatusSeeOther)
}
