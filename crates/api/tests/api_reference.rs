//! The field reference of `docs/reference/`, generated from the CRDs `crds()` builds from the
//! Rust types (the same schemas `kubectl explain` reads), and the check that the committed
//! pages are what the types say: a field whose description, type, default or bounds changed
//! in the code and not in the docs (or the other way round) fails this test.
//!
//! Regenerate after changing a type or a doc comment:
//!
//! ```sh
//! UPDATE_API_DOCS=1 cargo nextest run -p etcd-operator-api --test api_reference
//! ```
//!
//! The hand-written overview, `docs/api.md`, is checked too: every field its tables name must
//! exist in the CRD of its section.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::PathBuf;

use serde_json::Value;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn reference_dir() -> PathBuf {
    repo_root().join("docs/reference")
}

/// Kubernetes types the CRDs embed whole: named and linked, not expanded field by field.
const KUBERNETES_TYPES: &[(&str, &str, &str)] = &[
    (
        "affinity",
        "Affinity",
        "https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#scheduling",
    ),
    (
        "topologySpreadConstraints",
        "TopologySpreadConstraint",
        "https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#scheduling",
    ),
    (
        "resources",
        "ResourceRequirements",
        "https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#resources",
    ),
    (
        "conditions",
        "Condition",
        "https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/object-meta/",
    ),
];

/// One line of a Markdown table cell: no newline, no unescaped `|`.
fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

fn json_inline(value: &Value) -> String {
    match value {
        Value::String(s) => format!("`\"{s}\"`"),
        other => format!("`{other}`"),
    }
}

/// The type column: base type, list or map, format, enum, default, bounds, pattern.
fn type_of(node: &Value, required: bool, name: &str) -> String {
    let mut parts = Vec::new();
    if let Some((_, kind, link)) = KUBERNETES_TYPES.iter().find(|(n, ..)| *n == name) {
        let base = format!("[{kind}]({link})");
        parts.push(if node["type"] == "array" {
            format!("list of {base}")
        } else {
            base
        });
    } else {
        parts.push(base_type(node));
    }
    if required {
        parts.push("required".into());
    }
    if let Some(values) = node["enum"].as_array() {
        let values: Vec<String> = values.iter().map(json_inline).collect();
        parts.push(format!("one of {}", values.join(", ")));
    }
    if let Some(default) = node.get("default") {
        parts.push(format!("default {}", json_inline(default)));
    }
    if let Some(min) = node.get("minimum") {
        parts.push(format!("≥ {}", number(min)));
    }
    if let Some(max) = node.get("maximum") {
        parts.push(format!("≤ {}", number(max)));
    }
    if let Some(min) = node["minLength"].as_u64().filter(|m| *m > 0) {
        parts.push(format!("at least {min} characters"));
    }
    if let Some(pattern) = node["pattern"].as_str() {
        parts.push(format!("pattern `{pattern}`"));
    }
    cell(&parts.join(", "))
}

fn number(value: &Value) -> String {
    match value.as_f64() {
        Some(f) if f.fract() == 0.0 => format!("{}", f as i64),
        _ => value.to_string(),
    }
}

fn base_type(node: &Value) -> String {
    if node["x-kubernetes-int-or-string"] == true {
        return "quantity (integer or string)".into();
    }
    match node["type"].as_str() {
        Some("array") => format!("list of {}", base_type(&node["items"])),
        Some("object") if node.get("properties").is_none() => {
            match node.get("additionalProperties") {
                Some(values) if values.is_object() => {
                    format!("map of {}", base_type(values))
                }
                _ => "object".into(),
            }
        }
        Some("string") => match node["format"].as_str() {
            Some("date-time") => "date-time".into(),
            Some(format) => format!("string ({format})"),
            None => "string".into(),
        },
        Some("integer") => match node["format"].as_str() {
            Some(format) => format.into(),
            None => "integer".into(),
        },
        Some(other) => other.into(),
        None => "any".into(),
    }
}

/// Every field under `node` at `path`, depth first, in the schema's (alphabetical) order.
fn fields(node: &Value, path: &str, rows: &mut Vec<(String, String, String)>) {
    let (properties, required) = match node["type"].as_str() {
        Some("array") => (&node["items"]["properties"], &node["items"]["required"]),
        _ => (&node["properties"], &node["required"]),
    };
    let Some(properties) = properties.as_object() else {
        return;
    };
    let required: BTreeSet<&str> = required
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    for (name, child) in properties {
        let child_path = if path.is_empty() {
            name.clone()
        } else {
            format!("{path}.{name}")
        };
        let marker = if child["type"] == "array" { "[]" } else { "" };
        rows.push((
            format!("{child_path}{marker}"),
            type_of(child, required.contains(name.as_str()), name),
            cell(child["description"].as_str().unwrap_or_default()),
        ));
        let embedded = KUBERNETES_TYPES.iter().any(|(n, ..)| n == name);
        // status.observed repeats the spec's types: its own fields are listed, not theirs.
        let repeated = path == "status.observed";
        if !embedded && !repeated {
            fields(child, &format!("{child_path}{marker}"), rows);
        }
    }
}

/// The page of one CRD.
fn render(crd: &Value) -> String {
    let names = &crd["spec"]["names"];
    let kind = names["kind"].as_str().unwrap();
    let version = &crd["spec"]["versions"][0];
    let schema = &version["schema"]["openAPIV3Schema"];
    let mut page = String::new();
    writeln!(page, "# {kind}\n").unwrap();
    writeln!(
        page,
        "<!-- Generated from the CRD by crates/api/tests/api_reference.rs; do not edit.\n     UPDATE_API_DOCS=1 cargo nextest run -p etcd-operator-api --test api_reference -->\n"
    )
    .unwrap();
    writeln!(
        page,
        "{}\n",
        cell(schema["description"].as_str().unwrap_or_default())
    )
    .unwrap();
    let list = |key: &str| {
        names[key]
            .as_array()
            .map(|v| {
                v.iter()
                    .filter_map(Value::as_str)
                    .map(|s| format!("`{s}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default()
    };
    writeln!(page, "| | |\n| --- | --- |").unwrap();
    writeln!(
        page,
        "| API version | `{}/{}` |",
        crd["spec"]["group"].as_str().unwrap(),
        version["name"].as_str().unwrap()
    )
    .unwrap();
    writeln!(
        page,
        "| Scope | {} |",
        crd["spec"]["scope"].as_str().unwrap()
    )
    .unwrap();
    writeln!(page, "| Plural | `{}` |", names["plural"].as_str().unwrap()).unwrap();
    writeln!(page, "| Short names | {} |", list("shortNames")).unwrap();
    writeln!(page, "| Categories | {} |", list("categories")).unwrap();
    let subresources: Vec<&str> = version["subresources"]
        .as_object()
        .map(|s| s.keys().map(String::as_str).collect())
        .unwrap_or_default();
    writeln!(page, "| Subresources | {} |\n", subresources.join(", ")).unwrap();

    writeln!(page, "## `kubectl get` columns\n").unwrap();
    writeln!(page, "| Column | Reads | Shown |\n| --- | --- | --- |").unwrap();
    for column in version["additionalPrinterColumns"].as_array().unwrap() {
        let shown = if column["priority"].as_i64().unwrap_or(0) > 0 {
            "with `-o wide`"
        } else {
            "always"
        };
        writeln!(
            page,
            "| {} | `{}` | {shown} |",
            column["name"].as_str().unwrap().to_uppercase(),
            cell(column["jsonPath"].as_str().unwrap())
        )
        .unwrap();
    }
    for (section, title) in [("spec", "spec"), ("status", "status")] {
        let node = &schema["properties"][section];
        if node.is_null() {
            continue;
        }
        let mut rows = Vec::new();
        fields(node, section, &mut rows);
        writeln!(page, "\n## {title}\n").unwrap();
        writeln!(
            page,
            "{}\n",
            cell(node["description"].as_str().unwrap_or_default())
        )
        .unwrap();
        writeln!(page, "| Field | Type | Description |\n| --- | --- | --- |").unwrap();
        for (path, kind, description) in rows {
            writeln!(page, "| `{path}` | {kind} | {description} |").unwrap();
        }
    }
    page
}

fn file_name(crd: &Value) -> String {
    format!("{}.md", crd["spec"]["names"]["singular"].as_str().unwrap())
}

fn crds() -> Vec<Value> {
    etcd_operator_api::crds()
        .into_iter()
        .map(|crd| serde_json::to_value(crd).unwrap())
        .collect()
}

#[test]
fn the_field_reference_is_what_the_crds_say() {
    let update = std::env::var_os("UPDATE_API_DOCS").is_some();
    let dir = reference_dir();
    let mut stale = Vec::new();
    let mut expected_files = BTreeSet::new();
    for crd in crds() {
        let name = file_name(&crd);
        let path = dir.join(&name);
        let rendered = render(&crd);
        expected_files.insert(name.clone());
        if update {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &rendered).unwrap();
            continue;
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        if committed != rendered {
            let first = committed
                .lines()
                .zip(rendered.lines())
                .position(|(a, b)| a != b)
                .map(|i| {
                    format!(
                        "first difference at line {}:\n  docs: {}\n  CRD:  {}",
                        i + 1,
                        committed.lines().nth(i).unwrap_or_default(),
                        rendered.lines().nth(i).unwrap_or_default()
                    )
                })
                .unwrap_or_else(|| "one is a prefix of the other".into());
            stale.push(format!("docs/reference/{name}: {first}"));
        }
    }
    let present: BTreeSet<String> = std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".md") && n != "index.md")
                .collect()
        })
        .unwrap_or_default();
    for extra in present.difference(&expected_files) {
        stale.push(format!("docs/reference/{extra}: no CRD renders it"));
    }
    assert!(
        stale.is_empty(),
        "docs/reference/ and the CRDs' descriptions disagree (regenerate with UPDATE_API_DOCS=1 \
         cargo nextest run -p etcd-operator-api --test api_reference):\n{}",
        stale.join("\n")
    );
}

/// A changed description is a difference: the comparison above can fail.
#[test]
fn a_changed_description_changes_the_page() {
    let mut crd = crds().remove(0);
    let before = render(&crd);
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["replicas"]
        ["description"] = Value::from("Something else.");
    let after = render(&crd);
    assert_ne!(before, after);
    assert!(
        after.contains("| `spec.replicas` | int32, default `3`, ≥ 0 | Something else. |"),
        "{after}"
    );
}

/// The schema node at a dotted path (`spec.tls.client`), through list items.
fn node_at<'a>(schema: &'a Value, path: &str) -> Option<&'a Value> {
    let mut node = schema;
    for part in path.split('.') {
        if node["type"] == "array" {
            node = &node["items"];
        }
        node = node.get("properties")?.get(part)?;
    }
    Some(node)
}

/// The field paths the tables of one `docs/api.md` section name, with the prefix each
/// sub-heading stands for.
fn api_md_fields(section: &str) -> Vec<String> {
    let prefixes = [
        ("### spec", "spec"),
        ("#### storage", "spec.storage"),
        ("#### tls", "spec.tls"),
        ("#### auth", "spec.auth"),
        ("#### options", "spec.options"),
        ("### status", "status"),
        ("### Snapshot locations", "spec.destination"),
    ];
    let mut prefix = "";
    let mut paths = Vec::new();
    let mut in_field_table = false;
    for line in section.lines() {
        if line.starts_with('#') {
            prefix = prefixes
                .iter()
                .find(|(heading, _)| line.trim() == *heading)
                .map_or("", |(_, p)| *p);
            in_field_table = false;
            continue;
        }
        if line.starts_with("| Field |") {
            in_field_table = true;
            continue;
        }
        if !line.starts_with('|') {
            in_field_table = false;
            continue;
        }
        if !in_field_table || line.starts_with("|---") || line.starts_with("| ---") {
            continue;
        }
        let first = line.split('|').nth(1).unwrap_or_default();
        for name in first.split('`').skip(1).step_by(2) {
            let name = name.trim();
            // Only field paths: `spec.x`, `status.x`, or a name relative to the heading.
            if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '.') || name.is_empty() {
                continue;
            }
            let full = if name.starts_with("spec.") || name.starts_with("status.") {
                name.to_string()
            } else if !prefix.is_empty() {
                format!("{prefix}.{name}")
            } else {
                continue;
            };
            paths.push(full);
        }
    }
    paths
}

#[test]
fn every_field_docs_api_md_names_exists() {
    let text = std::fs::read_to_string(repo_root().join("docs/api.md")).unwrap();
    let crds = crds();
    let mut missing = Vec::new();
    let mut checked = 0;
    for section in text.split("\n## ").skip(1) {
        let title = section.lines().next().unwrap_or_default().trim();
        let Some(crd) = crds.iter().find(|c| c["spec"]["names"]["kind"] == title) else {
            continue;
        };
        let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
        for path in api_md_fields(section) {
            checked += 1;
            // A location table row is relative to every place a location is used.
            let found = node_at(schema, &path).is_some()
                || path.strip_prefix("spec.destination.").is_some_and(|rest| {
                    node_at(schema, &format!("spec.destination.{rest}")).is_some()
                });
            if !found {
                missing.push(format!("{title}: `{path}`"));
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} field names found in docs/api.md's tables"
    );
    assert!(
        missing.is_empty(),
        "docs/api.md names fields its CRD does not have:\n{}",
        missing.join("\n")
    );
}
