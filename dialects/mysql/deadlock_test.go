package mysql_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox/dialects"
	mysqldialect "github.com/oncebox/watermill-oncebox/dialects/mysql"
)

// TestMySQLDeadlockVictimIsRetried makes the dialect's own transaction the
// victim of a real InnoDB deadlock and checks that the operation is run
// again and succeeds, its first attempt's change rolled back: RelayExec
// (how the relay's single statements run) updates rows A then B; a heavier
// transaction holds B, then asks for A. InnoDB rolls back the lighter
// transaction (the dialect's); without the retry RelayExec would return
// Error 1213.
func TestMySQLDeadlockVictimIsRetried(t *testing.T) {
	t.Parallel()
	e := mysqlTarget(t).New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ids := insertEvents(t, e, "order-created", 2, liveT0)
	a, b := e.ID(ids[0]), e.ID(ids[1])
	deadlocks := func() int {
		var name string
		var n int
		require.NoError(t, e.DB.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'").Scan(&name, &n))
		return n
	}
	before := deadlocks()

	// The heavy transaction: 2,000 inbox rows make it the costlier one to
	// roll back, then it locks B.
	heavy, err := e.DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = heavy.Rollback() }()
	var vals []string
	for i := range 2000 {
		vals = append(vals, fmt.Sprintf("('heavy', 'k%d', NOW(6))", i))
	}
	_, err = heavy.ExecContext(ctx, "INSERT INTO "+e.Tables.Inbox+" (consumer, event_id, processed_at) VALUES "+strings.Join(vals, ","))
	require.NoError(t, err)
	_, err = heavy.ExecContext(ctx, "SELECT id FROM "+e.Tables.Events+" WHERE id = ? FOR UPDATE", b)
	require.NoError(t, err)

	type result struct {
		n   int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := mysqldialect.RelayExec(ctx, e.Beginner, dialects.Query{
			SQL:  "UPDATE " + e.Tables.Events + " SET retry_count = retry_count + 1 WHERE id IN (?, ?) ORDER BY id",
			Args: []any{a, b},
		})
		done <- result{n, err}
	}()
	// Wait until RelayExec holds A and waits for B.
	// INNODB_TRX is a cache refreshed only when it was not read for 0.1 s:
	// poll slower than that, and match this test's table only.
	var lastErr error
	require.Eventually(t, func() bool {
		var waiting int
		lastErr = e.DB.QueryRowContext(ctx, "SELECT count(*) FROM information_schema.INNODB_TRX"+
			" WHERE trx_state = 'LOCK WAIT' AND trx_query LIKE ?", "%"+e.Tables.Events+" SET retry_count%").Scan(&waiting)
		return lastErr == nil && waiting >= 1
	}, 30*time.Second, 250*time.Millisecond, "Exec waits for B")
	require.NoError(t, lastErr)
	// The cycle: the heavy transaction asks for A. InnoDB rolls RelayExec's back.
	_, err = heavy.ExecContext(ctx, "SELECT id FROM "+e.Tables.Events+" WHERE id = ? FOR UPDATE", a)
	require.NoError(t, err, "the heavy transaction is not the victim")
	require.Greater(t, deadlocks(), before, "InnoDB detected the deadlock")
	require.NoError(t, heavy.Commit())

	r := <-done
	require.NoError(t, r.err, "the victim was run again")
	require.EqualValues(t, 2, r.n)
	require.Equal(t, 2, e.Count(t, e.Tables.Events, "retry_count = 1"), "applied once: the first attempt was rolled back")
	t.Logf("InnoDB deadlocks during the test: %d (server-wide)", deadlocks()-before)
}
