# miglayout developer targets. `make help` lists them.
SHELL := /usr/bin/env bash
export CGO_ENABLED := 1
export CGO_CFLAGS := -Wno-deprecated-declarations
GO ?= go

.PHONY: help build test unit vet lint generate verify
help: ## list targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

build: ## build every command into bin/
	$(GO) build -o bin/ ./cmd/...

unit: ## unit tests only (no control plane)
	$(GO) test ./pkg/... ./api/... ./cmd/...

vet: ## go vet
	$(GO) vet ./...

lint: vet ## gofmt check + go vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

.PHONY: generate verify
generate: ## regenerate deepcopy code and CRD manifests from api/ markers
	$(GO) tool controller-gen object paths=./api/...
	$(GO) tool controller-gen crd paths=./api/... output:crd:dir=deploy/crds

verify: generate ## fail when generated files are out of date
	@git diff --exit-code -- api deploy/crds || { echo "generated files are stale: run make generate and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- api deploy/crds)" || { git status --porcelain -- api deploy/crds; echo "generated files are untracked or stale: run make generate and commit"; exit 1; }
