# oncebox for Go — run `make help` for the targets.
GO       ?= go
PKGS     ?= ./...
SERVICES ?= postgres redis

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: services
services: ## Start the local services the tests need if they are down.
	@bash scripts/services.sh $(SERVICES)

.PHONY: test
test: services ## Run every test with the race detector against the real services.
	$(GO) test -race -count=1 -timeout 14m $(PKGS)

.PHONY: lint
lint: ## Check formatting (gofmt) and run go vet.
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

.PHONY: bench
bench: services ## Run the benchmark harness; writes bench/results/latest.{md,json}.
	$(GO) run ./bench -out bench/results

.PHONY: fuzz
fuzz: ## Fuzz the metadata encoder for 30 seconds.
	$(GO) test -run '^$$' -fuzz FuzzEncodeMatchesEncodingJSON -fuzztime 30s ./internal/metadata
