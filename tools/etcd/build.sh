#!/usr/bin/env bash
# Builds etcd, etcdctl and etcdutl of the release the wrapper module MINOR/ pins (e.g. 3.6)
# into OUTPUT_DIR, as etcd's scripts/build_lib.sh does: static, -trimpath, the version in the
# GitSHA stamp. Each of etcd's modules replaces its siblings with local paths, which a
# dependency's go.mod cannot do, so `go install go.etcd.io/etcd/...@vX` is refused; the wrapper
# requires server, etcdctl and etcdutl at one release and MVS takes the published api, client
# and pkg modules of that release.
set -euo pipefail
minor=${1:?usage: build.sh MINOR OUTPUT_DIR}
out=${2:?usage: build.sh MINOR OUTPUT_DIR}
cd "$(dirname "$0")/$minor"
version=$(awk '$1 == "go.etcd.io/etcd/server/v3" { print $2 }' go.mod)
[ -n "$version" ] || { echo "build.sh: no go.etcd.io/etcd/server/v3 in $minor/go.mod" >&2; exit 1; }
mkdir -p "$out"
for module in server etcdctl etcdutl; do
  name=$module
  [ "$module" = server ] && name=etcd
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=$version" \
    -o "$out/$name" "go.etcd.io/etcd/$module/v3"
done
