GO ?= go
BIN := bin/runbook

.PHONY: help build test vet fmt-check schema bench fuzz ci

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

build: ## build bin/runbook
	$(GO) build -o $(BIN) ./cmd/runbook

test: ## run the test suite (what CI runs)
	$(GO) test ./...

vet: ## go vet
	$(GO) vet ./...

fmt-check: ## fail when gofmt would change a file
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

schema: ## regenerate schema/playbook.schema.json from the step registry
	$(GO) run ./cmd/runbook schema > schema/playbook.schema.json

bench: ## print the performance figures the issues ask for
	$(GO) test -run '^$$' -bench . -benchmem ./internal/engine ./internal/expr ./internal/state/...
	$(GO) test -run '^$$' -bench Intake -benchtime 20000x ./internal/trigger
	$(GO) run ./tools/benchrun

fuzz: ## fuzz the playbook loader and templates (FUZZTIME=5m)
	$(GO) test -run '^$$' -fuzz FuzzLoad -fuzztime $${FUZZTIME:-5m} ./internal/playbook
	$(GO) test -run '^$$' -fuzz FuzzTemplate -fuzztime $${FUZZTIME:-5m} ./internal/expr

ci: fmt-check vet test ## what .ci/run does
