//! The deployment files under `deploy/` checked against the code: the ClusterRole grants
//! exactly [`CLUSTER_PERMISSIONS`] and no wildcard, the leader Role exactly
//! [`LEASE_PERMISSIONS`], the Helm chart carries the same CRDs and rules, and the chart
//! rendered with its default values yields the plain manifests.
//!
//! No helm binary is available, so the chart's templates keep to a handful of constructs
//! (`.Values.x`, `.Release.Namespace`, `.Files.Get "f" | nindent N`, `toYaml .Values.x |
//! nindent N`) that [`render`] implements.

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
    let charted: Vec<PathBuf> = yaml_files(&chart_dir().join("crds"));
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
            "{} differs from {}: copy deploy/crds/*.yaml into the chart",
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
fn the_chart_renders_the_plain_manifests() {
    let values: Value = serde_yaml::from_str(&read(&chart_dir().join("values.yaml"))).unwrap();
    let files = |name: &str| read(&chart_dir().join(name));
    let mut rendered = Vec::new();
    for template in yaml_files(&chart_dir().join("templates")) {
        let text = render(&read(&template), &values, &files, "etcd-operator-system");
        rendered.extend(documents(&text));
    }
    assert!(!rendered.is_empty());
    for object in &rendered {
        let kind = object["kind"].as_str().expect("a kind");
        let name = object["metadata"]["name"].as_str().expect("a name");
        assert_eq!(
            object,
            &plain_object(kind, name),
            "the chart's {kind} {name} differs from the plain manifest"
        );
    }
    // Everything plain except the Namespace (Helm creates it with --create-namespace).
    let mut plain_count = 0;
    for dir in ["rbac", "operator"] {
        for file in yaml_files(&deploy_dir().join(dir)) {
            plain_count += documents(&read(&file))
                .iter()
                .filter(|d| d["kind"] != "Namespace")
                .count();
        }
    }
    assert_eq!(rendered.len(), plain_count);
}

/// Renders the template constructs the chart uses.
fn render(
    template: &str,
    values: &Value,
    files: &dyn Fn(&str) -> String,
    namespace: &str,
) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        let end = rest[start..].find("}}").expect("an unclosed {{") + start;
        let mut inner = rest[start + 2..end].trim();
        out.push_str(&rest[..start]);
        if let Some(trimmed) = inner.strip_prefix('-') {
            let kept = out.trim_end().len();
            out.truncate(kept);
            inner = trimmed.trim();
        }
        let mut after = &rest[end + 2..];
        if let Some(trimmed) = inner.strip_suffix('-') {
            inner = trimmed.trim();
            after = after.trim_start();
        }
        out.push_str(&evaluate(inner, values, files, namespace));
        rest = after;
    }
    out.push_str(rest);
    out
}

fn evaluate(expr: &str, values: &Value, files: &dyn Fn(&str) -> String, namespace: &str) -> String {
    let (head, pipe) = match expr.split_once('|') {
        Some((h, p)) => (h.trim(), Some(p.trim())),
        None => (expr, None),
    };
    let text = if head == ".Release.Namespace" {
        namespace.to_string()
    } else if let Some(path) = head.strip_prefix(".Values.") {
        scalar(lookup(values, path))
    } else if let Some(file) = head.strip_prefix(".Files.Get ") {
        files(file.trim_matches('"'))
    } else if let Some(path) = head.strip_prefix("toYaml .Values.") {
        serde_yaml::to_string(lookup(values, path)).unwrap()
    } else {
        panic!("the chart uses {{{{ {expr} }}}}, which the test renderer does not know");
    };
    match pipe {
        None => text,
        Some(nindent) => {
            let width: usize = nindent
                .strip_prefix("nindent ")
                .and_then(|n| n.trim().parse().ok())
                .unwrap_or_else(|| panic!("unknown pipe {nindent:?}"));
            let pad = " ".repeat(width);
            let lines: Vec<String> = text
                .trim_end()
                .lines()
                .map(|l| format!("{pad}{l}"))
                .collect();
            format!("\n{}", lines.join("\n"))
        }
    }
}

fn lookup<'a>(values: &'a Value, path: &str) -> &'a Value {
    path.split('.').fold(values, |v, key| &v[key])
}

fn scalar(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        other => panic!("not a scalar: {other:?}"),
    }
}
