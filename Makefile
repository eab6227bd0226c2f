# The two commands of the README's quick start, and what they are made of.
SHELL := /bin/bash
CARGO ?= cargo

.PHONY: deps build test crds lint demo

deps:
	@bash scripts/install-deps.sh

build: deps
	$(CARGO) build --workspace --bins

## test: the whole test suite (installs what it needs first).
test: deps
	$(CARGO) nextest run --workspace --lib --bins --tests --no-fail-fast
	$(CARGO) test --workspace --doc

## crds: regenerate deploy/crds/ from the Rust types.
crds:
	$(CARGO) run -q -p etcd-operator -- crds --out-dir deploy/crds

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

## demo: kube-sandbox with the operator deployed from deploy/ and a 3-member etcd cluster; keeps running.
demo:
	@bash scripts/demo.sh
