#!/usr/bin/env bash
# `make demo`: the whole system on one machine, no Kubernetes needed. Installs what is missing,
# builds, starts kube-sandbox (an API server and nodes that run Pods as processes), deploys the
# operator into it as a Deployment from the files in deploy/ (CRDs, RBAC, Deployment), applies
# examples/etcdcluster.yaml (3 members), waits until it is Available, and prints how to use it.
# The sandbox keeps running in the background; the last lines say how to stop it.
#
# Environment: DEMO_DIR (default /tmp/etcd-operator-demo), PROFILE (debug or release),
# CONTROL_PLANE: `sandbox` (default: kube-sandbox's own API server, up in a second) or
# `kubernetes` (a real kube-apiserver, controller-manager and scheduler built by install-deps;
# the operator is then installed with its Helm chart, as on a real cluster).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${DEMO_DIR:-/tmp/etcd-operator-demo}
PROFILE=${PROFILE:-debug}
CONTROL_PLANE=${CONTROL_PLANE:-sandbox}
# The helm scripts/install-deps.sh installs beside yours (make exports it); the one on PATH if absent.
HELM=${HELM:-/usr/local/lib/helm-v4.1.4/helm}
[ -x "$HELM" ] || HELM=helm
case "$CONTROL_PLANE" in
  sandbox | kubernetes) ;;
  *) echo "demo: CONTROL_PLANE=$CONTROL_PLANE: say sandbox or kubernetes" >&2; exit 1 ;;
esac
BIN="$ROOT/target/$PROFILE"
ETCDCTL=/usr/local/lib/etcd-3.6.17/etcdctl
cd "$ROOT"

say() { printf '\n==> %s\n' "$*"; }

if [ "$(id -u)" != 0 ]; then
  echo "demo: kube-sandbox runs Pods in Linux namespaces and needs root; run: sudo make demo" >&2
  exit 1
fi

say "installing what is missing"
bash scripts/install-deps.sh

say "building etcd-operator and kube-sandbox ($PROFILE)"
release=()
[ "$PROFILE" = release ] && release=(--release)
cargo build -q "${release[@]}" -p etcd-operator -p kube-sandbox --bins

# One demo at a time: stop an earlier one.
if [ -f "$DIR/sandbox.pid" ] && kill -0 "$(cat "$DIR/sandbox.pid")" 2>/dev/null; then
  say "stopping the previous demo sandbox"
  kill "$(cat "$DIR/sandbox.pid")"
  while kill -0 "$(cat "$DIR/sandbox.pid")" 2>/dev/null; do sleep 0.2; done
fi
rm -rf "$DIR"
mkdir -p "$DIR"

# The operator's image runs the binary just built; etcd images use the sandbox's built-in map.
cat >"$DIR/images.yaml" <<IMAGES
images:
  - image: "ghcr.io/etcd-operator-rs/etcd-operator:*"
    entrypoint: [/usr/local/bin/etcd-operator]
    files:
      /usr/local/bin/etcd-operator: $BIN/etcd-operator
IMAGES

say "starting kube-sandbox in $DIR (3 nodes, control plane: $CONTROL_PLANE)"
nohup "$BIN/kube-sandbox" up --dir "$DIR" --nodes 3 --images "$DIR/images.yaml" \
  --control-plane "$CONTROL_PLANE" >"$DIR/sandbox.log" 2>&1 &
echo $! >"$DIR/sandbox.pid"
for _ in $(seq 1 300); do
  grep -q '^ready' "$DIR/sandbox.log" 2>/dev/null && break
  if ! kill -0 "$(cat "$DIR/sandbox.pid")" 2>/dev/null; then
    echo "demo: kube-sandbox exited; its log:" >&2
    cat "$DIR/sandbox.log" >&2
    exit 1
  fi
  sleep 0.2
done
grep -q '^ready' "$DIR/sandbox.log" || { echo "demo: kube-sandbox did not start; see $DIR/sandbox.log" >&2; exit 1; }
export KUBECONFIG="$DIR/kubeconfig"

if [ "$CONTROL_PLANE" = kubernetes ]; then
  say "the API server"
  kubectl version
  say "installing the operator with its Helm chart"
  "$HELM" install etcd-operator deploy/helm/etcd-operator --namespace etcd-operator-system \
    --create-namespace --wait --timeout 3m
else
  say "deploying the operator from deploy/"
  kubectl apply -f deploy/crds/
  kubectl apply -f deploy/operator/namespace.yaml
  kubectl apply -f deploy/rbac/ -f deploy/operator/
  kubectl -n etcd-operator-system wait deployment/etcd-operator --for=condition=Available --timeout=180s
fi

say "creating examples/etcdcluster.yaml (3 members)"
kubectl apply -f examples/etcdcluster.yaml
started=$(date +%s)
kubectl wait etcdcluster/example --for=condition=Available --timeout=300s
until [ "$(kubectl get etcdcluster example -o jsonpath='{.status.readyMembers}')" = 3 ]; do sleep 0.5; done
echo "Available with 3 ready members $(( $(date +%s) - started )) s after kubectl apply"

say "what is running"
kubectl get etcdclusters,etcdmembers
kubectl get pods -o wide

say "etcd answers through the client Service"
"$BIN/kube-sandbox" exec --dir "$DIR" -- "$ETCDCTL" --endpoints=http://example-client.default.svc:2379 put greeting "hello from etcd"
"$BIN/kube-sandbox" exec --dir "$DIR" -- "$ETCDCTL" --endpoints=http://example-client.default.svc:2379 member list -w table

cat <<USAGE

The sandbox keeps running. To use it:

  export KUBECONFIG=$DIR/kubeconfig
  kubectl get etcdclusters                          # Version, Replicas, Ready, Available, Leader, Age
  kubectl describe etcdcluster example              # conditions and Events
  kubectl scale etcdcluster/example --replicas=5    # members join one at a time
  kubectl -n etcd-operator-system logs deploy/etcd-operator

  # etcdctl inside the cluster network (cluster DNS included):
  $BIN/kube-sandbox exec --dir $DIR -- $ETCDCTL \\
      --endpoints=http://example-client.default.svc:2379 get greeting
  # member endpoints: http://example-N.example.default.svc:2379 (N = 0, 1, 2)

To stop it:  kill \$(cat $DIR/sandbox.pid)
USAGE
