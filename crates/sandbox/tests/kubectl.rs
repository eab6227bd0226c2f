//! The sandbox driven by the real `kubectl` (v1.32, and v1.33 through `make test`): the everyday
//! commands (apply, get, patch, scale, label, annotate, delete, wait, explain), checked against
//! what kubectl prints for a real cluster.

mod common;

use common::{
    DEPLOYMENT, WIDGET, apply, eventually, install_widgets, kubectl, project_crds, start,
};

#[tokio::test]
async fn apply_creates_then_updates_and_get_shows_yaml() {
    let sandbox = start().await;
    assert!(
        apply(&sandbox, DEPLOYMENT)
            .await
            .ok()
            .contains("deployment.apps/web created")
    );
    assert!(
        apply(&sandbox, DEPLOYMENT)
            .await
            .ok()
            .contains("deployment.apps/web unchanged")
    );
    let scaled = DEPLOYMENT.replace("replicas: 2", "replicas: 3");
    assert!(
        apply(&sandbox, &scaled)
            .await
            .ok()
            .contains("deployment.apps/web configured")
    );
    let yaml = kubectl(&sandbox, &["get", "deployment", "web", "-o", "yaml"])
        .await
        .ok();
    let object: serde_yaml::Value = serde_yaml::from_str(&yaml).unwrap();
    assert_eq!(object["spec"]["replicas"], 3);
    assert_eq!(object["metadata"]["generation"], 2);
    assert_eq!(
        object["spec"]["template"]["spec"]["restartPolicy"], "Always",
        "defaults are filled in"
    );
    assert!(
        object["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .is_string()
    );
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
    assert_eq!(
        &row[..3],
        ["w1", "small", "2"],
        "size defaulted by the schema"
    );
    assert!(row[3].ends_with('s'), "age in seconds: {row:?}");
    let nodes = kubectl(&sandbox, &["get", "nodes"]).await.ok();
    assert!(
        nodes.starts_with("NAME     STATUS   ROLES    AGE"),
        "{nodes}"
    );
    assert_eq!(nodes.matches(" Ready ").count(), 3);
    let short = kubectl(&sandbox, &["get", "wd", "-o", "name"]).await.ok();
    assert_eq!(short.trim(), "widget.example.com/w1");
}

#[tokio::test]
async fn patch_with_merge_json_and_strategic_types() {
    let sandbox = start().await;
    apply(&sandbox, DEPLOYMENT).await.ok();
    kubectl(
        &sandbox,
        &[
            "patch",
            "deployment",
            "web",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"replicas":4}}"#,
        ],
    )
    .await
    .ok();
    kubectl(
        &sandbox,
        &[
            "patch",
            "deployment",
            "web",
            "--type",
            "json",
            "-p",
            r#"[{"op":"add","path":"/metadata/labels/tier","value":"front"}]"#,
        ],
    )
    .await
    .ok();
    // Strategic merge keys containers by name: the other container stays.
    kubectl(&sandbox, &["patch", "deployment", "web", "--type", "strategic", "-p", r#"{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:1.26"}]}}}}"#]).await.ok();
    let out = kubectl(&sandbox, &["get", "deployment", "web", "-o", "jsonpath={.spec.replicas} {.metadata.labels.tier} {.spec.template.spec.containers[*].image}"]).await.ok();
    assert_eq!(out, "4 front nginx:1.26 busybox:1.36");
    // A failing JSON patch test is refused and changes nothing.
    let err = kubectl(&sandbox, &["patch", "deployment", "web", "--type", "json", "-p", r#"[{"op":"test","path":"/spec/replicas","value":9},{"op":"replace","path":"/spec/replicas","value":1}]"#]).await.err();
    assert!(!err.is_empty());
    install_widgets(&sandbox).await;
    apply(&sandbox, WIDGET).await.ok();
    let err = kubectl(
        &sandbox,
        &[
            "patch",
            "widget",
            "w1",
            "--type",
            "strategic",
            "-p",
            r#"{"spec":{"replicas":3}}"#,
        ],
    )
    .await
    .err();
    assert!(
        err.contains("strategic-merge-patch") || err.contains("not supported"),
        "{err}"
    );
}

#[tokio::test]
async fn scale_label_and_annotate() {
    let sandbox = start().await;
    apply(&sandbox, DEPLOYMENT).await.ok();
    install_widgets(&sandbox).await;
    apply(&sandbox, WIDGET).await.ok();
    assert!(
        kubectl(&sandbox, &["scale", "deployment", "web", "--replicas=5"])
            .await
            .ok()
            .contains("scaled")
    );
    assert!(
        kubectl(&sandbox, &["scale", "widget", "w1", "--replicas=4"])
            .await
            .ok()
            .contains("scaled")
    );
    kubectl(&sandbox, &["label", "widget", "w1", "tier=db"])
        .await
        .ok();
    kubectl(
        &sandbox,
        &["annotate", "deployment", "web", "note=hello world"],
    )
    .await
    .ok();
    let widget = kubectl(
        &sandbox,
        &[
            "get",
            "widget",
            "w1",
            "-o",
            "jsonpath={.spec.replicas} {.metadata.labels.tier}",
        ],
    )
    .await
    .ok();
    assert_eq!(widget, "4 db");
    let deployment = kubectl(
        &sandbox,
        &[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.spec.replicas} {.metadata.annotations.note}",
        ],
    )
    .await
    .ok();
    assert_eq!(deployment, "5 hello world");
    let selected = kubectl(
        &sandbox,
        &["get", "widgets", "-l", "tier in (db,cache)", "-o", "name"],
    )
    .await
    .ok();
    assert_eq!(selected.trim(), "widget.example.com/w1");
    let err = kubectl(&sandbox, &["label", "widget", "w1", "tier=web"])
        .await
        .err();
    assert!(err.contains("already has a value"), "{err}");
}

async fn owned_config_map(sandbox: &kube_sandbox::Sandbox, name: &str) {
    let uid = kubectl(
        sandbox,
        &["get", "deployment", "web", "-o", "jsonpath={.metadata.uid}"],
    )
    .await
    .ok();
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
    kubectl(
        &sandbox,
        &[
            "delete",
            "deployment",
            "web",
            "--cascade=foreground",
            "--wait",
        ],
    )
    .await
    .ok();
    assert!(
        kubectl(&sandbox, &["get", "configmap", "fg"])
            .await
            .err()
            .contains("NotFound")
    );

    apply(&sandbox, DEPLOYMENT).await.ok();
    owned_config_map(&sandbox, "orphan").await;
    kubectl(
        &sandbox,
        &["delete", "deployment", "web", "--cascade=orphan", "--wait"],
    )
    .await
    .ok();
    let refs = kubectl(
        &sandbox,
        &[
            "get",
            "configmap",
            "orphan",
            "-o",
            "jsonpath={.metadata.ownerReferences}",
        ],
    )
    .await
    .ok();
    assert_eq!(refs, "", "the orphan keeps living without its owner");

    apply(&sandbox, DEPLOYMENT).await.ok();
    owned_config_map(&sandbox, "bg").await;
    kubectl(&sandbox, &["delete", "deployment", "web", "--wait"])
        .await
        .ok();
    eventually("the background collector deletes the dependent", || async {
        !kubectl(&sandbox, &["get", "configmap", "bg"]).await.success
    })
    .await;
}

#[tokio::test]
async fn wait_for_a_condition_set_through_the_status_subresource() {
    let sandbox = start().await;
    install_widgets(&sandbox).await;
    kubectl(
        &sandbox,
        &[
            "wait",
            "--for=condition=Established",
            "crd/widgets.example.com",
            "--timeout=10s",
        ],
    )
    .await
    .ok();
    apply(&sandbox, WIDGET).await.ok();
    let path = sandbox.kubeconfig_path().to_path_buf();
    let waiter = tokio::spawn(async move {
        tokio::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(path)
            .args([
                "wait",
                "--for=condition=Ready",
                "widget/w1",
                "--timeout=20s",
            ])
            .output()
            .await
            .unwrap()
    });
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let status = r#"{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Up","message":"ok","lastTransitionTime":"2024-01-01T00:00:00Z"}]}}"#;
    kubectl(
        &sandbox,
        &[
            "patch",
            "widget",
            "w1",
            "--subresource=status",
            "--type=merge",
            "-p",
            status,
        ],
    )
    .await
    .ok();
    let output = waiter.await.unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("condition met"));
    // A status sent to the main resource is ignored when a status subresource exists.
    kubectl(
        &sandbox,
        &[
            "patch",
            "widget",
            "w1",
            "--type=merge",
            "-p",
            r#"{"status":{"replicas":9}}"#,
        ],
    )
    .await
    .ok();
    let replicas = kubectl(
        &sandbox,
        &["get", "widget", "w1", "-o", "jsonpath={.status.replicas}"],
    )
    .await
    .ok();
    assert_eq!(replicas, "");
}

#[tokio::test]
async fn explain_describes_a_crd_field() {
    let sandbox = start().await;
    install_widgets(&sandbox).await;
    let text = kubectl(&sandbox, &["explain", "widget.spec.size"])
        .await
        .ok();
    assert!(text.contains("KIND:       Widget"), "{text}");
    assert!(text.contains("How big the widget is."), "{text}");
    kubectl(&sandbox, &["apply", "-f", project_crds().to_str().unwrap()])
        .await
        .ok();
    let text = kubectl(&sandbox, &["explain", "etcdcluster.spec.replicas"])
        .await
        .ok();
    assert!(text.contains("FIELD: replicas <integer>"), "{text}");
}
