#!/usr/bin/env bash
# Writes MINOR/go.mod and go.sum (e.g. 3.6) of the wrapper for etcd VERSION (e.g. 3.6.17):
# server, etcdctl and etcdutl required at vVERSION and named as tools, then `go mod tidy`.
set -euo pipefail
version=${1:?usage: make-go-mod.sh VERSION (e.g. 3.6.17)}
minor=${version%.*}
cd "$(dirname "$0")"
mkdir -p "$minor"
cd "$minor"
rm -f go.mod go.sum
go mod init "etcd-operator.local/tools/etcd/$minor"
go mod edit -go=1.26.0 -godebug=default=go1.26
for module in server etcdctl etcdutl; do
  go mod edit -require="go.etcd.io/etcd/$module/v3@v$version" -tool="go.etcd.io/etcd/$module/v3"
done
go mod tidy
