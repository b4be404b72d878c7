package main

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
)

// runMariaDBIdle is the idle scenario on MariaDB.
func runMariaDBIdle(ctx context.Context, e *env) ([]row, error) {
	return runSQLIdle(ctx, e, mariadbTarget(e.mariadbDSN))
}

// sqlIdleRun is what an idle measurement runs on its pool; it returns the
// statements it counted (the simulated hour, or the forwarder's window).
type sqlIdleRun func(ctx context.Context, db wsql.Beginner, k *sqlCounter) (sqlCount, error)

// sqlIdleCount is what one idle measurement on a sqlTarget counted.
type sqlIdleCount struct {
	// counted is what the run returned: the hour, or the window.
	counted sqlCount
	// run is what the client counted from the start of the run to its end.
	run sqlCount
	// server is what MariaDB counted in the session of the run's one
	// connection over the same span (nil without server counters, or when
	// the connection was replaced meanwhile).
	server serverCount
	// global is SHOW GLOBAL STATUS over the run: every client's statements.
	global serverCount
}

// runSQLIdle measures on t what runIdle measures on PostgreSQL, with the
// same code (idleHour, forwarderWindow): the oncebox poller with its
// defaults through one simulated hour, and Watermill's forwarder with its
// defaults for real seconds, extrapolated to an hour, each alone on a pool
// of one connection. Statements are counted client-side by a counting
// database/sql driver; MariaDB's status counters of that connection's
// session (information_schema.SESSION_STATUS, read on the connection itself
// before and after) check them, and SHOW GLOBAL STATUS, which other clients
// of the server add to, bounds them. The forwarder's counts over its whole
// run, start-up included, less a control run's, give its server-side count
// per window.
func runSQLIdle(ctx context.Context, e *env, t sqlTarget) ([]row, error) {
	s, err := t.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer s.close()
	setup, err := t.pool(ctx, 2, nil)
	if err != nil {
		return nil, err
	}
	d, err := s.fresh(ctx, setup)
	if err == nil {
		err = initForwarderSchema(t.wm(wsql.BeginnerFromStdSQL(setup)))
	}
	setup.Close()
	if err != nil {
		return nil, err
	}
	window := time.Duration(e.n(20, 5)) * time.Second
	forwarderFor := func(window time.Duration) sqlIdleRun {
		return func(ctx context.Context, db wsql.Beginner, k *sqlCounter) (sqlCount, error) {
			var before, after sqlCount
			err := forwarderWindow(ctx, t.wm(db), window, func() { before = k.snapshot() }, func() { after = k.snapshot() })
			return after.minus(before), err
		}
	}
	obControl, err := s.measureIdle(ctx, "control run (connect, close)",
		func(context.Context, wsql.Beginner, *sqlCounter) (sqlCount, error) { return sqlCount{}, nil })
	if err != nil {
		return nil, err
	}
	ob, err := s.measureIdle(ctx, "oncebox", func(ctx context.Context, db wsql.Beginner, k *sqlCounter) (sqlCount, error) {
		var c sqlCount
		start := k.snapshot()
		err := idleHour(ctx, db, d, func() { c = k.snapshot().minus(start) })
		return c, err
	})
	if err != nil {
		return nil, err
	}
	fwControl, err := s.measureIdle(ctx, "forwarder control run (start, first poll, stop)", forwarderFor(0))
	if err != nil {
		return nil, err
	}
	fw, err := s.measureIdle(ctx, "forwarder", forwarderFor(window))
	if err != nil {
		return nil, err
	}
	return sqlIdleRows(ob, obControl, fw, fwControl, window), nil
}

// measureIdle runs fn on a fresh counting pool of one connection to s's
// database and returns what it counted. With server counters, it reads the
// session status of that connection twice before fn (the second read
// measures what a read itself adds) and once after, and the global status
// before and after. Errors are prefixed with what.
func (s *sqlEnv) measureIdle(ctx context.Context, what string, fn sqlIdleRun) (_ sqlIdleCount, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("%s: %w", what, err)
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, idleDeadline)
	defer cancel()
	k := &sqlCounter{isolationStatement: s.t.isolationStatement}
	db, err := s.t.pool(ctx, 1, func(c driver.Connector) driver.Connector { return countingConnector{Connector: c, k: k} })
	if err != nil {
		return sqlIdleCount{}, err
	}
	defer db.Close()
	var (
		id0    int64
		p0, p1 serverCount
		g0     serverCount
	)
	if s.t.serverCounters {
		if err := withConn(ctx, db, func(conn *sql.Conn) (err error) {
			if id0, p0, err = sessionStatus(ctx, conn); err == nil {
				_, p1, err = sessionStatus(ctx, conn)
			}
			return err
		}); err != nil {
			return sqlIdleCount{}, err
		}
		if g0, err = globalStatus(ctx, s.admin); err != nil {
			return sqlIdleCount{}, err
		}
	}
	c0 := k.snapshot()
	counted, err := fn(ctx, wsql.BeginnerFromStdSQL(db), k)
	if err != nil {
		return sqlIdleCount{}, err
	}
	m := sqlIdleCount{counted: counted, run: k.snapshot().minus(c0)}
	if s.t.serverCounters {
		g1, err := globalStatus(ctx, s.admin)
		if err != nil {
			return sqlIdleCount{}, err
		}
		m.global = g1.minus(g0)
		var id2 int64
		var p2 serverCount
		if err := withConn(ctx, db, func(conn *sql.Conn) (err error) {
			id2, p2, err = sessionStatus(ctx, conn)
			return err
		}); err != nil {
			return sqlIdleCount{}, err
		}
		if id2 == id0 {
			// What the last read added is what the second read added.
			m.server = p2.minus(p1).minus(p1.minus(p0))
		}
	}
	return m, nil
}

// withConn runs fn on a connection of db, returned to the pool after.
func withConn(ctx context.Context, db *sql.DB, fn func(conn *sql.Conn) error) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return fn(conn)
}

// sqlIdleRows turns the counts into rows of statements and rows of
// transactions, each against the forwarder.
func sqlIdleRows(ob, obControl, fw, fwControl sqlIdleCount, window time.Duration) []row {
	perHour := 3600 / window.Seconds()
	obc, fwc := ob.counted, fw.counted
	claims := obc.probes + obc.claims
	jobs := obc.data() - claims
	goal := "met"
	if obc.all() > 100 {
		goal = "NOT met"
	}
	statements := withRatios([]row{
		{Case: "watermill forwarder, defaults (poll 1s): statements", Value: float64(fwc.all()) * perHour,
			Unit: "statements/h", Baseline: true, Note: fmt.Sprintf(
				"%d statements in %s of real time once running, extrapolated ×%.0f: %s; each poll is SET TRANSACTION ISOLATION LEVEL SERIALIZABLE, START TRANSACTION, SELECT (prepared: COM_STMT_PREPARE, EXECUTE, CLOSE), COMMIT; %s",
				fwc.all(), window, perHour, fwc, serverCheckPerWindow(fw, fwControl, fwc))},
		{Case: "oncebox poller, defaults: all statements", Value: float64(obc.all()), Unit: "statements/h",
			Note: fmt.Sprintf("no event type configured (discovery: its polls are the probes below); one simulated hour on a fake clock: %s; besides, %d server-side preparations of the statements with arguments (COM_STMT_PREPARE, and as many COM_STMT_CLOSE), which are not statements; the goal, ≤ 100 an hour: %s; %s",
				obc, obc.prepares, goal, serverCheck(ob, obControl))},
		{Case: "oncebox poller, defaults: claim statements", Value: float64(claims), Unit: "statements/h",
			Note: fmt.Sprintf("%d probes (SELECT 1 … LIMIT 1, outside any transaction), %d locking reads (SELECT … FOR UPDATE SKIP LOCKED): an idle poll is the probe alone; the adaptive delay grows from 250ms by ×1.5 to 1m",
				obc.probes, obc.claims)},
		{Case: "oncebox poller, defaults: transaction-control statements", Value: float64(obc.control()), Unit: "statements/h",
			Note: fmt.Sprintf("%d SET TRANSACTION ISOLATION LEVEL READ COMMITTED, %d START TRANSACTION, %d COMMIT, %d ROLLBACK: on MySQL each job statement run through the dialect's Exec is a READ COMMITTED transaction of its own, and so is a claim that finds rows",
				obc.setTx, obc.begins, obc.commits, obc.rollbacks)},
		{Case: "oncebox poller, defaults: job statements (recovery, clean-up)", Value: float64(jobs), Unit: "statements/h",
			Note: fmt.Sprintf("%d SELECT, %d INSERT, %d UPDATE, %d DELETE, %d other; recovery (an UPDATE a run) every 60s growing to 5m; clean-up every 5m growing to 1h: the lease taken (INSERT, UPDATE, in autocommit), a DELETE, the lease released (UPDATE)",
				obc.selects, obc.inserts, obc.updates, obc.deletes, obc.others)},
	})
	transactions := withRatios([]row{
		{Case: "watermill forwarder, defaults (poll 1s): transactions", Value: float64(fwc.transactions()) * perHour,
			Unit: "transactions/h", Baseline: true, Note: fmt.Sprintf("%d START TRANSACTION + %d autocommit statements in %s, extrapolated ×%.0f: one per poll",
				fwc.begins, fwc.autocommit, window, perHour)},
		{Case: "oncebox poller, defaults: transactions", Value: float64(obc.transactions()), Unit: "transactions/h",
			Note: fmt.Sprintf("%d explicit (START TRANSACTION … COMMIT/ROLLBACK) + %d statements run in autocommit, each its own transaction",
				obc.begins, obc.autocommit)},
	})
	return append(statements, transactions...)
}

// serverCheck compares what the client counted over a run with what the
// server counted in the run's session, less what it counted in the control
// run's, and says what SHOW GLOBAL STATUS saw.
func serverCheck(m, control sqlIdleCount) string {
	if m.server == nil || control.server == nil {
		return "no server-side count (the connection was replaced, or the database keeps no session counters)"
	}
	srv := m.server.minus(control.server)
	cli := m.run.minus(control.run)
	return compareCounts(srv, cli, "over the run") + globalNote(m)
}

// serverCheckPerWindow is serverCheck for the forwarder: the server counts
// the whole run, start-up included, so the window's statements are the
// run's less the control run's (start-up, first poll, stop), and the
// client's window count is compared with that.
func serverCheckPerWindow(m, control sqlIdleCount, window sqlCount) string {
	if m.server == nil || control.server == nil {
		return "no server-side count (the connection was replaced, or the database keeps no session counters)"
	}
	return compareCounts(m.server.minus(control.server), window, "in the window (the run less a control run)") + globalNote(m)
}

// compareCounts says whether the server's counters match the client's
// count: Questions (statements run: COM_QUERY and COM_STMT_EXECUTE),
// Com_begin, Com_commit + Com_rollback, Com_stmt_prepare.
func compareCounts(srv serverCount, cli sqlCount, span string) string {
	type pair struct {
		name     string
		srv, cli int64
	}
	pairs := []pair{
		{"Questions", srv["Questions"], cli.all()},
		{"Com_begin", srv["Com_begin"], cli.begins},
		{"Com_commit+Com_rollback", srv["Com_commit"] + srv["Com_rollback"], cli.commits + cli.rollbacks},
		{"Com_stmt_prepare", srv["Com_stmt_prepare"], cli.prepares},
	}
	s := "MariaDB's counters of the session " + span + ":"
	ok := true
	for i, p := range pairs {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprintf(" %s %d", p.name, p.srv)
		if p.srv != p.cli {
			ok = false
			s += fmt.Sprintf(" (client: %d)", p.cli)
		}
	}
	if ok {
		s += " — match the client's count"
	} else {
		s += " — differ from the client's count"
	}
	s += fmt.Sprintf(" (Com_select %d, Com_update %d, Com_insert %d, Com_delete %d, Com_set_option %d)",
		srv["Com_select"], srv["Com_update"], srv["Com_insert"], srv["Com_delete"], srv["Com_set_option"])
	return s
}

// globalNote is what SHOW GLOBAL STATUS saw over the run.
func globalNote(m sqlIdleCount) string {
	return fmt.Sprintf("; SHOW GLOBAL STATUS over the run, every client of the server included: Questions +%d, Com_begin +%d",
		m.global["Questions"], m.global["Com_begin"])
}
