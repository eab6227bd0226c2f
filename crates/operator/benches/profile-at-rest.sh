#!/usr/bin/env bash
# Profiles the operator of a running bootstrap benchmark at rest (docs/benchmarks.md, "What a
# profile of the look showed"). Run beside the benchmark, with its output in a file:
#
#   cargo bench -p etcd-operator --bench bootstrap > bench.log 2>&1 &
#   bash crates/operator/benches/profile-at-rest.sh bench.log profile/
#
# Once every idle cluster is Available it waits 35 s (into the benchmark's measuring window),
# then writes to the output directory: `info` (the operator's resident memory and threads),
# `malloc_info.xml` (glibc's view of its heap: in use against free, through gdb) and
# `perf.data` (30 s of samples with call stacks: `perf report -i perf.data --children`).
# Needs root, gdb and perf. The profile costs the operator some CPU in that window.
set -euo pipefail
log=$1
out=$2
mkdir -p "$out"
until grep -q "Available after the applies" "$log"; do sleep 5; done
sleep 35
pid=""
for p in $(pgrep -f "etcd-operator run"); do
  if tr '\0' ' ' < "/proc/$p/cmdline" | grep -q "^/.*etcd-operator run"; then pid=$p; break; fi
done
[ -n "$pid" ] || { echo "no operator process found" >&2; exit 1; }
echo "operator pid $pid" > "$out/info"
grep -E "VmRSS|VmHWM|Threads" "/proc/$pid/status" >> "$out/info"
# The operator runs in a mount namespace of its own: the file lands in its /tmp.
gdb -p "$pid" -batch -ex 'call (void*)fopen("/tmp/malloc_info.xml","w")' \
  -ex 'call (int)malloc_info(0,$1)' -ex 'call (int)fclose($1)' > "$out/gdb.log" 2>&1
cp "/proc/$pid/root/tmp/malloc_info.xml" "$out/malloc_info.xml"
perf record -F 499 --call-graph dwarf,16384 -p "$pid" -o "$out/perf.data" -- sleep 30 \
  > "$out/perf.log" 2>&1
echo "done" >> "$out/info"
