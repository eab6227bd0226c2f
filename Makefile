# The two commands of the README's quick start, and what they are made of.
SHELL := /bin/bash
CARGO ?= cargo

.PHONY: deps build test crds lint demo

deps:
	@bash scripts/install-deps.sh

build: deps
	$(CARGO) build --workspace --bins

## test: the whole test suite (installs what it needs first).
## The kubectl-driven suites run a second time with kubectl v1.33 (scripts/install-deps.sh
## installs it beside the machine's v1.32).
KUBECTL_NEWER ?= /usr/local/lib/kubectl-v1.33/kubectl
## The history checker's own tests (Go: histories that must pass and must fail) run beside them.
## helm: the one scripts/install-deps.sh installs, beside (never over) a helm of your own.
HELM ?= /usr/local/lib/helm-v4.1.4/helm
export HELM
## Selected from the whole workspace's build (not `-p kube-sandbox`, whose own feature set
## would rebuild kube and the sandbox crate: 2 minutes of every CI run).
KUBECTL_SUITES := package(kube-sandbox) & (binary(=kubectl) | binary(=kubectl_checks) | binary(=admission_policies))

test: deps
	$(CARGO) nextest run --workspace --lib --bins --tests --no-fail-fast
	KUBECTL=$(KUBECTL_NEWER) $(CARGO) nextest run --workspace --lib --bins --tests -E '$(KUBECTL_SUITES)' --no-fail-fast
	$(CARGO) test --workspace --doc
	cd tools/history-checker && go test ./...
	$(MAKE) docs

## crds: regenerate deploy/crds/ from the Rust types, and the chart's copy of them.
crds:
	$(CARGO) run -q -p etcd-operator -- crds --out-dir deploy/crds
	rm -f deploy/helm/etcd-operator/files/crds/*.yaml
	cp deploy/crds/*.yaml deploy/helm/etcd-operator/files/crds/

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

## demo: kube-sandbox with the operator deployed from deploy/ and a 3-member etcd cluster; keeps running.
## `make demo CONTROL_PLANE=kubernetes` runs it on a real control plane, the operator from its chart.
CONTROL_PLANE ?= sandbox
demo:
	@CONTROL_PLANE=$(CONTROL_PLANE) bash scripts/demo.sh

## docs: the documentation site (mkdocs.yml) into target/site, strict: a broken link or anchor,
## or a page left out of the navigation, fails the build.
.PHONY: docs
docs: deps
	NO_MKDOCS_2_WARNING=1 python3 -m mkdocs build --strict
