package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// ownCluster is a throw-away PostgreSQL primary with autovacuum on, made by
// scripts/pgcluster.sh (pg_createcluster on a free port, as root) for the
// -own-cluster flag: the PostgreSQL scenarios run on it instead of the
// machine's server, whose autovacuum is off.
// createTimeout bounds the creation of the cluster.
const createTimeout = 3 * time.Minute

type ownCluster struct {
	name string
	dsn  string
}

// pgclusterScript is the path of scripts/pgcluster.sh, found from the
// working directory (go run ./bench runs from the repository's root) or
// from this file's directory at build time.
func pgclusterScript() string {
	if p := filepath.Join("scripts", "pgcluster.sh"); fileExists(p) {
		return p
	}
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "scripts", "pgcluster.sh")
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// newOwnCluster creates the cluster. The caller defers remove before it
// checks the error: a creation that fails half-way (a cluster made, the
// database not) leaves nothing behind either. The script is given ctx,
// and at most createTimeout: a creation waiting on the
// script's lock behind another one, or an interrupt, kills the script's whole
// process group, and remove then drops whatever it made.
func newOwnCluster(ctx context.Context) (*ownCluster, error) {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	c := &ownCluster{name: fmt.Sprintf("ob_bench_%d_%x", os.Getpid(), b)}
	if os.Geteuid() != 0 {
		return c, fmt.Errorf("-own-cluster: pg_createcluster needs root; this runs as uid %d", os.Geteuid())
	}
	ctx, cancel := context.WithTimeout(ctx, createTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", pgclusterScript(), "create", c.name)
	// Its own process group, killed whole: pg_createcluster, flock and
	// psql are the script's children.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return c, fmt.Errorf("-own-cluster: %s create %s: %w\n%s%s", pgclusterScript(), c.name, err, out.String(), errb.String())
	}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "PRIMARY_DSN="); ok {
			c.dsn = v
		}
	}
	if c.dsn == "" {
		return c, fmt.Errorf("-own-cluster: %s create %s printed no PRIMARY_DSN:\n%s", pgclusterScript(), c.name, out.String())
	}
	return c, nil
}

// remove stops and drops the cluster (nothing if it was never made). It
// does not take the run's context, which is cancelled on an interrupt: the
// removal must run then too.
func (c *ownCluster) remove() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "bash", pgclusterScript(), "remove", c.name).CombinedOutput()
	if err != nil {
		fmt.Fprintf(stderr, "bench: -own-cluster: removing %s: %v\n%s", c.name, err, out)
		return
	}
	fmt.Fprintf(stderr, "bench: -own-cluster: removed %s\n", c.name)
}
