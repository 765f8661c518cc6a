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
