#!/usr/bin/env bash
# The floor of the restore benchmark: etcd's own restore procedure by hand, as fast as a
# script can do it. The etcd binaries of ETCD, ETCDCTL and ETCDUTL (the benchmark passes those
# of its etcd version; 3.5.1 when unset), 3 members on loopback addresses, no Kubernetes and no
# operator.
#
#   restore_floor.sh SNAPSHOT ROUNDS
#
# Each round, timed from the start: `etcdutl snapshot restore` of SNAPSHOT into member 0's
# data directory (a new one-member cluster); member 0 started on it, until healthy; then for
# member 1 and member 2: MemberAdd as a learner, started on an empty data directory with the
# member list, promoted once in sync (retried until etcd accepts), until healthy; until
# `endpoint health` answers on all 3. Then, untimed: every member serves the snapshot's
# revision from its own store.
# Prints one line per round:  restore <seconds> (etcdutl <seconds>)
set -euo pipefail

ETCD=${ETCD:-/usr/local/lib/etcd-3.5.1/etcd}
ETCDCTL=${ETCDCTL:-/usr/local/lib/etcd-3.5.1/etcdctl}
ETCDUTL=${ETCDUTL:-/usr/local/lib/etcd-3.5.1/etcdutl}
SNAPSHOT=${1:?usage: restore_floor.sh SNAPSHOT ROUNDS}
ROUNDS=${2:?usage: restore_floor.sh SNAPSHOT ROUNDS}

. "$(dirname "${BASH_SOURCE[0]}")/floor_lib.sh"

start_member() { # index state initial-cluster data-dir
  local i=$1 state=$2 initial=$3 data=$4
  "$ETCD" --name "m$i" --data-dir "$data" \
    --listen-client-urls "$(client "$i")" --advertise-client-urls "$(client "$i")" \
    --listen-peer-urls "$(peer "$i")" --initial-advertise-peer-urls "$(peer "$i")" \
    --listen-metrics-urls "http://$(ip "$i"):2381" --quota-backend-bytes 8589934592 \
    --initial-cluster "$initial" --initial-cluster-state "$state" --initial-cluster-token floor \
    >>"$dir/m$i.log" 2>&1 &
  pids[$i]=$!
  disown
}

healthy() { "$ETCDCTL" --endpoints "$1" endpoint health --command-timeout=2s >/dev/null 2>&1; }
kill_member() {
  kill -9 "${pids[$1]}" 2>/dev/null || true
  while kill -0 "${pids[$1]}" 2>/dev/null; do sleep 0.01; done
}
revision_of() { # client URL -> the revision its own store serves
  "$ETCDCTL" --endpoints "$1" get --consistency=s --limit=1 "" --prefix -w json |
    sed -n 's/.*"revision":\([0-9]*\).*/\1/p'
}

expected=$("$ETCDUTL" snapshot status "$SNAPSHOT" -w json | sed -n 's/.*"revision":\([0-9]*\).*/\1/p')
for round in $(seq "$ROUNDS"); do
  rm -rf "$dir"/m*
  t0=$(now)
  "$ETCDUTL" snapshot restore "$SNAPSHOT" --data-dir "$dir/m0" --name m0 \
    --initial-cluster "m0=$(peer 0)" --initial-advertise-peer-urls "$(peer 0)" \
    --initial-cluster-token floor >/dev/null 2>&1
  restored=$(elapsed "$t0")
  start_member 0 new "m0=$(peer 0)" "$dir/m0"
  until healthy "$(client 0)"; do sleep 0.02; done
  members="m0=$(peer 0)"
  endpoints="$(client 0)"
  for i in 1 2; do
    until out=$("$ETCDCTL" --endpoints "$endpoints" member add "m$i" --learner --peer-urls "$(peer "$i")" 2>&1); do sleep 0.05; done
    id=$(echo "$out" | sed -n 's/^Member  *\([0-9a-f]*\) added.*/\1/p')
    members="$members,m$i=$(peer "$i")"
    start_member "$i" existing "$members" "$dir/m$i"
    until "$ETCDCTL" --endpoints "$endpoints" member promote "$id" >/dev/null 2>&1; do sleep 0.05; done
    endpoints="$endpoints,$(client "$i")"
    until healthy "$(client "$i")"; do sleep 0.02; done
  done
  until healthy "$endpoints"; do sleep 0.02; done
  elapsed_s=$(elapsed "$t0")
  for i in 0 1 2; do
    got=$(revision_of "$(client "$i")")
    [ "$got" = "$expected" ] || { echo "round $round: m$i serves revision $got, the snapshot $expected" >&2; exit 1; }
  done
  echo "restore $elapsed_s (etcdutl $restored)"
  for i in 0 1 2; do kill_member "$i"; done
done
