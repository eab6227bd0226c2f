#!/usr/bin/env bash
# Builds the operator's OCI image on this machine, from scratch and without pulling anything:
# the etcd-operator binary, the shared libraries it links (found by ldd), the CA certificates of
# the machine (for object stores over HTTPS), and a passwd/group naming the non-root user 65532
# that deploy/ and the chart run it as. The result is an oci-archive a user copies to a registry:
#
#   scripts/build-image.sh                       # release build, tag v<workspace version>
#   skopeo copy oci-archive:target/oci/etcd-operator-v0.1.0.tar \
#     docker://registry.example.com/etcd-operator:v0.1.0
#
# Options:
#   --binary PATH   use this etcd-operator binary instead of building one (cargo build --release)
#   --tag TAG       the image tag (default: v + the workspace version in Cargo.toml)
#   --name NAME     the image name recorded in the archive (default ghcr.io/etcd-operator-rs/etcd-operator)
#   --out FILE      where to write the archive (default target/oci/etcd-operator-TAG.tar)
#
# Prints the manifest digest on its last line (sha256:...). Needs umoci and skopeo
# (scripts/install-deps.sh installs both).
set -euo pipefail
cd "$(dirname "$0")/.."

fail() {
  echo "build-image: $*" >&2
  exit 1
}

binary=""
tag=""
name="ghcr.io/etcd-operator-rs/etcd-operator"
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary=${2:?--binary needs a path}; shift 2 ;;
    --tag) tag=${2:?--tag needs a value}; shift 2 ;;
    --name) name=${2:?--name needs a value}; shift 2 ;;
    --out) out=${2:?--out needs a file}; shift 2 ;;
    -h | --help) sed -n '2,19p' "$0"; exit 0 ;;
    *) fail "unknown argument $1 (see --help)" ;;
  esac
done

command -v umoci >/dev/null 2>&1 || fail "umoci is missing; run scripts/install-deps.sh"
command -v skopeo >/dev/null 2>&1 || fail "skopeo is missing; run scripts/install-deps.sh"
command -v ldd >/dev/null 2>&1 || fail "ldd is missing (Debian package libc-bin)"

if [ -z "$tag" ]; then
  version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
  [ -n "$version" ] || fail "cannot read the workspace version from Cargo.toml; pass --tag"
  tag="v${version}"
fi
if [ -z "$binary" ]; then
  echo "build-image: cargo build --release -p etcd-operator --bin etcd-operator" >&2
  cargo build --release --locked -p etcd-operator --bin etcd-operator >&2
  binary=target/release/etcd-operator
fi
[ -x "$binary" ] || fail "$binary is not an executable file"
[ -n "$out" ] || out="target/oci/etcd-operator-${tag}.tar"
mkdir -p "$(dirname "$out")"
out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root="$work/rootfs"
mkdir -p "$root/usr/local/bin" "$root/etc/ssl/certs" "$root/tmp" "$root/home/nonroot"
chmod 1777 "$root/tmp"
install -m 0755 "$binary" "$root/usr/local/bin/etcd-operator"

# The shared libraries, at the paths the binary's loader looks for them (their real files
# copied under the linked names), and the loader itself.
libs=$(ldd "$binary" 2>&1) || fail "ldd $binary failed: $libs"
while read -r line; do
  path=""
  case "$line" in
    *"=> not found"*) fail "$binary needs a library this machine lacks: $line" ;;
    *"=> /"*) path=${line#*=> }; path=${path%% (*} ;;
    /*) path=${line%% (*} ;;
  esac
  [ -n "$path" ] || continue
  mkdir -p "$root$(dirname "$path")"
  cp -L "$path" "$root$path"
done <<<"$libs"
# On a merged-/usr system the loader's path (/lib64/ld-linux-x86-64.so.2) goes through a link.
for dir in lib lib64; do
  if [ -L "/$dir" ] && [ -d "$root/$dir" ]; then
    mkdir -p "$root/usr/$dir"
    cp -a "$root/$dir/." "$root/usr/$dir/"
    rm -rf "${root:?}/$dir"
    ln -s "usr/$dir" "$root/$dir"
  fi
done

if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
fi
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$root/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$root/etc/group"
chown 65532:65532 "$root/home/nonroot"

# The image: an empty one, this root as its only layer, then its configuration.
layout="$work/layout"
umoci init --layout "$layout"
umoci new --image "$layout:$tag"
umoci unpack --image "$layout:$tag" "$work/bundle" >/dev/null
cp -a "$root/." "$work/bundle/rootfs/"
umoci repack --image "$layout:$tag" "$work/bundle"
created=$(date -u +%Y-%m-%dT%H:%M:%SZ)
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
umoci config --image "$layout:$tag" \
  --config.entrypoint /usr/local/bin/etcd-operator \
  --config.cmd run \
  --config.user 65532:65532 \
  --config.workingdir / \
  --config.env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
  --config.label "org.opencontainers.image.source=https://github.com/etcd-operator-rs/etcd-operator" \
  --config.label "org.opencontainers.image.version=$tag" \
  --config.label "org.opencontainers.image.revision=$revision" \
  --config.label "org.opencontainers.image.created=$created" \
  --config.label "org.opencontainers.image.licenses=Apache-2.0" \
  --history.created_by "scripts/build-image.sh"
umoci gc --layout "$layout"

rm -f "$out"
skopeo copy --quiet "oci:$layout:$tag" "oci-archive:$out:$name:$tag" >&2
digest=$(skopeo inspect --format '{{.Digest}}' "oci-archive:$out") ||
  fail "skopeo cannot read the archive it wrote ($out)"
size=$(du -h "$out" | cut -f1)
echo "build-image: $name:$tag in $out ($size)" >&2
echo "build-image: push with: skopeo copy oci-archive:$out docker://<registry>/etcd-operator:$tag" >&2
echo "$digest"
