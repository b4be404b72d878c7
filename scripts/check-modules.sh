#!/usr/bin/env bash
# check-modules.sh: what a service that imports only oncebox's core packages
# gets (docs/modules.md). It builds a throwaway module outside the tree that
# requires the checkout's core module (a replace to this directory, as a
# user's go.mod would require a tagged version) and imports the core
# packages, then asserts:
#   1. the core go.mod requires none of the heavy modules below;
#   2. the user's `go list -m all` holds none of them;
#   3. a PostgreSQL-only binary links no MySQL or Oracle driver
#      (`go version -m` lists neither);
#   4. no test library in the API: `go doc -all` of the core packages and
#      of metrics names no clockwork type (a config's Clock is an
#      oncebox.Clock), and none of them imports clockwork (`go list -deps`,
#      tests aside);
#   5. a service that imports the core and metrics (a RabbitMQ-only or
#      core-only service with Prometheus) gets no Kafka module in its
#      `go list -m all` (watermill-kafka, Sarama, franz-go, kfake, oncebox's
#      kafka module), and metrics/go.mod asks for no newer Go than the
#      core's go.mod (the end-to-end test over Kafka is the module
#      metrics/e2e).
# The core packages are every importable package of the root module.
# It needs the Go module proxy (or a module cache that has the modules);
# nothing else. Exit status 0 when every check holds.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
GO="${GO:-go}"
core="github.com/oncebox/watermill-oncebox"

# The modules a core user must not get. A prefix matches every major
# version and sub-module (franz-go's kfake and kmsg, watermill-amqp/v2 and v3,
# the OTel SDK's trace and metric modules and its exporters).
forbidden=(
	github.com/IBM/sarama
	github.com/Shopify/sarama
	github.com/rabbitmq/amqp091-go
	github.com/ThreeDotsLabs/watermill-amqp
	github.com/ThreeDotsLabs/watermill-kafka
	github.com/sijms/go-ora
	github.com/spf13/cobra
	github.com/redis/go-redis
	go.opentelemetry.io/otel/sdk
	go.opentelemetry.io/otel/exporters
	github.com/twmb/franz-go
	modernc.org/sqlite
)
# The drivers a PostgreSQL-only binary must not link.
drivers=(
	github.com/go-sql-driver/mysql
	github.com/sijms/go-ora
	modernc.org/sqlite
)

fail=0
matches() { # matches FILE: the forbidden modules FILE names, one a line
	local f="$1" m
	for m in "${forbidden[@]}"; do
		grep -E "^[[:space:]]*(require[[:space:]]+)?${m//./\\.}(/[^[:space:]]*)?[[:space:]]" "$f" || true
	done
}

# 1. The core go.mod.
bad="$(matches "$root/go.mod")"
if [ -n "$bad" ]; then
	echo "check-modules: FAIL: the core go.mod ($root/go.mod) requires heavy modules:"
	echo "$bad" | sed 's/^/    /'
	fail=1
else
	echo "check-modules: ok: the core go.mod requires none of: ${forbidden[*]}"
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
coreGo="$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$root/go.mod")"
cat >"$tmp/go.mod" <<MOD
module example.com/oncebox-core-user

go $coreGo

require $core v0.0.0

replace $core => $root
MOD
# Every package of the core module a user can import (not internal/, not a
# command): today the root, publisher, poller, middleware, subscriber, dlq,
# dialects, migrate, cache and whatever the core gains later. `go list ./...`
# at the root stops at the nested modules.
# dialects/dialecttest, the conformance suite, is test infrastructure (it
# imports testing, testify and clockwork): not a package a service imports,
# and none of the others may import it (checked below).
testsupport="$core/dialects/dialecttest"
mapfile -t pkgs < <(cd "$root" && GOWORK=off "$GO" list -f '{{if ne .Name "main"}}{{.ImportPath}}{{end}}' ./... | grep -v '/internal/' | grep -vFx "$testsupport")
if [ "${#pkgs[@]}" -lt 8 ]; then
	echo "check-modules: FAIL: found only ${#pkgs[@]} core packages: ${pkgs[*]}"
	exit 1
fi
# 4. The test library out of the API, run in the workspace (metrics is a
# module of its own) before the throwaway module's settings below.
testlib=github.com/jonboulle/clockwork
api=("${pkgs[@]}" "$core/metrics")
mentioned=""
for p in "${api[@]}"; do
	if ! doc="$(cd "$root" && GOWORK="$root/go.work" "$GO" doc -all "$p" 2>&1)"; then
		echo "check-modules: FAIL: go doc -all $p:"
		echo "$doc" | sed 's/^/    /'
		exit 1
	fi
	if grep -qi clockwork <<<"$doc"; then
		mentioned+="    $p: $(grep -i clockwork <<<"$doc" | head -3 | sed 's/^[[:space:]]*//' | paste -sd';')"$'\n'
	fi
done
deps="$(cd "$root" && GOWORK=off "$GO" list -deps "${pkgs[@]}"; cd "$root/metrics" && GOWORK="$root/go.work" "$GO" list -deps .)"
imported="$(grep -Fx "$testlib" <<<"$deps" || true)"
if grep -qFx "$testsupport" <<<"$deps"; then
	echo "check-modules: FAIL: a core package or metrics imports $testsupport (go list -deps): it is for tests only"
	fail=1
fi
if [ -n "$mentioned" ] || [ -n "$imported" ]; then
	[ -n "$mentioned" ] && printf 'check-modules: FAIL: go doc -all mentions clockwork (give the field an oncebox.Clock):\n%s' "$mentioned"
	[ -n "$imported" ] && echo "check-modules: FAIL: a core package or metrics imports $testlib (go list -deps)"
	fail=1
else
	echo "check-modules: ok: ${#api[@]} packages (core and metrics): no clockwork in go doc -all nor in go list -deps"
fi

# Blank imports: a package in the build is a module in `go version -m`,
# whatever the linker keeps of its code; they also survive renames of the
# constructors.
{
	echo '// A PostgreSQL-only service that imports every core package of oncebox.'
	echo 'package main'
	echo
	echo 'import ('
	echo '	_ "github.com/jackc/pgx/v5/pgxpool"'
	echo '	_ "github.com/jackc/pgx/v5/stdlib"'
	printf '\t_ "%s"\n' "${pkgs[@]}"
	echo ')'
	echo
	echo 'func main() {}'
} >"$tmp/main.go"
echo "check-modules: a service importing the core packages: ${pkgs[*]#"$core"/}"

cd "$tmp"
export GOWORK=off GOFLAGS=-mod=mod
if ! "$GO" mod tidy >"$tmp/tidy.log" 2>&1; then
	echo "check-modules: FAIL: go mod tidy of a module importing the core packages:"
	sed 's/^/    /' "$tmp/tidy.log"
	exit 1
fi

# 2. The user's module graph.
"$GO" list -m all >"$tmp/all.txt"
printf 'require (\n' >"$tmp/all.mod"
sed 's/^/\t/' "$tmp/all.txt" >>"$tmp/all.mod"
bad="$(matches "$tmp/all.mod")"
if [ -n "$bad" ]; then
	echo "check-modules: FAIL: \`go list -m all\` of a service importing only the core has heavy modules:"
	echo "$bad" | sed 's/^[[:space:]]*/    /'
	fail=1
else
	echo "check-modules: ok: \`go list -m all\` of a core user ($(wc -l <"$tmp/all.txt") modules) has none of them"
fi
# Prometheus and go-sql-driver are in every Watermill + watermill-sql user's
# graph: say which module brings them.
for m in github.com/prometheus/client_golang github.com/go-sql-driver/mysql; do
	by="$("$GO" mod graph | awk -v m="$m" 'index($2, m "@") == 1 {sub(/@.*/, "", $1); print $1}' | sort -u | tr '\n' ' ')"
	[ -n "$by" ] && echo "check-modules: note: $m is in the graph, required by: $by"
done

# 3. The drivers linked into a PostgreSQL-only binary.
"$GO" build -o "$tmp/pgonly" .
"$GO" version -m "$tmp/pgonly" >"$tmp/version.txt"
linked=""
for d in "${drivers[@]}"; do
	linked+="$(grep -E "[[:space:]]${d//./\\.}(/[^[:space:]]*)?[[:space:]]" "$tmp/version.txt" || true)"
done
if [ -n "$linked" ]; then
	echo "check-modules: FAIL: a PostgreSQL-only binary links a MySQL or Oracle driver (go version -m):"
	echo "$linked" | sed 's/^[[:space:]]*/    /'
	fail=1
else
	echo "check-modules: ok: a PostgreSQL-only binary links neither ${drivers[*]}"
fi

# 5. A user of metrics: its graph holds no Kafka module, its Go no newer
# than the core's.
metricsGo="$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$root/metrics/go.mod")"
if [ "$(printf '%s\n%s\n' "$coreGo" "$metricsGo" | sort -V | tail -1)" != "$coreGo" ]; then
	echo "check-modules: FAIL: metrics/go.mod says go $metricsGo, newer than the core's go $coreGo: every user of metrics would need it"
	fail=1
else
	echo "check-modules: ok: metrics/go.mod says go $metricsGo (the core: go $coreGo)"
fi
mtmp="$tmp/metrics-user"
mkdir -p "$mtmp"
cat >"$mtmp/go.mod" <<MOD
module example.com/oncebox-metrics-user

go $coreGo

require (
	$core v0.0.0
	$core/metrics v0.0.0
)

replace (
	$core => $root
	$core/metrics => $root/metrics
)
MOD
cat >"$mtmp/main.go" <<'SRC'
// A service that imports the core's entry point and its metrics.
package main

import (
	_ "github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/oncebox/watermill-oncebox/metrics"
	_ "github.com/oncebox/watermill-oncebox/service"
)

func main() {}
SRC
kafkaMods=(
	github.com/IBM/sarama
	github.com/Shopify/sarama
	github.com/ThreeDotsLabs/watermill-kafka
	github.com/twmb/franz-go
	"$core/kafka"
)
if ! (cd "$mtmp" && "$GO" mod tidy >"$mtmp/tidy.log" 2>&1); then
	echo "check-modules: FAIL: go mod tidy of a module importing metrics:"
	sed 's/^/    /' "$mtmp/tidy.log"
	exit 1
fi
if ! (cd "$mtmp" && "$GO" list -m all) >"$mtmp/all.txt" 2>"$mtmp/list.log"; then
	# A requirement of metrics on an unpublished module of this repository
	# (its kafka module, say) cannot be resolved outside the workspace.
	echo "check-modules: FAIL: \`go list -m all\` of a service importing metrics:"
	sed 's/^/    /' "$mtmp/list.log"
	fail=1
else
	bad=""
	for m in "${kafkaMods[@]}"; do
		found="$(grep -E "^${m//./\\.}(/[^[:space:]]*)?([[:space:]]|$)" "$mtmp/all.txt" || true)"
		[ -n "$found" ] && bad+="$found"$'\n'
	done
	if [ -n "$bad" ]; then
		echo "check-modules: FAIL: \`go list -m all\` of a service importing metrics has Kafka modules:"
		printf '%s' "$bad" | sed 's/^/    /'
		fail=1
	else
		echo "check-modules: ok: \`go list -m all\` of a metrics user ($(wc -l <"$mtmp/all.txt") modules) has none of: ${kafkaMods[*]}"
	fi
fi

exit "$fail"
