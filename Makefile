# miglayout developer targets. `make help` lists them.
SHELL := /usr/bin/env bash
export CGO_ENABLED := 1
export CGO_CFLAGS := -Wno-deprecated-declarations
GO ?= go

.PHONY: help build test unit vet lint generate verify
help: ## list targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

# The README's first command: builds what it needs (the first run compiles Kubernetes from
# the Go module proxy, 10-15 min on 2 cores), runs miglayout on a real control plane with simulated
# GPUs, exits 0 when every step passed. KEEP=1 leaves the cluster up until Ctrl-C.
# Built, then run (not go run, which exits 1 when Ctrl-C stops the kept cluster).
.PHONY: demo
demo: ## one-command demo on simulated GPUs (KEEP=1 leaves the cluster up)
	$(GO) build -o bin/miglayout-demo ./cmd/miglayout-demo
	bin/miglayout-demo $(if $(filter-out 0,$(KEEP)),--keep)

build: ## build every command into bin/
	$(GO) build -o bin/ ./cmd/...

unit: ## unit tests only (no control plane)
	$(GO) test ./pkg/... ./api/... ./cmd/... ./deploy/...

vet: ## go vet
	$(GO) vet ./...

lint: vet ## gofmt check + go vet + staticcheck (a tool of go.mod)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) tool staticcheck ./...

# Control-plane binaries for test/harness (etcd, kube-apiserver, kube-scheduler,
# kube-controller-manager, kubectl), built from the Go module proxy into
# $$MIGLAYOUT_TESTBIN or ~/.cache/miglayout/testbin/...; 10-15 min the first time on 2 cores, instant after.
.PHONY: testbin testcluster
# The tests run in each package's directory: a relative MIGLAYOUT_TESTBIN is made absolute
# (from the repository root, as test/testbin/build.sh reads it).
ifneq ($(MIGLAYOUT_TESTBIN),)
export MIGLAYOUT_TESTBIN := $(abspath $(MIGLAYOUT_TESTBIN))
endif
testbin: ## build the control-plane binaries the e2e tests need (10-15 min first time on 2 cores, then cached)
	test/testbin/build.sh

test: testbin ## every test, e2e against a real control plane included
	$(GO) test -timeout 45m ./...

# The race detector over every test, the controller, agent and kubectl-plugin binaries that
# the e2e tests build and start included (GOFLAGS reaches their go build); their reports go
# to RACE_LOGS, which must stay empty.
RACE_LOGS := $(abspath test/.state/race)
.PHONY: race
race: testbin ## every test under the race detector, the binaries the e2e tests start included (~35 min on 2 cores)
	@rm -rf $(RACE_LOGS) && mkdir -p $(RACE_LOGS)
	GOFLAGS="$(strip $(GOFLAGS) -race)" GORACE="log_path=$(RACE_LOGS)/race halt_on_error=0" $(GO) test -timeout 90m ./...
	@if [ -n "$$(ls -A $(RACE_LOGS))" ]; then echo "data races reported: $(RACE_LOGS)"; ls $(RACE_LOGS); exit 1; fi

testcluster: testbin ## run the bare test control plane (no miglayout: try it on `make demo KEEP=1`) in the foreground (KUBECONFIG=test/.state/testcluster/kubeconfig)
	$(GO) run ./test/harness/cmd/testcluster up --state test/.state/testcluster

# Container images of the controller and the agent (deploy/images/Dockerfile; needs a Docker
# engine with BuildKit). REGISTRY and TAG name them: $(REGISTRY)/miglayout-controller:$(TAG).
REGISTRY ?= localhost:5000
TAG ?= $(shell sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}/\1/p' deploy/helm/miglayout/Chart.yaml)
.PHONY: images
images: ## build the controller and agent images (REGISTRY=..., TAG=... default the chart's appVersion)
	docker build -f deploy/images/Dockerfile --target controller -t $(REGISTRY)/miglayout-controller:$(TAG) .
	docker build -f deploy/images/Dockerfile --target agent -t $(REGISTRY)/miglayout-agent:$(TAG) .

# Multi-platform images (arm64 for Grace nodes such as GH200 beside amd64 ones) are built by
# docker buildx, the build stage running under emulation for each platform (cgo), and pushed
# (a multi-platform image cannot be loaded into the local image store).
PLATFORMS ?= linux/amd64,linux/arm64
.PHONY: images-push
images-push: ## build the controller and agent images for PLATFORMS with docker buildx and push them to REGISTRY
	docker buildx build --platform $(PLATFORMS) -f deploy/images/Dockerfile --target controller -t $(REGISTRY)/miglayout-controller:$(TAG) --push .
	docker buildx build --platform $(PLATFORMS) -f deploy/images/Dockerfile --target agent -t $(REGISTRY)/miglayout-agent:$(TAG) --push .

.PHONY: generate verify
generate: ## regenerate deepcopy code, CRD manifests (map values made nullable, TestCRDNullableMapValues) and the Helm chart's copies (CRDs, RBAC) from the markers
	$(GO) tool controller-gen object paths=./api/...
	$(GO) tool controller-gen crd paths=./api/... output:crd:dir=deploy/crds
	@out=$$(mktemp); $(GO) test ./deploy/helm -run '^TestCRDNullableMapValues$$' -count=1 -update >$$out 2>&1 || { cat $$out; rm -f $$out; exit 1; }; rm -f $$out
	@out=$$(mktemp); $(GO) test ./deploy/helm -run 'InSync' -count=1 -update >$$out 2>&1 || { cat $$out; rm -f $$out; exit 1; }; rm -f $$out

verify: generate ## fail when generated files are out of date
	@git diff --exit-code -- api deploy/crds deploy/helm || { echo "generated files are stale: run make generate and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- api deploy/crds deploy/helm)" || { git status --porcelain -- api deploy/crds deploy/helm; echo "generated files are untracked or stale: run make generate and commit"; exit 1; }

# Reliability (issue 7): the chaos suite, the drain race and the bad-input corpus run in
# `make test` (quick mode); `make chaos` is the long mode, `make fuzz` the fuzz targets.
.PHONY: chaos chaos-quick chaos-auto badinput fuzz
chaos-quick: testbin ## quick chaos suite, Auto chaos + drain race on the test cluster (CI mode, ~6 min)
	$(GO) test -count=1 -v ./test/chaos

chaos: testbin ## long chaos mode: SCENARIOS (default 500) seeded scenarios + drain race (~1 h); SEED=n to replay a run
	$(GO) run ./cmd/miglayout-chaos -scenarios $(or $(SCENARIOS),500) $(if $(SEED),-seed $(SEED))

chaos-auto: testbin ## long Auto-mode chaos: SCENARIOS (default 40) seeded Auto scenarios (~15 min); SEED=n to replay a run
	$(GO) run ./cmd/miglayout-chaos -scenarios 0 -race-rounds 0 -auto-scenarios $(or $(SCENARIOS),40) $(if $(SEED),-seed $(SEED))

badinput: testbin ## bad-input corpus against the real API server with agents running (~1 min)
	$(GO) test -count=1 -v ./test/e2e/badinput

fuzz: ## the fuzz targets of the layout and profile-name parsers and the planner, FUZZTIME each (default 30s)
	$(GO) test ./pkg/mig -run '^$$' -fuzz '^FuzzParseLayout$$' -fuzztime $(or $(FUZZTIME),30s)
	$(GO) test ./pkg/mig -run '^$$' -fuzz '^FuzzParseProfileName$$' -fuzztime $(or $(FUZZTIME),30s)
	$(GO) test ./pkg/planner -run '^$$' -fuzz '^FuzzPlan$$' -fuzztime $(or $(FUZZTIME),30s)
