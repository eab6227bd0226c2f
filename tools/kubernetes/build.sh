#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager and kube-scheduler of the release the wrapper
# module MINOR/ pins (k8s.io/kubernetes in its go.mod; e.g. 1.37) into OUTPUT_DIR, as upstream's
# hack/lib/golang.sh builds them: static (CGO_ENABLED=0), -trimpath, tags selinux,notest, and
# stamped with their version the way hack/lib/version.sh does (without the stamp /version says
# v0.0.0-master).
#
# Why a wrapper module: k8s.io/kubernetes requires its staging modules (k8s.io/api, ...) at
# v0.0.0 and replaces them with ./staging/src/...; a dependency's replaces are ignored, so this
# module replaces each with the published v0.X.Y of the same release (go.mod, made by
# `make-go-mod.sh`) and names the three commands as tools.
set -euo pipefail
minor=${1:?usage: build.sh MINOR OUTPUT_DIR}
out=${2:?usage: build.sh MINOR OUTPUT_DIR}
cd "$(dirname "$0")/$minor"
version=$(awk '$1 == "k8s.io/kubernetes" { print $2 }' go.mod)
[[ "$version" =~ ^v1\.([0-9]+)\.[0-9]+$ ]] || { echo "build.sh: no k8s.io/kubernetes version in $minor/go.mod" >&2; exit 1; }
minor=${BASH_REMATCH[1]}
ldflags="-s -w"
for package in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $package.gitVersion=$version -X $package.gitMajor=1 -X $package.gitMinor=$minor -X $package.gitTreeState=clean"
done
mkdir -p "$out"
CGO_ENABLED=0 go build -trimpath -tags selinux,notest -ldflags "all=$ldflags" -o "$out/" \
  k8s.io/kubernetes/cmd/kube-apiserver \
  k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler
