#!/usr/bin/env bash
# pgcluster.sh: throw-away PostgreSQL clusters of our own for the tests of
# issue 28 (docs/postgresql.md), made with Debian's postgresql-common
# (pg_createcluster, pg_ctlcluster, pg_dropcluster) as root, on free ports,
# with autovacuum on. The machine's own server (the cluster "main" on 5432)
# is never touched: every command refuses a name that is not ours (ob_…).
#
#   pgcluster.sh create NAME [--replica] [--sync] [--pgbouncer]
#       A primary 15/NAME on a free port (autovacuum on, trust on
#       127.0.0.1, database "test"); with --replica a streaming replica
#       15/NAME_r made with pg_basebackup (application_name NAME_r), made
#       synchronous with --sync (synchronous_standby_names on the primary,
#       synchronous_commit on); with --pgbouncer a PgBouncer (pool_mode
#       transaction) in front of the primary. Prints one KEY=value line per
#       fact: PRIMARY_PORT, PRIMARY_DSN, REPLICA_PORT, REPLICA_DSN,
#       FAILOVER_DSN (the multi-host DSN with target_session_attrs=read-write),
#       PGBOUNCER_PORT, PGBOUNCER_DSN.
#   pgcluster.sh promote NAME    promote the replica (pg_ctl promote) and wait
#                                until it accepts writes
#   pgcluster.sh stop NAME [immediate|fast]   stop the primary
#   pgcluster.sh start NAME      start the primary
#   pgcluster.sh remove NAME     stop and drop the primary, the replica and
#                                the PgBouncer (no error if already gone)
#   pgcluster.sh bouncer NAME PORT   a PgBouncer in front of 127.0.0.1:PORT
#                                (e.g. the machine's 5432: it reads
#                                nothing of the server's configuration);
#                                prints PGBOUNCER_PORT and PGBOUNCER_DSN
#   pgcluster.sh list            the clusters of ours
#
# PgBouncer refuses to run as root: it runs as postgres, from a directory
# under /tmp/oncebox-pgcluster/NAME. Scripts that use this one should
# `trap 'pgcluster.sh remove NAME' EXIT`; the Go helper (internal/pgcluster)
# removes in t.Cleanup.
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin"

VERSION=${PG_VERSION:-15}
BASE=/tmp/oncebox-pgcluster
# The creations' lock. Every command run under it closes fd 9 (9>&-): a
# server or a PgBouncer started with the lock's descriptor inherited holds
# the lock for its whole life, and every other creation waits for it (the
# old name, .lock, may still be held so by servers an older version of this
# script started).
LOCK=$BASE/.create.lock

die() { echo "pgcluster: $*" >&2; exit 1; }
has() { command -v "$1" >/dev/null 2>&1; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
as_pg() { runuser -u postgres -- "$@"; }

check_name() {
  [[ $1 =~ ^ob_[a-z0-9_]{1,40}$ ]] || die "cluster name \"$1\" is not ours: it must match ob_[a-z0-9_]+ (the machine's clusters are never touched)"
}

need() {
  [ "$(id -u)" -eq 0 ] || die "must run as root (pg_createcluster and runuser need it)"
  has pg_createcluster || die "pg_createcluster not found: apt-get install postgresql-common postgresql-$VERSION"
  [ -x "/usr/lib/postgresql/$VERSION/bin/pg_basebackup" ] || die "PostgreSQL $VERSION's binaries not found in /usr/lib/postgresql/$VERSION/bin"
}

# The ports of our clusters and PgBouncers: below the kernel's ephemeral
# range (net.ipv4.ip_local_port_range, 32768-60999 by default), where the
# local end of an outgoing connection never lands. In the ephemeral range a
# port that is free when picked can be taken a moment later by one of the
# thousands of connections `make test` opens, and the server then fails to
# bind it ("Address already in use"): it did, in CI. 27400-27999 also keeps
# clear of RabbitMQ's inter-node port (25672) and of the common services.
PORT_FIRST=${PGCLUSTER_PORT_FIRST:-27400}
PORT_LAST=${PGCLUSTER_PORT_LAST:-27999}

# in_use PORT: something listens on PORT, or a socket (a connection's local
# end, one in TIME_WAIT) is bound to it.
in_use() {
  port_open "$1" && return 0
  has ss && [ -n "$(ss -Htan "sport = :$1" 2>/dev/null)" ] && return 0
  return 1
}

# free_port: a port that no cluster is configured on and that nothing
# uses. Called under the lock, so that two creations do not pick the same.
free_port() {
  local used p lo
  lo=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
  [ "$PORT_LAST" -lt "$lo" ] || echo "pgcluster: warning: ports $PORT_FIRST-$PORT_LAST reach the ephemeral range (from $lo): a connection may take the port picked (set PGCLUSTER_PORT_FIRST/LAST)" >&2
  used=$(pg_lsclusters -h 2>/dev/null | awk '{print $3}')
  used="$used $(cat "$BASE"/*/pgbouncer.port 2>/dev/null || true)"
  for p in $(seq "$PORT_FIRST" "$PORT_LAST"); do
    [[ " $used " == *" $p "* ]] && continue
    in_use "$p" && continue
    echo "$p"; return 0
  done
  die "no free port in $PORT_FIRST-$PORT_LAST"
}

wait_ready() { # PORT [WRITE]
  local port=$1 i
  for i in $(seq 1 120); do
    if as_pg psql -h 127.0.0.1 -p "$port" -d postgres -Atqc "SELECT 1" >/dev/null 2>&1; then
      if [ "${2:-}" = write ]; then
        [ "$(as_pg psql -h 127.0.0.1 -p "$port" -d postgres -Atqc "SELECT pg_is_in_recovery()")" = f ] && return 0
      else
        return 0
      fi
    fi
    sleep 0.25
  done
  die "the server on port $port did not become ready${2:+ for writes}"
}

cluster_port() { pg_lsclusters -h | awk -v n="$1" '$2 == n {print $3}'; }

create_cluster() { # NAME PORT
  pg_createcluster "$VERSION" "$1" -p "$2" -- --auth-local=trust --auth-host=trust >/dev/null
  # Debian's postgresql.conf includes conf.d: our settings go there.
  cat >"/etc/postgresql/$VERSION/$1/conf.d/oncebox.conf" <<EOF
autovacuum = on
listen_addresses = '127.0.0.1'
fsync = on
max_connections = 200
wal_level = replica
max_wal_senders = 10
EOF
}

dsn() { echo "postgres://postgres@127.0.0.1:$1/test?sslmode=disable"; }

start_bouncer() { # NAME TARGET_PORT
  has pgbouncer || die "pgbouncer not found: apt-get install pgbouncer (make tools installs it under CI)"
  local dir=$BASE/$1 port
  port=$(free_port)
  mkdir -p "$dir"
  cat >"$dir/pgbouncer.ini" <<EOF
[databases]
* = host=127.0.0.1 port=$2

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = transaction
default_pool_size = 20
max_client_conn = 500
ignore_startup_parameters = extra_float_digits
server_reset_query =
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
EOF
  printf '"postgres" ""\n"root" ""\n' >"$dir/userlist.txt"
  echo "$port" >"$dir/pgbouncer.port"
  chown -R postgres:postgres "$dir"
  as_pg pgbouncer -d "$dir/pgbouncer.ini" 9>&- || die "pgbouncer did not start (see $dir/pgbouncer.log)"
  local i
  for i in $(seq 1 80); do port_open "$port" && break; sleep 0.25; done
  port_open "$port" || die "pgbouncer did not listen on $port (see $dir/pgbouncer.log)"
  echo "PGBOUNCER_PORT=$port"
  echo "PGBOUNCER_DSN=$(dsn "$port")"
}

stop_bouncer() { # NAME
  local pidf=$BASE/$1/pgbouncer.pid pid
  [ -f "$pidf" ] || return 0
  pid=$(cat "$pidf")
  if kill "$pid" 2>/dev/null; then
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$pidf"
}

cmd=${1:-}; shift || true
mkdir -p "$BASE"
case $cmd in
  create)
    name=${1:-}; shift || true
    check_name "$name"; need
    replica=0 sync=0 bouncer=0
    for a in "$@"; do
      case $a in
        --replica) replica=1 ;;
        --sync) replica=1; sync=1 ;;
        --pgbouncer) bouncer=1 ;;
        *) die "create: unknown option $a (want --replica, --sync, --pgbouncer)" ;;
      esac
    done
    exec 9>"$LOCK"; flock 9
    [ -z "$(cluster_port "$name")" ] || die "cluster $VERSION/$name exists already (pgcluster.sh remove $name)"
    p=$(free_port)
    create_cluster "$name" "$p"
    pg_ctlcluster "$VERSION" "$name" start 9>&-
    wait_ready "$p"
    as_pg createdb -h 127.0.0.1 -p "$p" test
    echo "PRIMARY_PORT=$p"
    echo "PRIMARY_DSN=$(dsn "$p")"
    if [ $replica = 1 ]; then
      r=${name}_r
      rp=$(free_port)
      create_cluster "$r" "$rp"
      rdata=$(pg_lsclusters -h | awk -v n="$r" '$2 == n {print $6}')
      rm -rf "${rdata:?}"/*
      as_pg "/usr/lib/postgresql/$VERSION/bin/pg_basebackup" -h 127.0.0.1 -p "$p" -U postgres \
        -D "$rdata" -X stream -R -c fast
      # The replica names itself in primary_conninfo: the primary's
      # synchronous_standby_names and pg_stat_replication know it by it.
      echo "primary_conninfo = 'host=127.0.0.1 port=$p user=postgres application_name=$r'" >>"$rdata/postgresql.auto.conf"
      pg_ctlcluster "$VERSION" "$r" start 9>&-
      wait_ready "$rp"
      if [ $sync = 1 ]; then
        as_pg psql -h 127.0.0.1 -p "$p" -d postgres -qc "ALTER SYSTEM SET synchronous_standby_names = '$r'" \
          -c "ALTER SYSTEM SET synchronous_commit = 'on'" -c "SELECT pg_reload_conf()" >/dev/null
      fi
      want=async; [ $sync = 1 ] && want=sync
      ok=0
      for _ in $(seq 1 120); do
        st=$(as_pg psql -h 127.0.0.1 -p "$p" -d postgres -Atqc \
          "SELECT sync_state FROM pg_stat_replication WHERE application_name = '$r' AND state = 'streaming'")
        [ "$st" = "$want" ] && { ok=1; break; }
        sleep 0.25
      done
      [ $ok = 1 ] || die "the replica $r is not streaming ($want) from $name"
      echo "REPLICA_PORT=$rp"
      echo "REPLICA_DSN=$(dsn "$rp")"
      echo "REPLICA_STATE=$want"
      echo "FAILOVER_DSN=host=127.0.0.1,127.0.0.1 port=$p,$rp user=postgres dbname=test sslmode=disable target_session_attrs=read-write"
    fi
    [ $bouncer = 1 ] && start_bouncer "$name" "$p"
    exit 0 ;;
  promote)
    name=${1:-}; check_name "$name"; need
    r=${name}_r
    rp=$(cluster_port "$r"); [ -n "$rp" ] || die "no replica $VERSION/$r"
    pg_ctlcluster "$VERSION" "$r" promote
    wait_ready "$rp" write
    echo "PRIMARY_PORT=$rp" ;;
  stop)
    name=${1:-}; check_name "$name"; need
    pg_ctlcluster "$VERSION" "$name" stop -m "${2:-fast}" ;;
  start)
    name=${1:-}; check_name "$name"; need
    pg_ctlcluster "$VERSION" "$name" start
    wait_ready "$(cluster_port "$name")" ;;
  bouncer)
    name=${1:-}; check_name "$name"; need
    [[ ${2:-} =~ ^[0-9]+$ ]] || die "bouncer: want a target port, got \"${2:-}\""
    exec 9>"$LOCK"; flock 9
    start_bouncer "$name" "$2" ;;
  remove)
    name=${1:-}; check_name "$name"; need
    stop_bouncer "$name"
    for c in "${name}_r" "$name"; do
      if [ -n "$(cluster_port "$c")" ]; then
        pg_dropcluster --stop "$VERSION" "$c" || { pg_ctlcluster "$VERSION" "$c" stop -m immediate || true; pg_dropcluster "$VERSION" "$c"; }
      fi
    done
    rm -rf "${BASE:?}/$name" ;;
  list)
    pg_lsclusters -h | awk '$2 ~ /^ob_/' ;;
  *)
    sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2 ;;
esac
