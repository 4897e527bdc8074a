GO ?= go
BIN := bin/runbook

.PHONY: help build test vet fmt-check tidy-check schema docs bench fuzz mutate ci

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

schema: ## regenerate schema/playbook.schema.json (step registry) and schema/playbook-test.schema.json
	$(GO) run ./cmd/runbook schema > schema/playbook.schema.json
	$(GO) run ./cmd/runbook test --schema > schema/playbook-test.schema.json

docs: ## regenerate docs/steps (one page per step family) from the step registry
	$(GO) run ./cmd/runbook steps --markdown docs/steps

bench: ## print the performance figures the issues ask for
	$(GO) test -run '^$$' -bench . -skip 'WaitingRuns|Sequential(Set|Shell)Steps' -benchmem ./internal/engine ./internal/expr ./internal/state/... ./internal/secrets
	# 10,000 waiting runs (approvals, sleeps) and their resume in a fresh process, with the soft memory limit runbook serve sets
	GOMEMLIMIT=160MiB $(GO) test -run '^$$' -bench WaitingRuns -benchtime 1x ./internal/engine
	# the engine on both stores (issue 14: a set step <= 0.5 ms on PostgreSQL; a 100-step shell chain <= 1.5x its bbolt time)
	$(GO) test -run '^$$' -bench 'Sequential(Set|Shell)Steps' -benchtime 3000x ./internal/engine
	# the webhook intake on both stores, then through a whole server with the runs executing (issue 14: >= 3,000 deliveries/s, p99 <= 20 ms on PostgreSQL)
	$(GO) test -run '^$$' -bench 'Intake$$|IntakeStarter' -benchtime 20000x ./internal/trigger
	# one and three intakes, each with its own Store, on one PostgreSQL database (issue 14: three together >= one)
	$(GO) test -run '^$$' -bench IntakeReplicas -benchtime 20000x -count 3 ./internal/trigger
	$(GO) test -run '^$$' -bench WebhookIntake -benchtime 20000x ./internal/server
	# one and three whole runbook serve replicas on one PostgreSQL database, the runs executing
	$(GO) test -run '^$$' -bench ReplicasIntake -benchtime 3000x ./cmd/runbook
	# a real runbook serve on PostgreSQL under 32 webhook senders, when RUNBOOK_BENCH_POSTGRES names an empty database
	@if [ -n "$$RUNBOOK_BENCH_POSTGRES" ]; then $(GO) run ./tools/webhookload -playbook log -n 20000 -c 32 -state "$$RUNBOOK_BENCH_POSTGRES"; \
	else echo "webhookload on PostgreSQL skipped: set RUNBOOK_BENCH_POSTGRES=postgres://... (an empty database)"; fi
	# schedule lateness of a server firing 20 playbooks every second for 6 s
	$(GO) test -run '^$$' -bench ScheduleLateness -benchtime 1x ./internal/server
	$(GO) run ./tools/benchrun

fuzz: ## fuzz the playbook loader, templates and the webhook intake (FUZZTIME=5m)
	$(GO) test -run '^$$' -fuzz FuzzLoad -fuzztime $${FUZZTIME:-5m} ./internal/playbook
	$(GO) test -run '^$$' -fuzz FuzzTemplate -fuzztime $${FUZZTIME:-5m} ./internal/expr
	$(GO) test -run '^$$' -fuzz FuzzIntake -fuzztime $${FUZZTIME:-5m} ./internal/trigger

GREMLINS := github.com/go-gremlins/gremlins/cmd/gremlins@v0.6.0
PKG ?= ./internal/engine

mutate: ## mutation-test one package (PKG=./internal/expr; default ./internal/engine) and print the score per file
	GOFLAGS=-count=1 $(GO) run $(GREMLINS) unleash --workers 1 --timeout-coefficient 3 $(PKG) | tee mutate.log
	$(GO) run ./tools/mutscore -lived mutate.log

tidy-check: ## fail when go mod tidy would change go.mod or go.sum
	$(GO) mod tidy -diff

ci: fmt-check tidy-check vet test ## what .ci/run does
