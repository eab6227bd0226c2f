//! The deployment files under `deploy/` checked against the code: the ClusterRole grants
//! exactly [`CLUSTER_PERMISSIONS`] and no wildcard, the leader Role exactly
//! [`LEASE_PERMISSIONS`], and the Helm chart carries the same CRDs and rules as files. The
//! chart itself is rendered, linted and installed with the real `helm` in
//! `tests/helm.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_yaml::Value;

use crate::permissions::{CLUSTER_PERMISSIONS, LEASE_PERMISSIONS, Permission};

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

fn chart_dir() -> PathBuf {
    deploy_dir().join("helm/etcd-operator")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn documents(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|d| serde::Deserialize::deserialize(d).expect("valid YAML"))
        .filter(|v: &Value| !v.is_null())
        .collect()
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("listing {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

/// `(group, resource) → verbs` of a list of RBAC rules, one resource per rule as we write them.
fn rule_table(rules: &Value) -> BTreeMap<(String, String), BTreeSet<String>> {
    let strings = |v: &Value| -> Vec<String> {
        v.as_sequence()
            .expect("a list")
            .iter()
            .map(|s| s.as_str().expect("a string").to_string())
            .collect()
    };
    let mut table = BTreeMap::new();
    for rule in rules.as_sequence().expect("rules are a list") {
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                let verbs = table
                    .entry((group.clone(), resource))
                    .or_insert_with(BTreeSet::new);
                verbs.extend(strings(&rule["verbs"]));
            }
        }
    }
    table
}

fn permission_table(permissions: &[Permission]) -> BTreeMap<(String, String), BTreeSet<String>> {
    permissions
        .iter()
        .map(|p| {
            (
                (p.group.to_string(), p.resource.to_string()),
                p.verbs.iter().map(|v| v.to_string()).collect(),
            )
        })
        .collect()
}

fn plain_object(kind: &str, name: &str) -> Value {
    for dir in ["rbac", "operator"] {
        for file in yaml_files(&deploy_dir().join(dir)) {
            for doc in documents(&read(&file)) {
                if doc["kind"] == kind && doc["metadata"]["name"] == name {
                    return doc;
                }
            }
        }
    }
    panic!("no {kind} {name} under deploy/rbac or deploy/operator");
}

#[test]
fn cluster_role_grants_exactly_what_the_code_uses_and_no_wildcard() {
    let text = read(&deploy_dir().join("rbac/cluster_role.yaml"));
    assert!(
        !text.contains('*'),
        "the ClusterRole must not use wildcards"
    );
    let role = plain_object("ClusterRole", "etcd-operator");
    assert_eq!(
        rule_table(&role["rules"]),
        permission_table(CLUSTER_PERMISSIONS)
    );
}

#[test]
fn leader_role_grants_exactly_the_lease_verbs_in_one_namespace() {
    let role = plain_object("Role", "etcd-operator-leader-election");
    assert_eq!(role["metadata"]["namespace"], "etcd-operator-system");
    assert_eq!(
        rule_table(&role["rules"]),
        permission_table(LEASE_PERMISSIONS)
    );
    let binding = plain_object("RoleBinding", "etcd-operator-leader-election");
    assert_eq!(binding["subjects"][0]["name"], "etcd-operator");
}

#[test]
fn the_deployment_runs_the_operator_image_as_non_root_with_probes() {
    let deployment = plain_object("Deployment", "etcd-operator");
    let spec = &deployment["spec"]["template"]["spec"];
    assert_eq!(spec["serviceAccountName"], "etcd-operator");
    assert_eq!(spec["securityContext"]["runAsNonRoot"], true);
    let container = &spec["containers"][0];
    assert_eq!(
        container["image"],
        format!(
            "ghcr.io/etcd-operator-rs/etcd-operator:v{}",
            env!("CARGO_PKG_VERSION")
        )
        .as_str()
    );
    assert_eq!(container["args"][0], "run");
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert!(container["resources"]["requests"].is_mapping());
}

#[test]
fn the_chart_carries_the_generated_crds_unchanged() {
    let plain: Vec<PathBuf> = yaml_files(&deploy_dir().join("crds"));
    let charted: Vec<PathBuf> = yaml_files(&chart_dir().join("files/crds"));
    let names = |files: &[PathBuf]| -> Vec<String> {
        files
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect()
    };
    assert_eq!(names(&plain), names(&charted));
    for (a, b) in plain.iter().zip(&charted) {
        assert_eq!(
            read(a),
            read(b),
            "{} differs from {}: copy deploy/crds/*.yaml into the chart's files/crds/",
            b.display(),
            a.display()
        );
    }
    for crd in etcd_operator_api::crds() {
        let file = deploy_dir()
            .join("crds")
            .join(etcd_operator_api::crd_file_name(&crd));
        assert_eq!(
            read(&file),
            etcd_operator_api::crd_yaml(&crd),
            "{} is not what the types generate: run `make crds`",
            file.display()
        );
    }
}

#[test]
fn the_chart_carries_the_cluster_role_rules_unchanged() {
    let charted: Value =
        serde_yaml::from_str(&read(&chart_dir().join("files/cluster-role-rules.yaml"))).unwrap();
    let plain = plain_object("ClusterRole", "etcd-operator");
    assert_eq!(
        charted, plain["rules"],
        "the chart's files/cluster-role-rules.yaml differs from deploy/rbac/cluster_role.yaml"
    );
}

#[test]
fn the_chart_carries_the_alert_rules_and_the_dashboard_unchanged() {
    for (plain, charted) in [
        ("prometheus/alerts.yaml", "files/prometheus/alerts.yaml"),
        (
            "grafana/etcd-operator.json",
            "files/grafana/etcd-operator.json",
        ),
    ] {
        assert_eq!(
            read(&chart_dir().join(charted)),
            read(&deploy_dir().join(plain)),
            "the chart's {charted} differs from deploy/{plain}: copy it into the chart"
        );
    }
}
