#!/usr/bin/env bash
# The floor of the NOSPACE part of the quorum-recovery benchmark: etcd's own remedy by hand,
# as fast as a script can do it (https://etcd.io/docs/v3.5/op-guide/maintenance/#space-quota).
# The same etcd binaries, 3 members on loopback addresses, no Kubernetes and no operator.
#
#   nospace_floor.sh QUOTA_MIB ROUNDS
#
# Each round: a fresh 3-member cluster with --quota-backend-bytes QUOTA_MIB MiB, five keys
# overwritten with 64 KiB values until etcd refuses a put (NOSPACE raised); then, timed from
# that refusal: the revision read, the keyspace compacted to it (--physical), every member
# defragmented one at a time (followers first, the leader last), the alarm disarmed, and a put
# accepted. Prints per round:
#   nospace <seconds>
#   dbsize_before <MiB>   (the largest member's backend at the refusal)
#   dbsize_after <MiB>
set -euo pipefail

ETCD=${ETCD:-/usr/local/lib/etcd-3.5.1/etcd}
ETCDCTL=${ETCDCTL:-/usr/local/lib/etcd-3.5.1/etcdctl}
QUOTA_MIB=${1:?usage: nospace_floor.sh QUOTA_MIB ROUNDS}
ROUNDS=${2:?usage: nospace_floor.sh QUOTA_MIB ROUNDS}

. "$(dirname "${BASH_SOURCE[0]}")/floor_lib.sh"

start_member() { # index initial-cluster data-dir
  local i=$1 initial=$2 data=$3
  "$ETCD" --name "m$i" --data-dir "$data" \
    --listen-client-urls "$(client "$i")" --advertise-client-urls "$(client "$i")" \
    --listen-peer-urls "$(peer "$i")" --initial-advertise-peer-urls "$(peer "$i")" \
    --listen-metrics-urls "http://$(ip "$i"):2381" \
    --initial-cluster "$initial" --initial-cluster-state new --initial-cluster-token floor \
    --quota-backend-bytes $((QUOTA_MIB * 1024 * 1024)) >>"$dir/m$i.log" 2>&1 &
  pids[$i]=$!
  disown
}

healthy() { "$ETCDCTL" --endpoints "$1" endpoint health --command-timeout=1s >/dev/null 2>&1; }
# The largest backend of the members, in MiB (endpoint status: "... dbSize ...").
largest_db() {
  "$ETCDCTL" --endpoints "$(client 0),$(client 1),$(client 2)" endpoint status -w json \
    | grep -o '"dbSize":[0-9]*' | cut -d: -f2 | sort -n | tail -1 \
    | awk '{ printf "%.1f", $1 / 1048576 }'
}

value=$(head -c 65536 /dev/zero | tr '\0' x)
for round in $(seq "$ROUNDS"); do
  rm -rf "$dir"/m*
  initial="m0=$(peer 0),m1=$(peer 1),m2=$(peer 2)"
  for i in 0 1 2; do start_member "$i" "$initial" "$dir/m$i"; done
  all="$(client 0),$(client 1),$(client 2)"
  until healthy "$all"; do sleep 0.05; done
  i=0
  while "$ETCDCTL" --endpoints "$all" put "k$((i % 5))" "$value" >/dev/null 2>&1; do
    i=$((i + 1))
    [ "$i" -lt 100000 ] || { echo "round $round: etcd never refused a put" >&2; exit 1; }
  done
  t0=$(now)
  "$ETCDCTL" --endpoints "$all" alarm list | grep -q NOSPACE \
    || { echo "round $round: a put was refused without NOSPACE" >&2; exit 1; }
  before=$(largest_db)
  # The current revision, from a read's header.
  revision=$("$ETCDCTL" --endpoints "$all" get k0 -w json | grep -o '"revision":[0-9]*' | head -1 | cut -d: -f2)
  "$ETCDCTL" --endpoints "$all" compact "$revision" --physical >/dev/null
  # `endpoint status` (simple): "URL, ID, version, db size, is leader, ...".
  leader=$("$ETCDCTL" --endpoints "$all" endpoint status | awk -F', ' '$5 == "true" { print $1 }')
  for m in 0 1 2; do
    [ "$(client "$m")" = "$leader" ] && continue
    "$ETCDCTL" --endpoints "$(client "$m")" defrag --command-timeout=60s >/dev/null
  done
  [ -n "$leader" ] && "$ETCDCTL" --endpoints "$leader" defrag --command-timeout=60s >/dev/null
  "$ETCDCTL" --endpoints "$all" alarm disarm >/dev/null
  until "$ETCDCTL" --endpoints "$all" put after "v" >/dev/null 2>&1; do sleep 0.02; done
  echo "nospace $(elapsed "$t0")"
  echo "dbsize_before $before"
  echo "dbsize_after $(largest_db)"
  for i in 0 1 2; do
    kill -9 "${pids[$i]}" 2>/dev/null || true
    while kill -0 "${pids[$i]}" 2>/dev/null; do sleep 0.01; done
  done
done
