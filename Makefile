# oncebox for Go — run `make help` for the targets.
GO       ?= go
PKGS     ?= ./...
SERVICES ?= postgres mariadb redis rabbitmq
# The modules of the workspace (go.work): the core at the root and one per
# heavy dependency (docs/modules.md). `go test ./...` at the root covers the
# core module only, so test and lint run in each.
MODULES   = $(shell $(GO) list -m -f '{{.Dir}}')

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: services
services: ## Start the local services the tests need if they are down.
	@bash scripts/services.sh $(SERVICES)

.PHONY: tools
tools: ## Under CI, install the Debian packages the tests use (kcat, chromium, pgbouncer) if missing; elsewhere say what is missing.
	@for pkg in kcat chromium pgbouncer; do \
	  if command -v $$pkg >/dev/null 2>&1; then echo "tools: $$pkg is installed"; \
	  elif [ -n "$$CI" ] && command -v apt-get >/dev/null 2>&1; then echo "tools: installing $$pkg (CI)"; \
	    [ -n "$$updated" ] || { apt-get update -qq >/dev/null; updated=1; }; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$pkg >/dev/null && echo "tools: $$pkg is installed"; \
	  else case $$pkg in \
	    kcat) echo "tools: kcat is not installed: the kafka test that reads with kcat will be skipped (apt-get install kcat, brew install kcat)" ;; \
	    chromium) echo "tools: chromium is not installed: the console's browser test will be skipped (apt-get install chromium)" ;; \
	    pgbouncer) echo "tools: pgbouncer is not installed: the PgBouncer tests (e2e/postgres) will be skipped (apt-get install pgbouncer)" ;; \
	  esac; fi; \
	done

.PHONY: demo
demo: ## Run the quick-start demo: SQLite in a temporary file and an in-process Kafka, nothing to install (DATABASE_URL=postgres://… or mysql://…, KAFKA_BROKERS override).
	@case "$$DATABASE_URL" in \
	  postgres://*|postgresql://*) bash scripts/services.sh postgres ;; \
	  mysql://*|mariadb://*) bash scripts/services.sh mariadb ;; \
	esac
	$(GO) run ./examples/quickstart

.PHONY: orders
orders: services ## Run the orders example (API + relay, shipping, traffic) for 15s and check it; BROKER=rabbitmq for RabbitMQ.
	$(GO) run ./examples/orders/cmd/all-in-one

.PHONY: test
test: services tools ## Run every test of every module with the race detector against the real services (scripts/test.sh).
	@GO="$(GO)" PKGS="$(PKGS)" bash scripts/test.sh

.PHONY: lint
lint: ## Check formatting (gofmt), run go vet (stdversion included) in every module, check the core's dependencies and that no SQL is written outside the database packages.
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	@fail=0; for m in $(MODULES); do \
	  echo "vet: $$m"; (cd "$$m" && $(GO) vet $(PKGS)) || fail=1; \
	done; exit $$fail
	@bash scripts/check-modules.sh
	@$(GO) test -count=1 -run '^TestNoSQLOutsideTheDatabasePackages$$' .

.PHONY: tidy
tidy: ## Run go mod tidy in every module (scripts/tidy-modules.sh).
	@bash scripts/tidy-modules.sh

.PHONY: bench
bench: services ## Run the benchmark harness; writes bench/results/latest.{md,json}.
	$(GO) run ./bench -out bench/results

.PHONY: fuzz
fuzz: ## Fuzz the metadata encoder for 30 seconds.
	$(GO) test -run '^$$' -fuzz FuzzEncodeMatchesEncodingJSON -fuzztime 30s ./internal/metadata
