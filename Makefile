# mcpgate developer tasks. `make help` lists them; `make test` is what CI runs (.ci/run).

GO       ?= go
# FUZZTIME is how long `make fuzz` runs each Fuzz target.
FUZZTIME ?= 20s
# TEST_TIMEOUT bounds one `go test` run of the whole module (the e2e suite included).
TEST_TIMEOUT ?= 30m

.DEFAULT_GOAL := help
.PHONY: help test build peers vet fuzz run conformance e2e clean

## help: list the targets
help:
	@awk -F ': ' '/^## /{ sub(/^## /, ""); printf "  %-12s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

## test: install the e2e peers, vet, then run every test with -race (what CI runs)
test: peers vet
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...
	# Allocation counts need the race detector off (it makes sync.Pool drop items).
	$(GO) test -count=1 -run 'NoAllocs' ./internal/jsonrpc/ ./internal/mux/ ./internal/conn/ ./internal/audit/

## vet: go vet ./...
vet:
	$(GO) vet ./...

## build: build the gateway into bin/mcpgate (stamped with the git commit: `bin/mcpgate version`)
build:
	$(GO) build -buildvcs=auto -o bin/mcpgate ./cmd/mcpgate

## peers: install the pinned npm peers and build the Go conformance server under .cache/
peers:
	bash scripts/peers.sh

## fuzz: run each Fuzz target for FUZZTIME (default 20s)
fuzz:
	FUZZTIME=$(FUZZTIME) bash scripts/fuzz.sh

## run: run the gateway with examples/quickstart.json
run:
	$(GO) run ./cmd/mcpgate serve --config examples/quickstart.json

## conformance: run the official conformance suite against the gateway (verbose)
conformance: peers
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) -v -run 'Conformance' ./e2e/

## e2e: run all end-to-end tests against the real gateway binary (verbose)
e2e: peers
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) -v ./e2e/

## clean: remove bin/ (keeps the .cache/ of installed peers)
clean:
	rm -rf bin

## bench: measure the gateway against mcpecho and supergateway (BENCH_* in scripts/bench.sh) and rewrite docs/benchmarks.md
.PHONY: bench
bench:
	bash scripts/bench.sh --write
