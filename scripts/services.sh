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

start() {
  case $1 in
    postgres)
      port_open 5432 && { echo "services: postgres is up on 127.0.0.1:5432"; return; }
      echo "services: starting postgres"
      pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -n 1)" main start
      wait_port postgres 5432 ;;
    mariadb)
      port_open 3306 && { echo "services: mariadb is up on 127.0.0.1:3306"; return; }
      echo "services: starting mariadb"
      mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld 2>/dev/null || true
      start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
      wait_port mariadb 3306 ;;
    redis)
      port_open 6379 && { echo "services: redis is up on 127.0.0.1:6379"; return; }
      echo "services: starting redis"
      mkdir -p /var/lib/redis /var/log/redis
      redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
        --dir /var/lib/redis --logfile /var/log/redis/ci.log
      wait_port redis 6379 ;;
    rabbitmq)
      port_open 5672 && { echo "services: rabbitmq is up on 127.0.0.1:5672"; return; }
      echo "services: starting rabbitmq"
      rabbitmq-server -detached
      rabbitmqctl await_startup >/dev/null 2>&1 || true
      wait_port rabbitmq 5672 ;;
    *) echo "services: unknown service $1" >&2; return 2 ;;
  esac
}

for s in "${want[@]}"; do start "$s"; done
