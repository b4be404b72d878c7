// Package tcpproxy is a test helper: a TCP proxy in front of a real server
// that a test can kill, so that the server looks dead to its clients without
// being stopped for the other tests that use it.
package tcpproxy

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Proxy forwards TCP connections to a target; Kill makes the target look dead
// to whoever uses the proxy (the listener closes, every connection drops)
// without touching the real server, which other tests are using.
type Proxy struct {
	target string
	ln     net.Listener

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	killed bool
	wg     sync.WaitGroup
}

// Start listens on addr (127.0.0.1:0 for a fresh port) and forwards to
// target until Kill, which runs at the end of the test at the latest.
func Start(t testing.TB, addr, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	p := &Proxy{target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.Kill)
	return p
}

// Addr is the address clients connect to.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed by Kill
		}
		server, err := net.DialTimeout("tcp", p.target, time.Second)
		if err != nil {
			_ = client.Close()
			continue
		}
		if !p.track(client, server) {
			return
		}
		p.wg.Add(2)
		go p.pipe(server, client)
		go p.pipe(client, server)
	}
}

// track registers a connection pair, or closes it if Kill came first.
func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.killed {
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

// pipe copies src to dst; when either side ends, both are closed, which ends
// the copy in the other direction too.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
}

// Kill closes the listener and every proxied connection, and waits for the
// proxy's goroutines. Safe to call more than once.
func (p *Proxy) Kill() {
	p.mu.Lock()
	p.killed = true
	_ = p.ln.Close()
	for c := range p.conns {
		_ = c.Close()
	}
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	p.wg.Wait()
}
