GO ?= go
BIN := bin/runbook
DIST ?= dist

# The version, the commit and the commit's time are stamped into the binary
# (cmd/runbook/version.go). They come from git, never from the clock, so that
# two builds of one commit are the same bytes: -trimpath drops the checkout's
# path, -buildid= the build ID, -buildvcs=false the work tree's state.
# Without a v* tag, git describe gives only the commit; the version is then
# v0.0.0-g<commit>.
DESCRIBE := $(shell git describe --tags --always --abbrev=12 --dirty --match 'v[0-9]*' 2>/dev/null)
VERSION ?= $(if $(filter v%,$(DESCRIBE)),$(DESCRIBE),v0.0.0-g$(DESCRIBE))
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
COMMIT_DATE ?= $(shell TZ=UTC0 git show -s --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd HEAD 2>/dev/null)
LDFLAGS := -s -w -buildid= -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.commitDate=$(COMMIT_DATE)
RELEASE_FLAGS := -trimpath -buildvcs=false -ldflags '$(LDFLAGS)'
PLATFORMS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
IMAGE_ARCHES ?= amd64 arm64

.PHONY: help build release image version deploy-test test vet fmt-check tidy-check schema docs bench bench-e2e bench-agents fuzz mutate ci

help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

build: ## build bin/runbook, stamped with the version, commit and commit date
	CGO_ENABLED=0 $(GO) build $(RELEASE_FLAGS) -o $(BIN) ./cmd/runbook

version: ## print the version the builds stamp
	@echo $(VERSION)

release: ## cross-compile binaries (CGO_ENABLED=0; static on linux) for linux and darwin (amd64, arm64) into dist/, with dist/SHA256SUMS
	@mkdir -p $(DIST) && rm -f $(DIST)/runbook-v* $(DIST)/SHA256SUMS
	@for p in $(PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; out=$(DIST)/runbook-$(VERSION)-$$os-$$arch; \
		echo "build $$out"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build $(RELEASE_FLAGS) -o $$out ./cmd/runbook || exit 1; \
	done
	cd $(DIST) && sha256sum runbook-$(VERSION)-* > SHA256SUMS

image: ## build the container image (an OCI layout and a docker-loadable tarball per arch of IMAGE_ARCHES) into dist/, without a Docker daemon
	@mkdir -p $(DIST)
	@for arch in $(IMAGE_ARCHES); do \
		out=$(DIST)/runbook-$(VERSION)-linux-$$arch; \
		echo "build $$out"; \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build $(RELEASE_FLAGS) -o $$out ./cmd/runbook || exit 1; \
	done
	cd deploy && $(GO) run ./image -version $(VERSION) -revision $(COMMIT) -created $(COMMIT_DATE) \
		-binaries $(abspath $(DIST))/runbook-$(VERSION)-linux-ARCH -arches '$(IMAGE_ARCHES)' \
		-ca-certs /etc/ssl/certs/ca-certificates.crt -out $(abspath $(DIST))

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
	$(GO) test -run '^$$' -bench . -skip 'WaitingRuns|Sequential(Set|Shell)Steps|EngineSteps' -benchmem ./internal/engine ./internal/expr ./internal/state/... ./internal/secrets
	# a shell step against its floor, os/exec running /bin/sh -c true (issue 31: the copy buffers come from a pool)
	$(GO) test -run '^$$' -bench 'ExecTrue|ShellTrue' -benchmem ./internal/steps/core
	# 10,000 waiting runs (approvals, sleeps) and their resume in a fresh process, with the soft memory limit runbook serve sets
	GOMEMLIMIT=160MiB $(GO) test -run '^$$' -bench WaitingRuns -benchtime 1x ./internal/engine
	# the engine on both stores (issue 14: a set step <= 0.5 ms on PostgreSQL; a 100-step shell chain <= 1.5x its bbolt time); EngineSteps: the engine's own work a step, without a process or an fsync (issue 31)
	$(GO) test -run '^$$' -bench 'Sequential(Set|Shell)Steps|EngineSteps' -benchtime 3000x -benchmem ./internal/engine
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

bench-e2e: ## end-to-end figures on bbolt and PostgreSQL, 1 and 3 replicas (docs/performance.md; ARGS='-n 2000 -chains 100')
	$(GO) test -tags benche2e -run '^TestBenchE2E$$' -count 1 -v -timeout 60m ./tools/benche2e -args $(ARGS)

bench-agents: ## runs on 20 runbook agents x 10 through 1 and 3 replicas, one killed: lost, twice, dispatch p50/p99 (docs/agents.md; ARGS='-stores postgres-3 -agent-runs 10000')
	$(GO) test -tags benche2e -run '^TestBenchAgents$$' -count 1 -v -timeout 60m ./tools/benche2e -args $(ARGS)

fuzz: ## fuzz the playbook loader, templates and the webhook intake (FUZZTIME=5m)
	$(GO) test -run '^$$' -fuzz FuzzLoad -fuzztime $${FUZZTIME:-5m} ./internal/playbook
	$(GO) test -run '^$$' -fuzz FuzzTemplate -fuzztime $${FUZZTIME:-5m} ./internal/expr
	$(GO) test -run '^$$' -fuzz FuzzIntake -fuzztime $${FUZZTIME:-5m} ./internal/trigger

GREMLINS := github.com/go-gremlins/gremlins/cmd/gremlins@v0.6.0
PKG ?= ./internal/engine

mutate: ## mutation-test one package (PKG=./internal/expr; default ./internal/engine) and print the score per file
	GOFLAGS=-count=1 $(GO) run $(GREMLINS) unleash --workers 1 --timeout-coefficient 3 $(PKG) | tee mutate.log
	$(GO) run ./tools/mutscore -lived mutate.log

tidy-check: ## fail when go mod tidy would change go.mod or go.sum (both modules)
	$(GO) mod tidy -diff
	cd deploy && $(GO) mod tidy -diff

deploy-test: ## test the image, the Helm chart and the systemd unit (the deploy module)
	cd deploy && $(GO) vet ./... && $(GO) test ./...

ci: fmt-check tidy-check vet test deploy-test ## what .ci/run does
