//! The sandbox driven by the real `kubectl` (v1.32): the commands the project's tests and its
//! users run, checked against what kubectl prints for a real cluster.

mod common;

use common::{apply, eventually, fixture, kubectl, kubectl_with_input, project_crds, start};

const DEPLOYMENT: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.25
      - name: sidecar
        image: busybox:1.36
"#;

const WIDGET: &str = r#"
apiVersion: example.com/v1
kind: Widget
metadata:
  name: w1
spec:
  replicas: 2
  color: blue
"#;

async fn install_widgets(sandbox: &kube_sandbox::Sandbox) {
    let crd = fixture("widgets-crd.yaml");
    kubectl(sandbox, &["apply", "-f", crd.to_str().unwrap()]).await.ok();
}

#[tokio::test]
async fn apply_creates_then_updates_and_get_shows_yaml() {
    let sandbox = start().await;
    assert!(apply(&sandbox, DEPLOYMENT).await.ok().contains("deployment.apps/web created"));
    assert!(apply(&sandbox, DEPLOYMENT).await.ok().contains("deployment.apps/web unchanged"));
    let scaled = DEPLOYMENT.replace("replicas: 2", "replicas: 3");
    assert!(apply(&sandbox, &scaled).await.ok().contains("deployment.apps/web configured"));
    let yaml = kubectl(&sandbox, &["get", "deployment", "web", "-o", "yaml"]).await.ok();
    let object: serde_yaml::Value = serde_yaml::from_str(&yaml).unwrap();
    assert_eq!(object["spec"]["replicas"], 3);
    assert_eq!(object["metadata"]["generation"], 2);
    assert_eq!(object["spec"]["template"]["spec"]["restartPolicy"], "Always", "defaults are filled in");
    assert!(object["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"].is_string());
}

#[tokio::test]
async fn get_prints_printer_columns_of_builtin_and_custom_kinds() {
    let sandbox = start().await;
    install_widgets(&sandbox).await;
    apply(&sandbox, WIDGET).await.ok();
    let table = kubectl(&sandbox, &["get", "widgets"]).await.ok();
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "SIZE", "REPLICAS", "READY", "AGE"]);
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(&row[..3], ["w1", "small", "2"], "size defaulted by the schema");
    assert!(row[3].ends_with('s'), "age in seconds: {row:?}");
    let nodes = kubectl(&sandbox, &["get", "nodes"]).await.ok();
    assert!(nodes.starts_with("NAME     STATUS   ROLES    AGE"), "{nodes}");
    assert_eq!(nodes.matches(" Ready ").count(), 3);
    let short = kubectl(&sandbox, &["get", "wd", "-o", "name"]).await.ok();
    assert_eq!(short.trim(), "widget.example.com/w1");
}

#[tokio::test]
async fn patch_with_merge_json_and_strategic_types() {
    let sandbox = start().await;
    apply(&sandbox, DEPLOYMENT).await.ok();
    kubectl(&sandbox, &["patch", "deployment", "web", "--type", "merge", "-p", r#"{"spec":{"replicas":4}}"#]).await.ok();
    kubectl(&sandbox, &["patch", "deployment", "web", "--type", "json", "-p", r#"[{"op":"add","path":"/metadata/labels/tier","value":"front"}]"#]).await.ok();
    // Strategic merge keys containers by name: the other container stays.
    kubectl(&sandbox, &["patch", "deployment", "web", "--type", "strategic", "-p", r#"{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:1.26"}]}}}}"#]).await.ok();
    let out = kubectl(&sandbox, &["get", "deployment", "web", "-o", "jsonpath={.spec.replicas} {.metadata.labels.tier} {.spec.template.spec.containers[*].image}"]).await.ok();
    assert_eq!(out, "4 front nginx:1.26 busybox:1.36");
    // A failing JSON patch test is refused and changes nothing.
    let err = kubectl(&sandbox, &["patch", "deployment", "web", "--type", "json", "-p", r#"[{"op":"test","path":"/spec/replicas","value":9},{"op":"replace","path":"/spec/replicas","value":1}]"#]).await.err();
    assert!(!err.is_empty());
    install_widgets(&sandbox).await;
    apply(&sandbox, WIDGET).await.ok();
    let err = kubectl(&sandbox, &["patch", "widget", "w1", "--type", "strategic", "-p", r#"{"spec":{"replicas":3}}"#]).await.err();
    assert!(err.contains("strategic-merge-patch") || err.contains("not supported"), "{err}");
}

#[tokio::test]
async fn scale_label_and_annotate() {
    let sandbox = start().await;
    apply(&sandbox, DEPLOYMENT).await.ok();
    install_widgets(&sandbox).await;
    apply(&sandbox, WIDGET).await.ok();
    assert!(kubectl(&sandbox, &["scale", "deployment", "web", "--replicas=5"]).await.ok().contains("scaled"));
    assert!(kubectl(&sandbox, &["scale", "widget", "w1", "--replicas=4"]).await.ok().contains("scaled"));
    kubectl(&sandbox, &["label", "widget", "w1", "tier=db"]).await.ok();
    kubectl(&sandbox, &["annotate", "deployment", "web", "note=hello world"]).await.ok();
    let widget = kubectl(&sandbox, &["get", "widget", "w1", "-o", "jsonpath={.spec.replicas} {.metadata.labels.tier}"]).await.ok();
    assert_eq!(widget, "4 db");
    let deployment = kubectl(&sandbox, &["get", "deployment", "web", "-o", "jsonpath={.spec.replicas} {.metadata.annotations.note}"]).await.ok();
    assert_eq!(deployment, "5 hello world");
    let selected = kubectl(&sandbox, &["get", "widgets", "-l", "tier in (db,cache)", "-o", "name"]).await.ok();
    assert_eq!(selected.trim(), "widget.example.com/w1");
    let err = kubectl(&sandbox, &["label", "widget", "w1", "tier=web"]).await.err();
    assert!(err.contains("already has a value"), "{err}");
}

async fn owned_config_map(sandbox: &kube_sandbox::Sandbox, name: &str) {
    let uid = kubectl(sandbox, &["get", "deployment", "web", "-o", "jsonpath={.metadata.uid}"]).await.ok();
    let manifest = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  ownerReferences:\n  - apiVersion: apps/v1\n    kind: Deployment\n    name: web\n    uid: {uid}\n    blockOwnerDeletion: true\ndata: {{a: b}}\n"
    );
    apply(sandbox, &manifest).await.ok();
}

#[tokio::test]
async fn delete_waits_and_cascades_foreground_orphan_and_background() {
    let sandbox = start().await;
    apply(&sandbox, DEPLOYMENT).await.ok();
    owned_config_map(&sandbox, "fg").await;
    kubectl(&sandbox, &["delete", "deployment", "web", "--cascade=foreground", "--wait"]).await.ok();
    assert!(kubectl(&sandbox, &["get", "configmap", "fg"]).await.err().contains("NotFound"));

    apply(&sandbox, DEPLOYMENT).await.ok();
    owned_config_map(&sandbox, "orphan").await;
    kubectl(&sandbox, &["delete", "deployment", "web", "--cascade=orphan", "--wait"]).await.ok();
    let refs = kubectl(&sandbox, &["get", "configmap", "orphan", "-o", "jsonpath={.metadata.ownerReferences}"]).await.ok();
    assert_eq!(refs, "", "the orphan keeps living without its owner");

    apply(&sandbox, DEPLOYMENT).await.ok();
    owned_config_map(&sandbox, "bg").await;
    kubectl(&sandbox, &["delete", "deployment", "web", "--wait"]).await.ok();
    eventually("the background collector deletes the dependent", || async {
        !kubectl(&sandbox, &["get", "configmap", "bg"]).await.success
    })
    .await;
}

#[tokio::test]
async fn wait_for_a_condition_set_through_the_status_subresource() {
    let sandbox = start().await;
    install_widgets(&sandbox).await;
    kubectl(&sandbox, &["wait", "--for=condition=Established", "crd/widgets.example.com", "--timeout=10s"]).await.ok();
    apply(&sandbox, WIDGET).await.ok();
    let path = sandbox.kubeconfig_path().to_path_buf();
    let waiter = tokio::spawn(async move {
        tokio::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(path)
            .args(["wait", "--for=condition=Ready", "widget/w1", "--timeout=20s"])
            .output()
            .await
            .unwrap()
    });
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let status = r#"{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Up","message":"ok","lastTransitionTime":"2024-01-01T00:00:00Z"}]}}"#;
    kubectl(&sandbox, &["patch", "widget", "w1", "--subresource=status", "--type=merge", "-p", status]).await.ok();
    let output = waiter.await.unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(String::from_utf8_lossy(&output.stdout).contains("condition met"));
    // A status sent to the main resource is ignored when a status subresource exists.
    kubectl(&sandbox, &["patch", "widget", "w1", "--type=merge", "-p", r#"{"status":{"replicas":9}}"#]).await.ok();
    let replicas = kubectl(&sandbox, &["get", "widget", "w1", "-o", "jsonpath={.status.replicas}"]).await.ok();
    assert_eq!(replicas, "");
}

#[tokio::test]
async fn explain_describes_a_crd_field() {
    let sandbox = start().await;
    install_widgets(&sandbox).await;
    let text = kubectl(&sandbox, &["explain", "widget.spec.size"]).await.ok();
    assert!(text.contains("KIND:       Widget"), "{text}");
    assert!(text.contains("How big the widget is."), "{text}");
    kubectl(&sandbox, &["apply", "-f", project_crds().to_str().unwrap()]).await.ok();
    let text = kubectl(&sandbox, &["explain", "etcdcluster.spec.replicas"]).await.ok();
    assert!(text.contains("FIELD: replicas <integer>"), "{text}");
}

#[tokio::test]
async fn cel_rules_reject_bad_objects_with_their_message() {
    let sandbox = start().await;
    install_widgets(&sandbox).await;
    let too_many = WIDGET.replace("replicas: 2", "replicas: 7");
    let err = apply(&sandbox, &too_many).await.err();
    assert!(err.contains("only large widgets may have more than 5 replicas"), "{err}");
    apply(&sandbox, WIDGET).await.ok();
    let err = kubectl(&sandbox, &["patch", "widget", "w1", "--type=merge", "-p", r#"{"spec":{"size":"large"}}"#]).await.err();
    assert!(err.contains("size is immutable"), "transition rule with oldSelf: {err}");
    let err = kubectl(&sandbox, &["patch", "widget", "w1", "--type=merge", "-p", r#"{"spec":{"size":"huge"}}"#]).await.err();
    assert!(err.contains("Unsupported value: \"huge\""), "{err}");

    kubectl(&sandbox, &["apply", "-f", project_crds().to_str().unwrap()]).await.ok();
    let cluster = "apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdCluster\nmetadata:\n  name: mem\nspec:\n  replicas: 0\n  version: \"3.5.1\"\n  storage:\n    medium: Memory\n    size: 1Gi\n";
    let err = apply(&sandbox, cluster).await.err();
    assert!(err.contains("spec.replicas=0 with spec.storage.medium=Memory is unsupported"), "{err}");
    let good = cluster.replace("replicas: 0", "replicas: 3");
    apply(&sandbox, &good).await.ok();
    let err = kubectl(&sandbox, &["patch", "etcdcluster", "mem", "--type=merge", "-p", r#"{"spec":{"storage":{"medium":""}}}"#]).await.err();
    assert!(err.contains("is invalid"), "{err}");
}

#[tokio::test]
async fn errors_read_as_they_do_against_a_real_cluster() {
    let sandbox = start().await;
    let err = kubectl(&sandbox, &["get", "configmap", "missing"]).await.err();
    assert!(err.contains(r#"Error from server (NotFound): configmaps "missing" not found"#), "{err}");
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: once\n";
    kubectl_with_input(&sandbox, &["create", "-f", "-"], Some(cm)).await.ok();
    let err = kubectl_with_input(&sandbox, &["create", "-f", "-"], Some(cm)).await.err();
    assert!(err.contains(r#"Error from server (AlreadyExists)"#) && err.contains(r#"configmaps "once" already exists"#), "{err}");
    let bad = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Bad_Name\n";
    let err = kubectl_with_input(&sandbox, &["create", "-f", "-"], Some(bad)).await.err();
    assert!(err.contains("is invalid") && err.contains("metadata.name"), "{err}");
    let err = kubectl(&sandbox, &["logs", "nope"]).await.err();
    assert!(err.contains(r#"pods "nope" not found"#), "{err}");
    let version = kubectl(&sandbox, &["version", "-o", "json"]).await.ok();
    assert!(version.contains("\"gitVersion\": \"v1.32.0-sandbox\""), "{version}");
}

#[tokio::test]
async fn dry_run_server_stores_nothing() {
    let sandbox = start().await;
    let out = kubectl_with_input(&sandbox, &["apply", "--dry-run=server", "-f", "-"], Some(DEPLOYMENT)).await.ok();
    assert!(out.contains("(server dry run)"), "{out}");
    assert!(kubectl(&sandbox, &["get", "deployment", "web"]).await.err().contains("NotFound"));
}

#[tokio::test]
async fn deleting_a_namespace_deletes_what_is_in_it() {
    let sandbox = start().await;
    kubectl_with_input(&sandbox, &["create", "-f", "-"], Some("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: doomed\n")).await.ok();
    kubectl_with_input(&sandbox, &["create", "-n", "doomed", "-f", "-"], Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: inside\n")).await.ok();
    let accounts = kubectl(&sandbox, &["get", "serviceaccounts", "-n", "doomed", "-o", "name"]).await.ok();
    assert!(accounts.contains("serviceaccount/default"), "{accounts}");
    kubectl(&sandbox, &["delete", "namespace", "doomed", "--wait", "--timeout=20s"]).await.ok();
    assert!(kubectl(&sandbox, &["get", "namespace", "doomed"]).await.err().contains("NotFound"));
    assert!(kubectl(&sandbox, &["get", "configmap", "inside", "-n", "doomed"]).await.err().contains("NotFound"));
}

#[tokio::test]
async fn rbac_answers_for_service_accounts() {
    let sandbox = start().await;
    let robot = "system:serviceaccount:default:robot";
    assert_eq!(kubectl(&sandbox, &["auth", "can-i", "list", "pods", "--as", robot]).await.stdout.trim(), "no");
    let err = kubectl(&sandbox, &["get", "pods", "--as", robot]).await.err();
    assert!(err.contains(r#"pods is forbidden: User "system:serviceaccount:default:robot" cannot list resource "pods" in API group "" in the namespace "default""#), "{err}");
    let rbac = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: pod-reader}
rules:
- apiGroups: [""]
  resources: ["pods", "pods/log"]
  verbs: ["get", "list", "watch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: robot-reads-pods}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-reader}
subjects:
- kind: ServiceAccount
  name: robot
"#;
    apply(&sandbox, rbac).await.ok();
    assert_eq!(kubectl(&sandbox, &["auth", "can-i", "list", "pods", "--as", robot]).await.stdout.trim(), "yes");
    assert_eq!(kubectl(&sandbox, &["auth", "can-i", "delete", "pods", "--as", robot]).await.stdout.trim(), "no");
    assert_eq!(kubectl(&sandbox, &["auth", "can-i", "list", "pods", "-n", "kube-system", "--as", robot]).await.stdout.trim(), "no");
    kubectl(&sandbox, &["get", "pods", "--as", robot]).await.ok();
}

#[tokio::test]
async fn watch_prints_changes_as_they_happen() {
    let sandbox = start().await;
    kubectl_with_input(&sandbox, &["create", "-f", "-"], Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: watched\n")).await.ok();
    let path = sandbox.kubeconfig_path().to_path_buf();
    let watcher = tokio::spawn(async move {
        tokio::process::Command::new("timeout")
            .args(["3", "kubectl", "--kubeconfig"])
            .arg(path)
            .args(["get", "configmaps", "--watch", "-o", "name", "--field-selector", "metadata.name=watched"])
            .output()
            .await
            .unwrap()
    });
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    kubectl(&sandbox, &["label", "configmap", "watched", "seen=yes"]).await.ok();
    let output = watcher.await.unwrap();
    let lines = String::from_utf8_lossy(&output.stdout).lines().count();
    assert!(lines >= 2, "the initial object and its change: {}", String::from_utf8_lossy(&output.stdout));
}

#[tokio::test]
async fn server_side_apply_tracks_managers_and_conflicts() {
    let sandbox = start().await;
    let config = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\n  labels: {owner: first, extra: \"yes\"}\ndata:\n  a: \"1\"\n";
    let out = kubectl_with_input(&sandbox, &["apply", "--server-side", "-f", "-"], Some(config)).await.ok();
    assert!(out.contains("serverside-applied"), "{out}");
    let managers = kubectl(&sandbox, &["get", "configmap", "ssa", "--show-managed-fields", "-o", "jsonpath={.metadata.managedFields[*].manager}"]).await.ok();
    assert_eq!(managers, "kubectl");
    // Another manager changing a field the first owns conflicts, unless it forces.
    let rival = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  a: \"2\"\n";
    let err = kubectl_with_input(&sandbox, &["apply", "--server-side", "--field-manager=rival", "-f", "-"], Some(rival)).await.err();
    assert!(err.contains("conflict") && err.contains(".data.a"), "{err}");
    kubectl_with_input(&sandbox, &["apply", "--server-side", "--field-manager=rival", "--force-conflicts", "-f", "-"], Some(rival)).await.ok();
    assert_eq!(kubectl(&sandbox, &["get", "configmap", "ssa", "-o", "jsonpath={.data.a}"]).await.ok(), "2");
    // A field the first manager stops applying is removed.
    let fewer = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\n  labels: {owner: first}\n";
    kubectl_with_input(&sandbox, &["apply", "--server-side", "-f", "-"], Some(fewer)).await.ok();
    let labels = kubectl(&sandbox, &["get", "configmap", "ssa", "-o", "jsonpath={.metadata.labels}"]).await.ok();
    assert_eq!(labels, r#"{"owner":"first"}"#);
    assert_eq!(kubectl(&sandbox, &["get", "configmap", "ssa", "-o", "jsonpath={.data.a}"]).await.ok(), "2", "the rival's field stays");
}

#[tokio::test]
async fn field_validation_strict_refuses_unknown_fields() {
    let sandbox = start().await;
    install_widgets(&sandbox).await;
    let unknown = WIDGET.replace("color: blue", "color: blue\n  shape: round");
    let err = apply(&sandbox, &unknown).await.err();
    assert!(err.contains("unknown field \"spec.shape\""), "{err}");
    let out = kubectl_with_input(&sandbox, &["apply", "--validate=warn", "-f", "-"], Some(&unknown)).await;
    assert!(out.success, "{}", out.stderr);
    assert!(out.stderr.contains("unknown field \"spec.shape\""), "a warning: {}", out.stderr);
    let stored = kubectl(&sandbox, &["get", "widget", "w1", "-o", "jsonpath={.spec}"]).await.ok();
    assert!(!stored.contains("shape"), "pruned: {stored}");
}
