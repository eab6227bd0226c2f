# Shared by the floor scripts of the benchmarks (sourced, not run): a scratch directory and
# the etcd processes started in it, cleaned up on exit, and a /24 of loopback addresses of our
# own, so runs side by side never collide.
#
#   pids[<member>]=<pid>   processes to kill on exit (SIGKILL)
#   writer=<pid>           a background writer to stop on exit (SIGTERM), if any
#   ip N, peer N, client N the address, peer URL and client URL of member N
#   now, elapsed START     the time, and seconds since START (3 decimals)

dir=$(mktemp -d)
declare -A pids
writer=""
cleanup() {
  [[ -n "$writer" ]] && kill "$writer" 2>/dev/null || true
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  sleep 0.2
  rm -rf "$dir"
}
trap cleanup EXIT

net="127.$((RANDOM % 100 + 100)).$((RANDOM % 250 + 1))"
ip() { echo "$net.$(($1 + 1))"; }
peer() { echo "http://$(ip "$1"):2380"; }
client() { echo "http://$(ip "$1"):2379"; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }'; }
