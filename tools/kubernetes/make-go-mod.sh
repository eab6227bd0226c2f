#!/usr/bin/env bash
# Writes MINOR/go.mod and go.sum (e.g. 1.37/) of the wrapper for Kubernetes VERSION (e.g.
# 1.37.2): the release's own go line and godebug default, k8s.io/kubernetes required at
# vVERSION, every staging module it requires at v0.0.0 replaced by the published
# v0.MINOR.PATCH, the three commands as tools, then `go mod tidy` (never `go get -u`: a newer
# k8s.io/kube-openapi needs a newer Go).
set -euo pipefail
version=${1:?usage: make-go-mod.sh VERSION (e.g. 1.37.2)}
minor=$(cut -d. -f1,2 <<<"$version")
cd "$(dirname "$0")"
mkdir -p "$minor"
cd "$minor"
staging=0.${version#1.}
release_mod=$(go mod download -json "k8s.io/kubernetes@v$version" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
go_line=$(awk '$1 == "go" { print $2 }' "$release_mod")
rm -f go.mod go.sum
go mod init "etcd-operator.local/tools/kubernetes/$minor"
go mod edit -go="$go_line" -godebug="default=go${go_line%.*}" -require="k8s.io/kubernetes@v$version"
for module in $(awk '$2 == "v0.0.0" && $1 ~ /^k8s\.io\// { print $1 }' "$release_mod"); do
  go mod edit -replace="$module=$module@v$staging"
done
for command in kube-apiserver kube-controller-manager kube-scheduler; do
  go mod edit -tool="k8s.io/kubernetes/cmd/$command"
done
go mod tidy
