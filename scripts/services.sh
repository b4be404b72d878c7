#!/usr/bin/env bash
# Makes sure the services named on the command line (postgres, mariadb, redis,
# rabbitmq) are running on this machine, starting any that is down with the
# commands of the machine's image, and waits until each accepts connections.
# With no argument it checks every service the test suite uses.
set -euo pipefail

want=("$@")
[ ${#want[@]} -gt 0 ] || want=(postgres)

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_port() {
  local name=$1 port=$2
  for _ in $(seq 1 120); do
    port_open "$port" && { echo "services: $name is up on 127.0.0.1:$port"; return 0; }
    sleep 0.5
  done
  echo "services: $name did not come up on 127.0.0.1:$port" >&2
  return 1
}

# missing NAME PORT WHAT: the service is down and this machine has no way
# to start it that this script knows (it starts the services of a
# Debian/Ubuntu machine with the distribution's packages): say what to
# install or run, and fail.
missing() {
  local name=$1 port=$2 what=$3
  {
    echo "services: $name is not running on 127.0.0.1:$port and cannot be started here: $what not found."
    case $name in
      postgres) echo "  Debian/Ubuntu: apt-get install postgresql   macOS: brew install postgresql@15 && brew services start postgresql@15"
                echo "  Docker: docker run -d -p 5432:5432 -e POSTGRES_HOST_AUTH_METHOD=trust -e POSTGRES_USER=root -e POSTGRES_DB=test postgres:15" ;;
      mariadb)  echo "  Debian/Ubuntu: apt-get install mariadb-server   macOS: brew install mariadb && brew services start mariadb"
                echo "  Docker: docker run -d -p 3306:3306 -e MARIADB_ALLOW_EMPTY_ROOT_PASSWORD=1 -e MARIADB_DATABASE=test mariadb:10.11" ;;
      redis)    echo "  Debian/Ubuntu: apt-get install redis-server   macOS: brew install redis && brew services start redis"
                echo "  Docker: docker run -d -p 6379:6379 redis:7" ;;
      rabbitmq) echo "  Debian/Ubuntu: apt-get install rabbitmq-server   macOS: brew install rabbitmq && brew services start rabbitmq"
                echo "  Docker: docker run -d -p 5672:5672 rabbitmq:3" ;;
    esac
    echo "  Or point the tests at a server of yours (docs/testing.md). The demo needs none of them: make demo runs on SQLite."
  } >&2
  exit 1
}

has() { command -v "$1" >/dev/null 2>&1; }

start() {
  case $1 in
    postgres)
      port_open 5432 && { echo "services: postgres is up on 127.0.0.1:5432"; return; }
      has pg_ctlcluster && [ -d /etc/postgresql ] || missing postgres 5432 "pg_ctlcluster (Debian's postgresql-common) or /etc/postgresql"
      echo "services: starting postgres"
      pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -n 1)" main start
      wait_port postgres 5432 ;;
    mariadb)
      port_open 3306 && { echo "services: mariadb is up on 127.0.0.1:3306"; return; }
      has start-stop-daemon && [ -x /usr/sbin/mariadbd ] || missing mariadb 3306 "start-stop-daemon or /usr/sbin/mariadbd"
      echo "services: starting mariadb"
      mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld 2>/dev/null || true
      start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
      wait_port mariadb 3306 ;;
    redis)
      port_open 6379 && { echo "services: redis is up on 127.0.0.1:6379"; return; }
      has redis-server || missing redis 6379 "redis-server"
      echo "services: starting redis"
      mkdir -p /var/lib/redis /var/log/redis
      redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
        --dir /var/lib/redis --logfile /var/log/redis/ci.log
      wait_port redis 6379 ;;
    rabbitmq)
      port_open 5672 && { echo "services: rabbitmq is up on 127.0.0.1:5672"; return; }
      has rabbitmq-server || missing rabbitmq 5672 "rabbitmq-server"
      echo "services: starting rabbitmq"
      rabbitmq-server -detached
      rabbitmqctl await_startup >/dev/null 2>&1 || true
      wait_port rabbitmq 5672 ;;
    *) echo "services: unknown service $1" >&2; return 2 ;;
  esac
}

for s in "${want[@]}"; do start "$s"; done
