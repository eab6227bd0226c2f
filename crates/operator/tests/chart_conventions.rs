//! The Helm chart's conventions, with the real `helm` (v4): its README generated from the
//! values' schema (every value described, every default from values.yaml), the standard
//! labels on every object, `nameOverride`/`fullnameOverride`, `serviceAccount.create`/`name`,
//! `rbac.create`, the protection policy only where the API server serves it, `kubeVersion`,
//! and NOTES.txt's next steps.
//!
//! Regenerate the README after changing values.yaml or values.schema.json:
//!
//! ```sh
//! UPDATE_CHART_README=1 cargo nextest run -p etcd-operator --test chart_conventions
//! ```

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn chart() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/helm/etcd-operator")
}

fn read(name: &str) -> String {
    std::fs::read_to_string(chart().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn schema() -> Value {
    serde_json::from_str(&read("values.schema.json")).expect("values.schema.json parses")
}

fn values() -> Value {
    serde_yaml::from_str(&read("values.yaml")).expect("values.yaml parses")
}

fn chart_yaml() -> Value {
    serde_yaml::from_str(&read("Chart.yaml")).expect("Chart.yaml parses")
}

/// `helm` with its own cache and configuration; (success, stdout, stderr).
fn helm(args: &[&str]) -> (bool, String, String) {
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(std::env::var_os("HELM").unwrap_or_else(|| "helm".into()))
        .env("HELM_CACHE_HOME", home.path().join("cache"))
        .env("HELM_CONFIG_HOME", home.path().join("config"))
        .env("HELM_DATA_HOME", home.path().join("data"))
        .args(args)
        .output()
        .expect("helm runs (scripts/install-deps.sh installs it)");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const VAP: &[&str] = &[
    "--api-versions",
    "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy",
    "--api-versions",
    "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding",
];

/// `helm template <release>` in `etcd-operator-system` with `extra`: the rendered objects.
fn template(release: &str, extra: &[&str]) -> Vec<Value> {
    let chart = chart();
    let mut args = vec![
        "template",
        release,
        chart.to_str().unwrap(),
        "--namespace",
        "etcd-operator-system",
    ];
    args.extend_from_slice(extra);
    let (ok, out, err) = helm(&args);
    assert!(ok, "helm template {extra:?}: {err}");
    serde_yaml::Deserializer::from_str(&out)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .filter(|v: &Value| !v.is_null())
        .collect()
}

fn find<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| o["kind"] == kind).collect()
}

fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

fn type_of(node: &Value) -> String {
    if let Some(reference) = node["$ref"].as_str() {
        return match reference.rsplit('/').next() {
            Some("stringMap") => "map of string".into(),
            Some("positiveInteger") => "integer ≥ 1".into(),
            other => other.unwrap_or(reference).into(),
        };
    }
    let mut kind = match node["type"].as_str() {
        Some("array") => "list".to_string(),
        Some(t) => t.to_string(),
        None => "any".to_string(),
    };
    if let Some(values) = node["enum"].as_array() {
        let values: Vec<String> = values
            .iter()
            .map(|v| v.as_str().unwrap_or("").to_string())
            .collect();
        kind = format!("{kind}: {}", values.join(", "));
    }
    kind
}

/// Every value the schema declares, depth first: (key, type, default, description).
fn rows(node: &Value, prefix: &str, defaults: &Value, out: &mut Vec<[String; 4]>) {
    let Some(properties) = node["properties"].as_object() else {
        return;
    };
    for (name, child) in properties {
        if prefix.is_empty() && name == "global" {
            continue;
        }
        let key = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}.{name}")
        };
        let default = &defaults[name.as_str()];
        if child["properties"].is_object() {
            rows(child, &key, default, out);
            continue;
        }
        let shown = match default {
            Value::Null => String::new(),
            other => format!("`{}`", serde_json::to_string(other).unwrap()),
        };
        out.push([
            key,
            type_of(child),
            cell(&shown),
            cell(child["description"].as_str().unwrap_or_default()),
        ]);
    }
}

fn render_readme() -> String {
    let chart = chart_yaml();
    let mut page = String::new();
    let name = chart["name"].as_str().unwrap();
    writeln!(page, "# The {name} chart\n").unwrap();
    writeln!(
        page,
        "<!-- Generated from values.schema.json and values.yaml by crates/operator/tests/chart_conventions.rs;\n     do not edit. UPDATE_CHART_README=1 cargo nextest run -p etcd-operator --test chart_conventions -->\n"
    )
    .unwrap();
    writeln!(page, "{}.\n", chart["description"].as_str().unwrap()).unwrap();
    writeln!(
        page,
        "Chart version {}, operator version {}, Kubernetes `{}`. Documentation: {}\n",
        chart["version"].as_str().unwrap(),
        chart["appVersion"].as_str().unwrap(),
        chart["kubeVersion"].as_str().unwrap(),
        chart["home"].as_str().unwrap()
    )
    .unwrap();
    writeln!(
        page,
        "```sh\nhelm install etcd-operator deploy/helm/etcd-operator -n etcd-operator-system --create-namespace \\\n    --set image.repository=<registry>/etcd-operator\n```\n"
    )
    .unwrap();
    writeln!(
        page,
        "Every object carries `app.kubernetes.io/name`, `instance`, `version`, `managed-by`, `part-of` and\n`helm.sh/chart`. The names derive from the release (`fullnameOverride`, `nameOverride`); with the\nrelease `etcd-operator` they are those of the plain manifests in `deploy/`. `helm template` renders the\nprotection policy only when told the API server serves it (`--api-versions\nadmissionregistration.k8s.io/v1/ValidatingAdmissionPolicy`), as `helm install` finds out by itself.\n"
    )
    .unwrap();
    writeln!(page, "## Values\n").unwrap();
    writeln!(
        page,
        "| Key | Type | Default | Description |\n| --- | --- | --- | --- |"
    )
    .unwrap();
    let mut out = Vec::new();
    rows(&schema(), "", &values(), &mut out);
    for [key, kind, default, description] in out {
        writeln!(page, "| `{key}` | {kind} | {default} | {description} |").unwrap();
    }
    page
}

#[test]
fn the_readme_is_generated_from_the_values() {
    let rendered = render_readme();
    let path = chart().join("README.md");
    if std::env::var_os("UPDATE_CHART_README").is_some() {
        std::fs::write(&path, &rendered).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == rendered,
        "deploy/helm/etcd-operator/README.md is not what values.schema.json and values.yaml say; \
         regenerate with UPDATE_CHART_README=1 cargo nextest run -p etcd-operator --test chart_conventions"
    );
}

/// Every value of values.yaml is declared and described in the schema, down to the leaves the
/// schema names, so the README leaves nothing out.
#[test]
fn every_value_is_described() {
    fn walk(values: &Value, schema: &Value, path: &str, missing: &mut Vec<String>) {
        let Some(map) = values.as_object() else {
            return;
        };
        for (key, value) in map {
            let here = format!("{path}{key}");
            let node = &schema["properties"][key.as_str()];
            if node.is_null() {
                missing.push(format!("{here}: not in the schema"));
                continue;
            }
            if node["description"].as_str().is_none_or(str::is_empty) {
                missing.push(format!("{here}: no description"));
            }
            if node["properties"].is_object() {
                walk(value, node, &format!("{here}."), missing);
            }
        }
    }
    let mut missing = Vec::new();
    walk(&values(), &schema(), "", &mut missing);
    assert!(missing.is_empty(), "values.schema.json: {missing:#?}");
    // And the README carries a row for each (the generator's walk reaches them).
    let readme = render_readme();
    for key in [
        "nameOverride",
        "serviceAccount.create",
        "rbac.create",
        "localStore.root",
    ] {
        assert!(readme.contains(&format!("| `{key}` |")), "{key}");
    }
}

#[test]
fn lint_passes_strictly_and_kube_version_is_declared() {
    let chart = chart();
    let (ok, out, err) = helm(&["lint", "--strict", chart.to_str().unwrap()]);
    assert!(ok, "helm lint --strict: {out}{err}");
    assert_eq!(chart_yaml()["kubeVersion"], ">=1.30.0-0");
    // A Kubernetes older than 1.30 is refused before anything renders.
    let (ok, _, err) = helm(&[
        "template",
        "etcd-operator",
        chart.to_str().unwrap(),
        "--kube-version",
        "1.29.4",
    ]);
    assert!(!ok, "1.29 accepted");
    assert!(err.contains("kubeVersion"), "{err}");
}

#[test]
fn every_object_carries_the_standard_labels() {
    let objects = template(
        "etcd-operator",
        &[
            VAP,
            &[
                "--set",
                "serviceMonitor.enabled=true",
                "--set",
                "prometheusRule.enabled=true",
                "--set",
                "dashboard.enabled=true",
            ],
        ]
        .concat(),
    );
    let chart = chart_yaml();
    let expected_chart = format!("etcd-operator-{}", chart["version"].as_str().unwrap());
    assert!(objects.len() > 15, "{} objects", objects.len());
    for object in &objects {
        let labels = &object["metadata"]["labels"];
        let name = format!("{} {}", object["kind"], object["metadata"]["name"]);
        if object["kind"] == "CustomResourceDefinition" {
            continue;
        }
        assert_eq!(labels["helm.sh/chart"], expected_chart.as_str(), "{name}");
        assert_eq!(labels["app.kubernetes.io/name"], "etcd-operator", "{name}");
        assert_eq!(
            labels["app.kubernetes.io/instance"], "etcd-operator",
            "{name}"
        );
        assert_eq!(labels["app.kubernetes.io/managed-by"], "Helm", "{name}");
        assert_eq!(
            labels["app.kubernetes.io/version"], chart["appVersion"],
            "{name}"
        );
        assert_eq!(
            labels["app.kubernetes.io/part-of"], "etcd-operator",
            "{name}"
        );
    }
}

#[test]
fn names_follow_the_release_and_the_overrides() {
    let names = |objects: &[Value]| -> Vec<String> {
        let mut names: Vec<String> = objects
            .iter()
            .filter(|o| o["kind"] != "CustomResourceDefinition")
            .map(|o| {
                format!(
                    "{}/{}",
                    o["kind"].as_str().unwrap(),
                    o["metadata"]["name"].as_str().unwrap()
                )
            })
            .collect();
        names.sort();
        names
    };
    // Another release: every object named after it, the Pods selected by the chart's name.
    let objects = template("platform", VAP);
    for name in names(&objects) {
        assert!(name.contains("/platform-etcd-operator"), "{name}");
    }
    let deployment = find(&objects, "Deployment")[0];
    assert_eq!(
        deployment["spec"]["template"]["spec"]["serviceAccountName"],
        "platform-etcd-operator"
    );
    let policy = find(&objects, "ValidatingAdmissionPolicy")[0];
    let allowed = policy["spec"]["variables"][0]["expression"]
        .as_str()
        .unwrap();
    assert!(
        allowed.contains("'system:serviceaccount:etcd-operator-system:platform-etcd-operator'"),
        "{allowed}"
    );
    let binding = find(&objects, "ClusterRoleBinding")[0];
    assert_eq!(binding["roleRef"]["name"], "platform-etcd-operator");
    assert_eq!(binding["subjects"][0]["name"], "platform-etcd-operator");

    // fullnameOverride and nameOverride.
    let objects = template(
        "platform",
        &[VAP, &["--set", "fullnameOverride=etcd-ops"]].concat(),
    );
    for name in names(&objects) {
        assert!(name.contains("/etcd-ops"), "{name}");
    }
    let objects = template("platform", &["--set", "nameOverride=etcdop"]);
    let deployment = find(&objects, "Deployment")[0];
    assert_eq!(deployment["metadata"]["name"], "platform-etcdop");
    assert_eq!(
        deployment["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"],
        "etcdop"
    );
    let service = find(&objects, "Service")[0];
    assert_eq!(
        service["spec"]["selector"]["app.kubernetes.io/name"],
        "etcdop"
    );
}

#[test]
fn the_service_account_and_rbac_can_be_brought() {
    let objects = template(
        "etcd-operator",
        &[
            VAP,
            &[
                "--set",
                "serviceAccount.create=false",
                "--set",
                "serviceAccount.name=platform-sa",
                "--set",
                "rbac.create=false",
            ],
        ]
        .concat(),
    );
    for kind in [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
    ] {
        assert!(find(&objects, kind).is_empty(), "{kind} rendered");
    }
    let deployment = find(&objects, "Deployment")[0];
    assert_eq!(
        deployment["spec"]["template"]["spec"]["serviceAccountName"],
        "platform-sa"
    );
    let policy = find(&objects, "ValidatingAdmissionPolicy")[0];
    assert!(
        policy["spec"]["variables"][0]["expression"]
            .as_str()
            .unwrap()
            .contains(":platform-sa'"),
        "the policy allows the account the operator runs as"
    );
    // create=false without a name is refused with what to do.
    let chart = chart();
    let (ok, _, err) = helm(&[
        "template",
        "etcd-operator",
        chart.to_str().unwrap(),
        "--set",
        "serviceAccount.create=false",
    ]);
    assert!(!ok);
    assert!(err.contains("serviceAccount.name is required"), "{err}");
}

#[test]
fn the_protection_policy_renders_only_where_it_is_served() {
    let served = template("etcd-operator", VAP);
    assert_eq!(find(&served, "ValidatingAdmissionPolicy").len(), 1);
    assert_eq!(find(&served, "ValidatingAdmissionPolicyBinding").len(), 1);
    let unknown = template("etcd-operator", &[]);
    assert!(find(&unknown, "ValidatingAdmissionPolicy").is_empty());
    assert!(find(&unknown, "ValidatingAdmissionPolicyBinding").is_empty());
}

#[test]
fn notes_print_the_next_steps() {
    let chart = chart();
    let install = |extra: &[&str]| {
        let mut args = vec![
            "install",
            "etcd-operator",
            chart.to_str().unwrap(),
            "--namespace",
            "etcd-operator-system",
            "--dry-run=client",
        ];
        args.extend_from_slice(extra);
        let (ok, out, err) = helm(&args);
        assert!(ok, "{err}");
        out.split("NOTES:").nth(1).unwrap_or_default().to_string()
    };
    // A client-side dry run knows no API server, so it cannot tell that the policy is served.
    let notes = install(&[]);
    for step in [
        "kubectl -n etcd-operator-system rollout status deploy/etcd-operator",
        "kubectl wait etcdcluster/example --for=condition=Available",
        "kubectl get etcd-operator -A",
        "every namespace",
        "prometheusRule.enabled=true",
    ] {
        assert!(notes.contains(step), "NOTES.txt says {step:?}:\n{notes}");
    }
    assert!(
        notes.contains("protection policy was not installed"),
        "{notes}"
    );
    let notes = install(&[
        "--set",
        "watchNamespace=team-a",
        "--set",
        "prometheusRule.enabled=true",
        "--set",
        "protection.enabled=false",
    ]);
    assert!(notes.contains("in the namespace team-a only"), "{notes}");
    assert!(
        !notes.contains("protection policy was not installed"),
        "{notes}"
    );
    assert!(!notes.contains("prometheusRule.enabled=true"), "{notes}");
}
