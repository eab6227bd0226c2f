#!/usr/bin/env bash
# The floor of the upgrade benchmark: the same etcd binaries, 3 members on loopback addresses,
# no Kubernetes and no operator, upgraded OLD -> NEW as fast as a script can: one member
# at a time, followers first and the leader last (its leadership moved to another member
# first, as the operator does), each stopped (SIGTERM, as the kubelet stops a Pod) and started
# on the new binary with its own data directory, the next one only once it answers
# `endpoint health`. A client writes a key in a loop the whole time (etcdctl put, 1 s timeout).
#
#   upgrade_floor.sh ROUNDS
#
# Prints one line per round:
#   upgrade <seconds>       from the first stop to the last member healthy on NEW_VERSION;
#   unavailable <seconds>   the longest stretch without an acknowledged write during it.
set -euo pipefail

# The binaries: OLD's etcd, NEW's etcd and etcdctl, and the version NEW reports (checked at the
# end of each round). The defaults are 3.4.23 (Debian's) -> 3.5.1.
OLD=${OLD:-/usr/bin/etcd}
NEW=${NEW:-/usr/local/lib/etcd-3.5.1/etcd}
ETCDCTL=${ETCDCTL:-/usr/local/lib/etcd-3.5.1/etcdctl}
NEW_VERSION=${NEW_VERSION:-3.5.1}
ROUNDS=${1:?usage: upgrade_floor.sh ROUNDS}

. "$(dirname "${BASH_SOURCE[0]}")/floor_lib.sh"
all() { echo "$(client 0),$(client 1),$(client 2)"; }

start_member() { # binary index state initial-cluster data-dir
  "$1" --name "m$2" --data-dir "$5" \
    --listen-client-urls "$(client "$2")" --advertise-client-urls "$(client "$2")" \
    --listen-peer-urls "$(peer "$2")" --initial-advertise-peer-urls "$(peer "$2")" \
    --initial-cluster "$4" --initial-cluster-state "$3" --initial-cluster-token floor \
    >>"$dir/m$2.log" 2>&1 &
  pids[$2]=$!
  disown
}

healthy() { # endpoint
  "$ETCDCTL" --endpoints "$1" endpoint health --command-timeout=1s >/dev/null 2>&1
}

stop_member() { # index
  kill -TERM "${pids[$1]}"
  while kill -0 "${pids[$1]}" 2>/dev/null; do sleep 0.01; done
}

# The index of the member that leads: the one whose own ID is the leader it names (`-w fields`,
# whose names are the same in etcdctl 3.5 and 3.6; the columns of `-w simple` are not).
leader() {
  local i fields
  for i in 0 1 2; do
    fields=$("$ETCDCTL" --endpoints "$(client "$i")" endpoint status -w fields 2>/dev/null) || continue
    if [[ -n "$fields" && "$(sed -n 's/^"MemberID" : //p' <<<"$fields")" == \
      "$(sed -n 's/^"Leader" : //p' <<<"$fields")" ]]; then
      echo "$i"
      return
    fi
  done
}

member_id() { # index
  "$ETCDCTL" --endpoints "$(client "$1")" endpoint status -w simple | awk -F', ' '{print $2}'
}

for ((round = 1; round <= ROUNDS; round++)); do
  rm -rf "$dir"/m*
  initial="m0=$(peer 0),m1=$(peer 1),m2=$(peer 2)"
  for i in 0 1 2; do start_member "$OLD" "$i" new "$initial" "$dir/m$i"; done
  until healthy "$(all)"; do sleep 0.05; done
  "$ETCDCTL" --endpoints "$(all)" put floor-key value >/dev/null
  sleep 2

  : >"$dir/acks"
  (
    n=0
    while true; do
      n=$((n + 1))
      if "$ETCDCTL" --endpoints "$(all)" --command-timeout=1s put "key-$n" "$n" >/dev/null 2>&1; then
        now >>"$dir/acks"
      fi
      sleep 0.02
    done
  ) &
  writer=$!
  # A client holding a watch on each member the whole time, as a Kubernetes API server's are
  # (FLOOR_WATCH=0 leaves them out). Stopped with SIGTERM, etcd 3.5.36 and 3.6.17 wait up to
  # their request timeout (7 s at the default election timeout) for open streams before they
  # exit; 3.4.23 and 3.5.1 exit at once. The operator's clusters have the e2e workload's watch.
  if [[ "${FLOOR_WATCH:-1}" == 1 ]]; then
    for i in 0 1 2; do
      "$ETCDCTL" --endpoints "$(client "$i")" watch floor-watch >/dev/null 2>&1 &
      pids[w$i]=$!
    done
  fi
  sleep 1

  lead=$(leader)
  [[ -n "$lead" ]] || { echo "no member names itself the leader" >&2; exit 1; }
  order=()
  for i in 0 1 2; do
    if [[ "$i" != "$lead" ]]; then order+=("$i"); fi
  done
  order+=("$lead")
  started=$(now)
  for i in "${order[@]}"; do
    if [[ "$i" == "$lead" ]]; then
      to=${order[0]}
      "$ETCDCTL" --endpoints "$(client "$i")" move-leader "$(member_id "$to")" >/dev/null
    fi
    stop_member "$i"
    start_member "$NEW" "$i" existing "$initial" "$dir/m$i"
    until healthy "$(client "$i")"; do sleep 0.02; done
  done
  finished=$(now)
  sleep 1
  kill "$writer" 2>/dev/null || true
  wait "$writer" 2>/dev/null || true
  writer=""
  for i in 0 1 2; do
    if [[ -n "${pids[w$i]:-}" ]]; then
      kill -9 "${pids[w$i]}" 2>/dev/null || true
      wait "${pids[w$i]}" 2>/dev/null || true
      unset "pids[w$i]"
    fi
  done
  versions=$("$ETCDCTL" --endpoints "$(all)" endpoint status -w simple | awk -F', ' '{print $3}' | sort -u)
  [[ "$versions" == "$NEW_VERSION" ]] || { echo "not all on $NEW_VERSION: $versions" >&2; exit 1; }
  awk -v a="$started" -v b="$finished" 'BEGIN { printf "upgrade %.3f\n", b - a }'
  # The longest stretch without an acknowledged write, over the upgrade.
  awk -v a="$started" -v b="$finished" '
    { t = $1 }
    t < a { last = t; next }
    { if (last == "") last = a; if (t - last > gap) gap = t - last; last = t }
    END { if (b - last > gap) gap = b - last; printf "unavailable %.3f\n", gap }
  ' "$dir/acks"
  for i in 0 1 2; do stop_member "$i"; done
done
