#!/usr/bin/env bash
# The floor of the recovery benchmark: the same etcd binaries, 3 members on loopback addresses,
# no Kubernetes and no operator, repaired as fast as a script can.
#
#   recovery_floor.sh ROUNDS
#
# Prints one line per round and kind:
#   restart <seconds>   member 2 killed (SIGKILL) and started again on its own data directory,
#                       until it answers `endpoint health`;
#   replace <seconds>   member 2 killed and its data lost (a memory-backed member): MemberRemove,
#                       MemberAdd as a learner, started on an empty directory, promoted once in
#                       sync, until it answers `endpoint health` as a voter.
set -euo pipefail

ETCD=${ETCD:-/usr/local/lib/etcd-3.5.1/etcd}
ETCDCTL=${ETCDCTL:-/usr/local/lib/etcd-3.5.1/etcdctl}
ROUNDS=${1:?usage: recovery_floor.sh ROUNDS}

. "$(dirname "${BASH_SOURCE[0]}")/floor_lib.sh"
all() { echo "$(client 0),$(client 1),$(client 2)"; }
others() { echo "$(client 0),$(client 1)"; }

start_member() { # index state initial-cluster data-dir
  "$ETCD" --name "m$1" --data-dir "$4" \
    --listen-client-urls "$(client "$1")" --advertise-client-urls "$(client "$1")" \
    --listen-peer-urls "$(peer "$1")" --initial-advertise-peer-urls "$(peer "$1")" \
    --listen-metrics-urls "http://$(ip "$1"):2381" \
    --initial-cluster "$3" --initial-cluster-state "$2" --initial-cluster-token floor \
    >>"$dir/m$1.log" 2>&1 &
  pids[$1]=$!
  disown
}

healthy() { # endpoint
  "$ETCDCTL" --endpoints "$1" endpoint health --command-timeout=1s >/dev/null 2>&1
}

kill_member() { # index
  kill -9 "${pids[$1]}"
  while kill -0 "${pids[$1]}" 2>/dev/null; do sleep 0.01; done
}

initial="m0=$(peer 0),m1=$(peer 1),m2=$(peer 2)"
for i in 0 1 2; do start_member "$i" new "$initial" "$dir/m$i"; done
until healthy "$(all)"; do sleep 0.05; done
"$ETCDCTL" --endpoints "$(all)" put floor-key value >/dev/null

generation=0
m2dir="$dir/m2"
for ((round = 1; round <= ROUNDS; round++)); do
  # Restart on its own data.
  kill_member 2
  started=$(now)
  start_member 2 existing "$initial" "$m2dir"
  until healthy "$(client 2)"; do sleep 0.02; done
  echo "restart $(elapsed "$started")"
  sleep 1

  # Replace: the data is gone, so it joins again as a new member.
  kill_member 2
  started=$(now)
  id=$("$ETCDCTL" --endpoints "$(others)" member list | awk -F', ' -v n="m2" '$3 == n {print $1}')
  until "$ETCDCTL" --endpoints "$(others)" member remove "$id" >/dev/null 2>&1; do sleep 0.02; done
  generation=$((generation + 1))
  until out=$("$ETCDCTL" --endpoints "$(others)" member add m2 --learner --peer-urls "$(peer 2)" 2>&1); do
    sleep 0.02 # "unhealthy cluster" for 5 s after a voter (re)connects
  done
  new_id=$(echo "$out" | awk '/^Member/ {print $2}')
  joined=$(echo "$out" | sed -n 's/^ETCD_INITIAL_CLUSTER="\(.*\)"$/\1/p')
  m2dir="$dir/m2-$generation"
  start_member 2 existing "$joined" "$m2dir"
  until "$ETCDCTL" --endpoints "$(others)" member promote "$new_id" >/dev/null 2>&1; do
    sleep 0.02 # "learner not in sync" until it caught up
  done
  until healthy "$(client 2)"; do sleep 0.02; done
  echo "replace $(elapsed "$started")"
  sleep 1
done
