//! The sandbox driven by the real `kubectl` (v1.32, and v1.33 through `make test`): validation (CEL
//! rules, strict fields), errors, RBAC, server-side apply, namespaces and watch, as kubectl shows
//! them for a real cluster.

mod common;

use common::{
    DEPLOYMENT, WIDGET, apply, install_widgets, kubectl, kubectl_with_input, project_crds, start,
};

#[tokio::test]
async fn cel_rules_reject_bad_objects_with_their_message() {
    let sandbox = start().await;
    install_widgets(&sandbox).await;
    let too_many = WIDGET.replace("replicas: 2", "replicas: 7");
    let err = apply(&sandbox, &too_many).await.err();
    assert!(
        err.contains("only large widgets may have more than 5 replicas"),
        "{err}"
    );
    apply(&sandbox, WIDGET).await.ok();
    let err = kubectl(
        &sandbox,
        &[
            "patch",
            "widget",
            "w1",
            "--type=merge",
            "-p",
            r#"{"spec":{"size":"large"}}"#,
        ],
    )
    .await
    .err();
    assert!(
        err.contains("size is immutable"),
        "transition rule with oldSelf: {err}"
    );
    let err = kubectl(
        &sandbox,
        &[
            "patch",
            "widget",
            "w1",
            "--type=merge",
            "-p",
            r#"{"spec":{"size":"huge"}}"#,
        ],
    )
    .await
    .err();
    assert!(err.contains("Unsupported value: \"huge\""), "{err}");

    kubectl(&sandbox, &["apply", "-f", project_crds().to_str().unwrap()])
        .await
        .ok();
    let cluster = "apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdCluster\nmetadata:\n  name: mem\nspec:\n  replicas: 0\n  version: \"3.5.1\"\n  storage:\n    medium: Memory\n    size: 1Gi\n";
    let err = apply(&sandbox, cluster).await.err();
    assert!(
        err.contains("spec.replicas=0 with spec.storage.medium=Memory is unsupported"),
        "{err}"
    );
    let good = cluster.replace("replicas: 0", "replicas: 3");
    apply(&sandbox, &good).await.ok();
    let err = kubectl(
        &sandbox,
        &[
            "patch",
            "etcdcluster",
            "mem",
            "--type=merge",
            "-p",
            r#"{"spec":{"storage":{"medium":""}}}"#,
        ],
    )
    .await
    .err();
    assert!(err.contains("is invalid"), "{err}");
}

#[tokio::test]
async fn errors_read_as_they_do_against_a_real_cluster() {
    let sandbox = start().await;
    let err = kubectl(&sandbox, &["get", "configmap", "missing"])
        .await
        .err();
    assert!(
        err.contains(r#"Error from server (NotFound): configmaps "missing" not found"#),
        "{err}"
    );
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: once\n";
    kubectl_with_input(&sandbox, &["create", "-f", "-"], Some(cm))
        .await
        .ok();
    let err = kubectl_with_input(&sandbox, &["create", "-f", "-"], Some(cm))
        .await
        .err();
    assert!(
        err.contains(r#"Error from server (AlreadyExists)"#)
            && err.contains(r#"configmaps "once" already exists"#),
        "{err}"
    );
    let bad = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Bad_Name\n";
    let err = kubectl_with_input(&sandbox, &["create", "-f", "-"], Some(bad))
        .await
        .err();
    assert!(
        err.contains("is invalid") && err.contains("metadata.name"),
        "{err}"
    );
    let err = kubectl(&sandbox, &["logs", "nope"]).await.err();
    assert!(err.contains(r#"pods "nope" not found"#), "{err}");
    let version = kubectl(&sandbox, &["version", "-o", "json"]).await.ok();
    assert!(
        version.contains("\"gitVersion\": \"v1.32.0-sandbox\""),
        "{version}"
    );
}

#[tokio::test]
async fn dry_run_server_stores_nothing() {
    let sandbox = start().await;
    let out = kubectl_with_input(
        &sandbox,
        &["apply", "--dry-run=server", "-f", "-"],
        Some(DEPLOYMENT),
    )
    .await
    .ok();
    assert!(out.contains("(server dry run)"), "{out}");
    assert!(
        kubectl(&sandbox, &["get", "deployment", "web"])
            .await
            .err()
            .contains("NotFound")
    );
}

#[tokio::test]
async fn deleting_a_namespace_deletes_what_is_in_it() {
    let sandbox = start().await;
    kubectl_with_input(
        &sandbox,
        &["create", "-f", "-"],
        Some("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: doomed\n"),
    )
    .await
    .ok();
    kubectl_with_input(
        &sandbox,
        &["create", "-n", "doomed", "-f", "-"],
        Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: inside\n"),
    )
    .await
    .ok();
    let accounts = kubectl(
        &sandbox,
        &["get", "serviceaccounts", "-n", "doomed", "-o", "name"],
    )
    .await
    .ok();
    assert!(accounts.contains("serviceaccount/default"), "{accounts}");
    kubectl(
        &sandbox,
        &["delete", "namespace", "doomed", "--wait", "--timeout=20s"],
    )
    .await
    .ok();
    assert!(
        kubectl(&sandbox, &["get", "namespace", "doomed"])
            .await
            .err()
            .contains("NotFound")
    );
    assert!(
        kubectl(&sandbox, &["get", "configmap", "inside", "-n", "doomed"])
            .await
            .err()
            .contains("NotFound")
    );
}

#[tokio::test]
async fn rbac_answers_for_service_accounts() {
    let sandbox = start().await;
    let robot = "system:serviceaccount:default:robot";
    assert_eq!(
        kubectl(&sandbox, &["auth", "can-i", "list", "pods", "--as", robot])
            .await
            .stdout
            .trim(),
        "no"
    );
    let err = kubectl(&sandbox, &["get", "pods", "--as", robot])
        .await
        .err();
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
    assert_eq!(
        kubectl(&sandbox, &["auth", "can-i", "list", "pods", "--as", robot])
            .await
            .stdout
            .trim(),
        "yes"
    );
    assert_eq!(
        kubectl(
            &sandbox,
            &["auth", "can-i", "delete", "pods", "--as", robot]
        )
        .await
        .stdout
        .trim(),
        "no"
    );
    assert_eq!(
        kubectl(
            &sandbox,
            &[
                "auth",
                "can-i",
                "list",
                "pods",
                "-n",
                "kube-system",
                "--as",
                robot
            ]
        )
        .await
        .stdout
        .trim(),
        "no"
    );
    kubectl(&sandbox, &["get", "pods", "--as", robot])
        .await
        .ok();
}

#[tokio::test]
async fn watch_prints_changes_as_they_happen() {
    let sandbox = start().await;
    kubectl_with_input(
        &sandbox,
        &["create", "-f", "-"],
        Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: watched\n"),
    )
    .await
    .ok();
    let path = sandbox.kubeconfig_path().to_path_buf();
    let watcher = tokio::spawn(async move {
        tokio::process::Command::new("timeout")
            .args(["3", "kubectl", "--kubeconfig"])
            .arg(path)
            .args([
                "get",
                "configmaps",
                "--watch",
                "-o",
                "name",
                "--field-selector",
                "metadata.name=watched",
            ])
            .output()
            .await
            .unwrap()
    });
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    kubectl(&sandbox, &["label", "configmap", "watched", "seen=yes"])
        .await
        .ok();
    let output = watcher.await.unwrap();
    let lines = String::from_utf8_lossy(&output.stdout).lines().count();
    assert!(
        lines >= 2,
        "the initial object and its change: {}",
        String::from_utf8_lossy(&output.stdout)
    );
}

#[tokio::test]
async fn server_side_apply_tracks_managers_and_conflicts() {
    let sandbox = start().await;
    let config = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\n  labels: {owner: first, extra: \"yes\"}\ndata:\n  a: \"1\"\n";
    let out = kubectl_with_input(
        &sandbox,
        &["apply", "--server-side", "-f", "-"],
        Some(config),
    )
    .await
    .ok();
    assert!(out.contains("serverside-applied"), "{out}");
    let managers = kubectl(
        &sandbox,
        &[
            "get",
            "configmap",
            "ssa",
            "--show-managed-fields",
            "-o",
            "jsonpath={.metadata.managedFields[*].manager}",
        ],
    )
    .await
    .ok();
    assert_eq!(managers, "kubectl");
    // Another manager changing a field the first owns conflicts, unless it forces.
    let rival = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  a: \"2\"\n";
    let err = kubectl_with_input(
        &sandbox,
        &["apply", "--server-side", "--field-manager=rival", "-f", "-"],
        Some(rival),
    )
    .await
    .err();
    assert!(err.contains("conflict") && err.contains(".data.a"), "{err}");
    kubectl_with_input(
        &sandbox,
        &[
            "apply",
            "--server-side",
            "--field-manager=rival",
            "--force-conflicts",
            "-f",
            "-",
        ],
        Some(rival),
    )
    .await
    .ok();
    assert_eq!(
        kubectl(
            &sandbox,
            &["get", "configmap", "ssa", "-o", "jsonpath={.data.a}"]
        )
        .await
        .ok(),
        "2"
    );
    // A field the first manager stops applying is removed.
    let fewer =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\n  labels: {owner: first}\n";
    kubectl_with_input(
        &sandbox,
        &["apply", "--server-side", "-f", "-"],
        Some(fewer),
    )
    .await
    .ok();
    let labels = kubectl(
        &sandbox,
        &[
            "get",
            "configmap",
            "ssa",
            "-o",
            "jsonpath={.metadata.labels}",
        ],
    )
    .await
    .ok();
    assert_eq!(labels, r#"{"owner":"first"}"#);
    assert_eq!(
        kubectl(
            &sandbox,
            &["get", "configmap", "ssa", "-o", "jsonpath={.data.a}"]
        )
        .await
        .ok(),
        "2",
        "the rival's field stays"
    );
}

#[tokio::test]
async fn field_validation_strict_refuses_unknown_fields() {
    let sandbox = start().await;
    install_widgets(&sandbox).await;
    let unknown = WIDGET.replace("color: blue", "color: blue\n  shape: round");
    let err = apply(&sandbox, &unknown).await.err();
    assert!(err.contains("unknown field \"spec.shape\""), "{err}");
    let out = kubectl_with_input(
        &sandbox,
        &["apply", "--validate=warn", "-f", "-"],
        Some(&unknown),
    )
    .await;
    assert!(out.success, "{}", out.stderr);
    assert!(
        out.stderr.contains("unknown field \"spec.shape\""),
        "a warning: {}",
        out.stderr
    );
    let stored = kubectl(&sandbox, &["get", "widget", "w1", "-o", "jsonpath={.spec}"])
        .await
        .ok();
    assert!(!stored.contains("shape"), "pruned: {stored}");
}

#[tokio::test]
async fn imperative_create_of_simple_kinds() {
    let sandbox = start().await;
    kubectl(&sandbox, &["create", "namespace", "team"])
        .await
        .ok();
    kubectl(
        &sandbox,
        &[
            "create",
            "configmap",
            "settings",
            "-n",
            "team",
            "--from-literal=level=3",
        ],
    )
    .await
    .ok();
    kubectl(
        &sandbox,
        &[
            "create",
            "secret",
            "generic",
            "creds",
            "-n",
            "team",
            "--from-literal=password=s3cret",
        ],
    )
    .await
    .ok();
    kubectl(
        &sandbox,
        &["create", "serviceaccount", "robot", "-n", "team"],
    )
    .await
    .ok();
    let level = kubectl(
        &sandbox,
        &[
            "get",
            "configmap",
            "settings",
            "-n",
            "team",
            "-o",
            "jsonpath={.data.level}",
        ],
    )
    .await
    .ok();
    assert_eq!(level, "3");
    let password = kubectl(
        &sandbox,
        &[
            "get",
            "secret",
            "creds",
            "-n",
            "team",
            "-o",
            "jsonpath={.data.password}",
        ],
    )
    .await
    .ok();
    assert_eq!(password, "czNjcmV0", "base64 of s3cret");
    kubectl(&sandbox, &["get", "serviceaccount", "robot", "-n", "team"])
        .await
        .ok();
    // Kinds whose protobuf the sandbox does not read get an answer that says what to do.
    let err = kubectl(&sandbox, &["create", "deployment", "web", "--image=nginx"])
        .await
        .err();
    assert!(err.contains("send JSON or YAML"), "{err}");
}

#[tokio::test]
async fn a_crd_rule_calling_an_unknown_function_is_refused() {
    let sandbox = start().await;
    let crd = std::fs::read_to_string(common::fixture("widgets-crd.yaml")).unwrap();
    let broken = crd.replace("self.replicas <= 5", "self.replicas.frobnicate() <= 5");
    let err = apply(&sandbox, &broken).await.err();
    assert!(
        err.contains("x-kubernetes-validations[0].rule") && err.contains("frobnicate"),
        "{err}"
    );
    assert!(
        err.contains("spec.versions[0].schema.openAPIV3Schema"),
        "{err}"
    );
    assert!(
        kubectl(&sandbox, &["get", "crd", "widgets.example.com"])
            .await
            .err()
            .contains("NotFound")
    );
}

#[tokio::test]
async fn deleting_a_crd_removes_its_objects_and_stops_serving_it() {
    let sandbox = start().await;
    install_widgets(&sandbox).await;
    apply(&sandbox, WIDGET).await.ok();
    kubectl(
        &sandbox,
        &[
            "delete",
            "crd",
            "widgets.example.com",
            "--wait",
            "--timeout=20s",
        ],
    )
    .await
    .ok();
    let err = kubectl(&sandbox, &["get", "widgets"]).await.err();
    // kubectl may still hold the kind in its discovery cache; either way nothing serves it.
    assert!(
        err.contains("the server doesn't have a resource type \"widgets\"")
            || err.contains("the server could not find the requested resource"),
        "{err}"
    );
    // Installed again, the kind starts empty.
    install_widgets(&sandbox).await;
    let listed = kubectl(&sandbox, &["get", "widgets", "-o", "name"])
        .await
        .ok();
    assert_eq!(listed, "");
}

#[tokio::test]
async fn can_i_list_shows_what_a_service_account_may_do() {
    let sandbox = start().await;
    let rbac = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: lease-keeper}
rules:
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["get", "update"]
  resourceNames: ["etcd-operator"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: keeper}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: lease-keeper}
subjects:
- kind: ServiceAccount
  name: keeper
"#;
    apply(&sandbox, rbac).await.ok();
    let rules = kubectl(
        &sandbox,
        &[
            "auth",
            "can-i",
            "--list",
            "--as",
            "system:serviceaccount:default:keeper",
        ],
    )
    .await
    .ok();
    let lease_line = rules
        .lines()
        .find(|line| line.starts_with("leases.coordination.k8s.io"))
        .unwrap_or_else(|| panic!("{rules}"));
    assert!(
        lease_line.contains("[etcd-operator]") && lease_line.contains("[get update]"),
        "{lease_line}"
    );
    assert!(
        rules.contains("selfsubjectaccessreviews.authorization.k8s.io"),
        "bootstrap roles: {rules}"
    );
}

#[tokio::test]
async fn aggregated_cluster_roles_collect_the_rules_of_labelled_roles() {
    let sandbox = start().await;
    let rbac = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: etcd-admin}
aggregationRule:
  clusterRoleSelectors:
  - matchLabels: {example.com/aggregate-to-etcd-admin: "true"}
rules: []
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: etcd-admins}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: etcd-admin}
subjects:
- kind: ServiceAccount
  name: admin
  namespace: default
"#;
    apply(&sandbox, rbac).await.ok();
    let who = "system:serviceaccount:default:admin";
    let can = |verb: &'static str| {
        let sandbox = &sandbox;
        async move {
            kubectl(sandbox, &["auth", "can-i", verb, "configmaps", "--as", who])
                .await
                .stdout
                .trim()
                .to_string()
        }
    };
    assert_eq!(can("delete").await, "no");
    let labelled = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: etcd-admin-extension
  labels: {example.com/aggregate-to-etcd-admin: "true"}
rules:
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["*"]
"#;
    apply(&sandbox, labelled).await.ok();
    common::eventually("the aggregated role picks the rules up", || async {
        can("delete").await == "yes"
    })
    .await;
    let rules = kubectl(
        &sandbox,
        &[
            "get",
            "clusterrole",
            "etcd-admin",
            "-o",
            "jsonpath={.rules[0].resources}",
        ],
    )
    .await
    .ok();
    assert_eq!(rules, r#"["configmaps"]"#);
}
