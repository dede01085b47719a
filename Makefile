# agentbox: the two front-door commands are `make demo` and `make test`.
SHELL := /bin/bash
GO ?= go
BIN := bin/agentbox
DEMO_OUT ?= $(CURDIR)/out/reconcile

.PHONY: all build setup setup-test demo test test-race vet bench clean

all: build

build:
	bash scripts/build.sh

# setup installs what agentbox's tests and demo need on a fresh Debian host
# (idempotent): tool packages and the locally built Docker base image.
setup:
	bash scripts/setup.sh

# demo runs the main job: the reconciliation agent, offline (scripted model),
# in the native Linux sandbox, and promotes its checked report (setup builds
# bin/ already).
demo: setup
	bash scripts/demo.sh "$(DEMO_OUT)"

vet:
	$(GO) vet ./...
	GOARCH=arm64 $(GO) vet ./... && GOARCH=arm64 $(GO) build ./...
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	"$$($(GO) env GOPATH)/bin/staticcheck" ./...

# test runs every test, the escape tests and the Docker conformance suite
# included (as root; CI=true turns skips of those into failures).
test: setup-test vet
	bash scripts/test.sh

# setup-test is setup plus what only the tests need (a headless browser).
setup-test:
	bash scripts/setup.sh test

bench: build
	bash bench/run.sh

clean:
	rm -rf bin out
