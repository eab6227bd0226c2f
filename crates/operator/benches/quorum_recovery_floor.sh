#!/usr/bin/env bash
# The floor of the quorum-recovery benchmark: etcd's own disaster-recovery procedure by hand,
# as fast as a script can do it. The same etcd binaries, 3 members on loopback addresses, no
# Kubernetes and no operator.
#
#   quorum_recovery_floor.sh ROUNDS
#
# Each round: a fresh 3-member cluster with some keys; members 1 and 2 killed and their data
# directories deleted (quorum lost, 2 of 3 gone for good); then, timed:
#   1. member 0 stopped (SIGTERM) and started again on its data with --force-new-cluster, until
#      healthy, then restarted once without the flag;
#   2. for member 1 then member 2: MemberAdd as a learner, started on an empty data directory
#      with the member list, promoted once in sync (retried until etcd accepts), until healthy;
#   3. `endpoint health` answers on all 3 and the last key written before the loss is there
#      (then, untimed: every member holds all 50 keys in its own store).
# Prints one line per round:  recover <seconds>
set -euo pipefail

ETCD=${ETCD:-/usr/local/lib/etcd-3.5.1/etcd}
ETCDCTL=${ETCDCTL:-/usr/local/lib/etcd-3.5.1/etcdctl}
ROUNDS=${1:?usage: quorum_recovery_floor.sh ROUNDS}

. "$(dirname "${BASH_SOURCE[0]}")/floor_lib.sh"

start_member() { # index state initial-cluster data-dir [extra flags...]
  local i=$1 state=$2 initial=$3 data=$4
  shift 4
  "$ETCD" --name "m$i" --data-dir "$data" \
    --listen-client-urls "$(client "$i")" --advertise-client-urls "$(client "$i")" \
    --listen-peer-urls "$(peer "$i")" --initial-advertise-peer-urls "$(peer "$i")" \
    --listen-metrics-urls "http://$(ip "$i"):2381" \
    --initial-cluster "$initial" --initial-cluster-state "$state" --initial-cluster-token floor \
    "$@" >>"$dir/m$i.log" 2>&1 &
  pids[$i]=$!
  disown
}

healthy() { "$ETCDCTL" --endpoints "$1" endpoint health --command-timeout=1s >/dev/null 2>&1; }
kill_member() {
  kill -9 "${pids[$1]}" 2>/dev/null || true
  while kill -0 "${pids[$1]}" 2>/dev/null; do sleep 0.01; done
}

for round in $(seq "$ROUNDS"); do
  rm -rf "$dir"/m*
  initial="m0=$(peer 0),m1=$(peer 1),m2=$(peer 2)"
  for i in 0 1 2; do start_member "$i" new "$initial" "$dir/m$i"; done
  until healthy "$(client 0),$(client 1),$(client 2)"; do sleep 0.05; done
  for k in $(seq 50); do "$ETCDCTL" --endpoints "$(client 0)" put "k$k" "v$k" >/dev/null; done
  # Let every member apply the writes, then lose two of them for good.
  sleep 0.5
  for i in 1 2; do kill_member "$i"; rm -rf "$dir/m$i"; done

  t0=$(now)
  # A graceful stop, as the operator's Pod deletion does: with SIGKILL here, etcd 3.5.1 may
  # drop the last applied entry from the log it sends the new members (its WAL's commit index
  # lags what it applied: etcd-io/etcd#14009, etcd-io/raft#300), and they disagree with it.
  kill -s TERM "${pids[0]}"
  while kill -0 "${pids[0]}" 2>/dev/null; do sleep 0.01; done
  start_member 0 existing "m0=$(peer 0)" "$dir/m0" --force-new-cluster
  until healthy "$(client 0)"; do sleep 0.02; done
  # The flag must not stay: restart once without it (as an operator would on its next restart).
  kill_member 0
  start_member 0 existing "m0=$(peer 0)" "$dir/m0"
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
  value=$("$ETCDCTL" --endpoints "$endpoints" get k50 --print-value-only 2>&1)
  [ "$value" = v50 ] || { echo "round $round: k50 is $value" >&2; exit 1; }
  elapsed_s=$(elapsed "$t0")
  # Every member holds the same keys (serializable reads: each member's own store).
  for i in 0 1 2; do
    n=$("$ETCDCTL" --endpoints "$(client "$i")" get --prefix k --keys-only --consistency=s | grep -c '^k' || true)
    [ "$n" = 50 ] || { echo "round $round: m$i holds $n of the 50 keys" >&2; exit 1; }
  done
  echo "recover $elapsed_s"
  for i in 0 1 2; do kill_member "$i"; done
done
