#!/usr/bin/env bash
# The scripted floor of the bootstrap benchmark: the same etcd binaries, joined one at a time as
# learners (MemberAdd --learner, start, promote), with no Kubernetes and no operator. Retries
# are prompt (100 ms), as a careful human with a script would make them.
#
#   floor.sh N        bootstrap N members; prints "bootstrap N <seconds>"
#   floor.sh N M      bootstrap N, then grow to M; prints both lines ("grow N M <seconds>")
#   FLOOR_TLS=1 floor.sh N   the same with mutual TLS on both ports: an ECDSA P-256 CA and one
#                     certificate for every member's address, made with openssl before the clock
#                     starts (the TLS benchmark's floor)
set -euo pipefail

ETCD=${ETCD:-/usr/local/lib/etcd-3.5.1/etcd}
ETCDCTL=${ETCDCTL:-/usr/local/lib/etcd-3.5.1/etcdctl}
N=${1:?usage: floor.sh N [M]}
M=${2:-$N}

dir=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  sleep 0.2
  rm -rf "$dir"
}
trap cleanup EXIT

# A /24 of loopback addresses of our own, so runs side by side never collide.
net="127.$((RANDOM % 100 + 100)).$((RANDOM % 250 + 1))"
ip() { echo "$net.$(($1 + 1))"; }
peer() { echo "http://$(ip "$1"):2380"; }
client() { echo "http://$(ip "$1"):2379"; }
tls_flags=()
ctl_flags=()
if [[ ${FLOOR_TLS:-0} == 1 ]]; then
  peer() { echo "https://$(ip "$1"):2380"; }
  client() { echo "https://$(ip "$1"):2379"; }
  sans="IP:127.0.0.1"
  for ((j = 0; j < M; j++)); do sans+=",IP:$(ip "$j")"; done
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$dir/ca.key" \
    -out "$dir/ca.crt" -subj /CN=floor-ca -days 1 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$dir/m.key" \
    -out "$dir/m.csr" -subj /CN=root 2>/dev/null
  printf 'extendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=%s\n' "$sans" >"$dir/m.ext"
  openssl x509 -req -in "$dir/m.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
    -out "$dir/m.crt" -days 1 -extfile "$dir/m.ext" 2>/dev/null
  tls_flags=(--cert-file "$dir/m.crt" --key-file "$dir/m.key" --client-cert-auth
    --trusted-ca-file "$dir/ca.crt" --peer-cert-file "$dir/m.crt" --peer-key-file "$dir/m.key"
    --peer-client-cert-auth --peer-trusted-ca-file "$dir/ca.crt")
  ctl_flags=(--cacert "$dir/ca.crt" --cert "$dir/m.crt" --key "$dir/m.key")
fi
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }'; }

start_member() { # index state initial-cluster
  "$ETCD" --name "m$1" --data-dir "$dir/m$1" \
    --listen-client-urls "$(client "$1")" --advertise-client-urls "$(client "$1")" \
    --listen-peer-urls "$(peer "$1")" --initial-advertise-peer-urls "$(peer "$1")" \
    --listen-metrics-urls "http://$(ip "$1"):2381" \
    --initial-cluster "$3" --initial-cluster-state "$2" --initial-cluster-token floor \
    "${tls_flags[@]}" >"$dir/m$1.log" 2>&1 &
  pids+=($!)
  disown # killed by cleanup; no job-control message
}

voters() { # endpoints of members 0..$1-1
  local list=""
  for ((j = 0; j < $1; j++)); do list+="${list:+,}$(client "$j")"; done
  echo "$list"
}

wait_healthy() { # count
  until "$ETCDCTL" "${ctl_flags[@]}" --endpoints "$(voters "$1")" endpoint health --command-timeout=1s >/dev/null 2>&1; do
    sleep 0.05
  done
}

join() { # index: add as a learner, start, promote
  local i=$1 out id initial
  until out=$("$ETCDCTL" "${ctl_flags[@]}" --endpoints "$(voters "$i")" member add "m$i" --learner \
    --peer-urls "$(peer "$i")" 2>&1); do
    sleep 0.1 # "unhealthy cluster" until every voter has been connected for 5 s
  done
  id=$(echo "$out" | awk '/^Member/ {print $2}')
  initial=$(echo "$out" | sed -n 's/^ETCD_INITIAL_CLUSTER="\(.*\)"$/\1/p')
  start_member "$i" existing "$initial"
  until "$ETCDCTL" "${ctl_flags[@]}" --endpoints "$(voters "$i")" member promote "$id" >/dev/null 2>&1; do
    sleep 0.1 # "learner not in sync" until it caught up
  done
}

started=$(now)
start_member 0 new "m0=$(peer 0)"
wait_healthy 1
for ((i = 1; i < N; i++)); do join "$i"; done
wait_healthy "$N"
echo "bootstrap $N $(elapsed "$started")"

if ((M > N)); then
  started=$(now)
  for ((i = N; i < M; i++)); do join "$i"; done
  wait_healthy "$M"
  echo "grow $N $M $(elapsed "$started")"
fi
