// Package pgcluster gives a test a throw-away PostgreSQL cluster of its own
// (a primary with autovacuum on, optionally a streaming replica and a
// PgBouncer in transaction pooling), made by scripts/pgcluster.sh with
// Debian's pg_createcluster on free ports, and removes it when the test
// ends, failed or not. The machine's own server is never reconfigured.
//
// It needs root, postgresql-common and, for a PgBouncer, the pgbouncer
// package (make tools installs it under CI). Where they are missing the
// test fails under CI (CI set) and is skipped, with the reason, elsewhere.
package pgcluster

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Options says what New makes besides the primary.
type Options struct {
	// Replica adds a streaming replica made with pg_basebackup.
	Replica bool
	// Sync makes the replica synchronous (synchronous_standby_names on the
	// primary): a commit returns once the replica has flushed it. It
	// implies Replica.
	Sync bool
	// PgBouncer starts a PgBouncer in transaction pooling in front of the
	// primary.
	PgBouncer bool
}

// Cluster is one test's cluster. The DSNs connect as the superuser
// postgres to the database test, without a password (trust on 127.0.0.1).
type Cluster struct {
	Name        string
	PrimaryPort int
	PrimaryDSN  string
	// ReplicaPort and ReplicaDSN are the replica's (Options.Replica).
	ReplicaPort int
	ReplicaDSN  string
	// FailoverDSN names both servers with target_session_attrs=read-write:
	// a connection goes to whichever accepts writes (Options.Replica).
	FailoverDSN string
	// PgBouncerPort and PgBouncerDSN are the PgBouncer's (Options.PgBouncer).
	PgBouncerPort int
	PgBouncerDSN  string

	removed atomic.Bool
}

// Script is the path of scripts/pgcluster.sh in this repository.
func Script() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "scripts", "pgcluster.sh")
}

// Missing says why clusters cannot be made here ("" when they can): not
// root, no pg_createcluster, or (withBouncer) no pgbouncer.
func Missing(withBouncer bool) string {
	if os.Geteuid() != 0 {
		return "pgcluster: the clusters are made with pg_createcluster as root; this test runs as uid " + strconv.Itoa(os.Geteuid())
	}
	if _, err := exec.LookPath("pg_createcluster"); err != nil && !exists("/usr/bin/pg_createcluster") {
		return "pgcluster: pg_createcluster not found (apt-get install postgresql-common postgresql-15)"
	}
	if withBouncer {
		if _, err := exec.LookPath("pgbouncer"); err != nil && !exists("/usr/sbin/pgbouncer") {
			return "pgcluster: pgbouncer not found (apt-get install pgbouncer; make tools installs it under CI)"
		}
	}
	return ""
}

// require fails the test under CI and skips it elsewhere when clusters
// cannot be made here.
func require(t testing.TB, withBouncer bool) {
	t.Helper()
	if why := Missing(withBouncer); why != "" {
		if os.Getenv("CI") != "" {
			t.Fatal(why)
		}
		t.Skip(why + " (skipped outside CI; CI fails instead)")
	}
}

// New makes a cluster for t and removes it in t.Cleanup.
func New(t testing.TB, o Options) *Cluster {
	t.Helper()
	require(t, o.PgBouncer)
	name := "ob_" + suffix(t)
	args := []string{"create", name}
	if o.Replica || o.Sync {
		args = append(args, "--replica")
	}
	if o.Sync {
		args = append(args, "--sync")
	}
	if o.PgBouncer {
		args = append(args, "--pgbouncer")
	}
	c := &Cluster{Name: name}
	// Registered before the creation: a creation that fails half-way
	// leaves nothing behind either.
	t.Cleanup(func() { c.Remove(t) })
	out := run(t, 2*time.Minute, args...)
	kv := parse(out)
	c.PrimaryPort, c.PrimaryDSN = atoi(kv["PRIMARY_PORT"]), kv["PRIMARY_DSN"]
	c.ReplicaPort, c.ReplicaDSN = atoi(kv["REPLICA_PORT"]), kv["REPLICA_DSN"]
	c.FailoverDSN = kv["FAILOVER_DSN"]
	c.PgBouncerPort, c.PgBouncerDSN = atoi(kv["PGBOUNCER_PORT"]), kv["PGBOUNCER_DSN"]
	if c.PrimaryDSN == "" {
		t.Fatalf("pgcluster: %s create printed no PRIMARY_DSN:\n%s", Script(), out)
	}
	return c
}

// Bouncer starts a PgBouncer in transaction pooling in front of the
// server listening on 127.0.0.1:port (the machine's own server is fine:
// PgBouncer changes nothing of it) and stops it in t.Cleanup. It returns
// the PgBouncer's DSN for database, as user.
func Bouncer(t testing.TB, port int, user, database string) string {
	t.Helper()
	require(t, true)
	name := "ob_" + suffix(t)
	t.Cleanup(func() { _, _ = exec.Command("bash", Script(), "remove", name).CombinedOutput() })
	kv := parse(run(t, time.Minute, "bouncer", name, strconv.Itoa(port)))
	return fmt.Sprintf("postgres://%s@127.0.0.1:%s/%s?sslmode=disable", user, kv["PGBOUNCER_PORT"], database)
}

// Promote promotes the replica (pg_ctl promote) and returns once it
// accepts writes.
func (c *Cluster) Promote(t testing.TB) {
	t.Helper()
	run(t, time.Minute, "promote", c.Name)
}

// StopPrimary stops the primary: mode "immediate" (a crash: no shutdown
// checkpoint, connections cut) or "fast".
func (c *Cluster) StopPrimary(t testing.TB, mode string) {
	t.Helper()
	run(t, time.Minute, "stop", c.Name, mode)
}

// Remove stops and drops the cluster now (New's t.Cleanup does it too; a
// second call does nothing).
func (c *Cluster) Remove(t testing.TB) {
	if c.removed.Swap(true) {
		return
	}
	out, err := exec.Command("bash", Script(), "remove", c.Name).CombinedOutput()
	if err != nil {
		t.Errorf("pgcluster: remove %s: %v\n%s", c.Name, err, out)
	}
}

func run(t testing.TB, timeout time.Duration, args ...string) string {
	t.Helper()
	cmd := exec.Command("bash", append([]string{Script()}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatalf("pgcluster: %s %s: %v", Script(), strings.Join(args, " "), err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("pgcluster: %s %s: %v\n%s%s", Script(), strings.Join(args, " "), err, out.String(), errb.String())
		}
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("pgcluster: %s %s: no answer in %s\n%s%s", Script(), strings.Join(args, " "), timeout, out.String(), errb.String())
	}
	return out.String()
}

func parse(out string) map[string]string {
	kv := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			kv[k] = v
		}
	}
	return kv
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func suffix(t testing.TB) string {
	b := make([]byte, 5)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
