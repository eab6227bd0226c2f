//! Our generated CRDs against the reference operator's CRDs, read at test time from
//! `../shared/reference/cozystack-v1alpha2/` beside the repository.
//!
//! Everything but descriptions must be equal: every property path with every keyword (type,
//! format, default, enum, pattern, bounds, required lists, `x-kubernetes-*` markers, CEL rules
//! with their messages), the printer columns, names, scope and subresources. The only paths
//! allowed to exist in ours alone are the extensions of this implementation, listed below.

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde_json::{Map, Value};

/// The property paths this implementation adds to the reference API (see docs/api.md).
const EXTENSIONS: &[(&str, &str)] = &[
    ("etcdclusters", ".spec.paused"),
    ("etcdclusters", ".status.members"),
    ("etcdclusters", ".status.leader"),
    ("etcdclusters", ".status.restoredFrom"),
    ("etcdclusters", ".spec.quorumRecovery"),
    ("etcdclusters", ".status.quorumRecovery"),
    ("etcdclusters", ".status.noSpaceRemediation"),
    ("etcdclusters", ".spec.persistentVolumeClaimRetentionPolicy"),
    ("etcdmembers", ".status.phase"),
    ("etcdmembers", ".status.recreateCount"),
    ("etcdmembers", ".status.lastPhaseTransitionTime"),
    ("etcdclusters", ".spec.tls.client.operatorIssued"),
    ("etcdclusters", ".spec.tls.peer.operatorIssued"),
    ("etcdsnapshots", ".status.startTime"),
    ("etcdsnapshots", ".status.completionTime"),
    ("etcdsnapshots", ".status.revision"),
    ("etcdsnapshots", ".status.member"),
    ("etcdsnapshots", ".status.etcdVersion"),
    ("etcdsnapshots", ".status.verified"),
    ("etcdsnapshots", ".status.failureReason"),
    ("etcdsnapshots", ".spec.deletionPolicy"),
    ("etcdsnapshots", ".spec.destination.gcs"),
    ("etcdsnapshots", ".spec.destination.azure"),
    ("etcdsnapshots", ".spec.destination.local"),
    ("etcdclusters", ".spec.bootstrap.restore.source.gcs"),
    ("etcdclusters", ".spec.bootstrap.restore.source.azure"),
    ("etcdclusters", ".spec.bootstrap.restore.source.local"),
    ("etcdmembers", ".spec.restore.source.gcs"),
    ("etcdmembers", ".spec.restore.source.azure"),
    ("etcdmembers", ".spec.restore.source.local"),
    ("etcdsnapshots", ".spec.compression"),
    ("etcdsnapshots", ".spec.encryption"),
    ("etcdsnapshots", ".spec.verify"),
    ("etcdsnapshots", ".status.compression"),
    ("etcdsnapshots", ".status.encryption"),
    ("etcdsnapshots", ".status.snapshotSizeBytes"),
    ("etcdsnapshots", ".status.snapshotChecksum"),
    ("etcdsnapshots", ".status.verification"),
    (
        "etcdclusters",
        ".spec.bootstrap.restore.ageIdentitySecretRef",
    ),
    ("etcdmembers", ".spec.restore.ageIdentitySecretRef"),
];

/// The guard of the reference's "exactly one of s3 or pvc" wherever a snapshot location is:
/// the extension stores (GCS, Azure, local) are judged by an added rule instead.
const EXTENSION_STORES: &str = "has(self.gcs) || has(self.azure) || has(self.local)";
/// The reference's rule at each snapshot location.
const ONE_OF_S3_OR_PVC: &str = "has(self.s3) != has(self.pvc)";
/// The added rule's message at each snapshot location.
const EXACTLY_ONE_STORE: &str = "exactly one of destination.s3, destination.pvc, destination.gcs, destination.azure or destination.local must be set";

/// The reference CEL rules an extension guards: at `(crd, path)`, the reference's `rule` reads
/// `<guard> || (<rule>)` in ours, with the same message, where the guard is true only when an
/// extension's field is set. For every object without the extension's fields (every object
/// the reference accepts) the rule says what the reference's says.
const GUARDED_RULES: &[(&str, &str, &str, &str)] = &[
    (
        "etcdclusters",
        ".spec.tls.client",
        "has(self.operatorIssued)",
        "has(self.serverSecretRef) != has(self.certManager)",
    ),
    (
        "etcdclusters",
        ".spec.tls.peer",
        "has(self.operatorIssued)",
        "has(self.secretRef) != has(self.certManager)",
    ),
    (
        "etcdsnapshots",
        ".spec.destination",
        EXTENSION_STORES,
        ONE_OF_S3_OR_PVC,
    ),
    (
        "etcdclusters",
        ".spec.bootstrap.restore.source",
        EXTENSION_STORES,
        ONE_OF_S3_OR_PVC,
    ),
    (
        "etcdmembers",
        ".spec.restore.source",
        EXTENSION_STORES,
        ONE_OF_S3_OR_PVC,
    ),
];

/// The CEL rules ours adds beside the reference's, by `(crd, path, message)`: each one is about
/// an extension's field only (see docs/api.md).
const ADDED_RULES: &[(&str, &str, &str)] = &[
    (
        "etcdclusters",
        ".spec.tls",
        "spec.tls.client.operatorIssued and spec.tls.peer.operatorIssued must have the same caDuration, certificateDuration and renewBefore: one CA and one certificate per member serve both",
    ),
    (
        "etcdclusters",
        ".spec.tls.client",
        "spec.tls.client.operatorIssued cannot be combined with serverSecretRef, operatorClientSecretRef or certManager",
    ),
    (
        "etcdclusters",
        ".spec.tls.peer",
        "spec.tls.peer.operatorIssued cannot be combined with secretRef or certManager",
    ),
    ("etcdsnapshots", ".spec.destination", EXACTLY_ONE_STORE),
    (
        "etcdclusters",
        ".spec.bootstrap.restore.source",
        EXACTLY_ONE_STORE,
    ),
    ("etcdmembers", ".spec.restore.source", EXACTLY_ONE_STORE),
    (
        "etcdclusters",
        ".spec.bootstrap.restore",
        "bootstrap.restore.source.gcs.key must be the exact (non-empty) object key for a restore source",
    ),
    (
        "etcdclusters",
        ".spec.bootstrap.restore",
        "bootstrap.restore.source.azure.key must be the exact (non-empty) blob name for a restore source",
    ),
    (
        "etcdclusters",
        ".spec.bootstrap.restore",
        "bootstrap.restore.source.local is not a restore source: a local store is a directory of the operator's own Pod, which the restoring Pod cannot read; copy the snapshot onto a PersistentVolumeClaim in the cluster's namespace (source.pvc) or into an object store",
    ),
    (
        "etcdmembers",
        ".spec.restore",
        "bootstrap.restore.source.gcs.key must be the exact (non-empty) object key for a restore source",
    ),
    (
        "etcdmembers",
        ".spec.restore",
        "bootstrap.restore.source.azure.key must be the exact (non-empty) blob name for a restore source",
    ),
    (
        "etcdmembers",
        ".spec.restore",
        "bootstrap.restore.source.local is not a restore source: a local store is a directory of the operator's own Pod, which the restoring Pod cannot read; copy the snapshot onto a PersistentVolumeClaim in the cluster's namespace (source.pvc) or into an object store",
    ),
    (
        "etcdsnapshots",
        ".spec",
        "verify: Restore of an encrypted snapshot needs encryption.age.identitySecretRef (the identity that decrypts it)",
    ),
    (
        "etcdsnapshots",
        ".spec",
        "verify: Restore cannot read a local store (a directory of the operator's own Pod): use verify: Checksum, or a PVC or object-store destination",
    ),
];

/// The schema node at `path` (`.spec.tls.client`) under the root `schema`.
fn node_at<'a>(schema: &'a mut Value, path: &str) -> Option<&'a mut Value> {
    path.split('.')
        .filter(|name| !name.is_empty())
        .try_fold(schema, |node, name| {
            node.get_mut("properties")?.get_mut(name)
        })
}

/// Takes the listed rule extensions out of our `schema` (a version's `openAPIV3Schema`): a
/// guarded rule gets the reference's text back, an added rule goes. Whatever is left must then
/// equal the reference exactly; a listed extension that is not there is a difference too.
fn undo_rule_extensions(plural: &str, schema: &mut Value, diffs: &mut Vec<String>) {
    for (_, path, guard, reference) in GUARDED_RULES.iter().filter(|(crd, ..)| *crd == plural) {
        let guarded = format!("{guard} || ({reference})");
        let rule = node_at(schema, path)
            .and_then(|node| node.get_mut("x-kubernetes-validations"))
            .and_then(Value::as_array_mut)
            .and_then(|rules| {
                rules
                    .iter_mut()
                    .find(|rule| rule["rule"] == guarded.as_str())
            });
        match rule {
            Some(rule) => rule["rule"] = Value::from(*reference),
            None => diffs.push(format!(
                "{path}: the guarded rule `{guarded}` is not in ours"
            )),
        }
    }
    for (_, path, message) in ADDED_RULES.iter().filter(|(crd, ..)| *crd == plural) {
        let Some(node) = node_at(schema, path).and_then(Value::as_object_mut) else {
            diffs.push(format!(
                "{path}: no such node for the added rule {message:?}"
            ));
            continue;
        };
        let rules = node
            .get_mut("x-kubernetes-validations")
            .and_then(Value::as_array_mut);
        let Some(rules) = rules else {
            diffs.push(format!("{path}: the added rule {message:?} is not in ours"));
            continue;
        };
        let before = rules.len();
        rules.retain(|rule| rule["message"] != *message);
        if rules.len() + 1 != before {
            diffs.push(format!(
                "{path}: the added rule {message:?} is in ours {} times, not once",
                before - rules.len()
            ));
        }
        if rules.is_empty() {
            node.remove("x-kubernetes-validations");
        }
    }
}

fn reference_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/reference/cozystack-v1alpha2")
}

fn reference_crd(plural: &str) -> Value {
    let path = reference_dir().join(format!("{plural}.yaml"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|error| {
        panic!(
            "cannot read the reference CRD {}: {error}. The reference CRDs of the Go operator are \
             expected in ../shared/reference/cozystack-v1alpha2/ beside the repository.",
            path.display()
        )
    });
    serde_yaml::from_str(&text)
        .unwrap_or_else(|error| panic!("{} is not valid YAML: {error}", path.display()))
}

fn our_crd(plural: &str) -> Value {
    let crd = etcd_operator_api::crds()
        .into_iter()
        .find(|crd| crd.spec.names.plural == plural)
        .unwrap_or_else(|| panic!("crds() has no CRD with plural {plural}"));
    serde_json::to_value(crd).expect("CRD serializes")
}

/// Compares a reference schema node with ours, recording every difference in `diffs` and
/// every path present only in ours in `extra`.
fn compare_schema(
    reference: &Value,
    ours: &Value,
    path: &str,
    diffs: &mut Vec<String>,
    extra: &mut BTreeSet<String>,
) {
    let (Some(reference), Some(ours)) = (reference.as_object(), ours.as_object()) else {
        if without_descriptions(reference) != without_descriptions(ours) {
            diffs.push(format!("{path}: reference {reference}, ours {ours}"));
        }
        return;
    };
    let keys: BTreeSet<&String> = reference.keys().chain(ours.keys()).collect();
    for key in keys {
        if key == "description" {
            continue;
        }
        match (reference.get(key), ours.get(key)) {
            (Some(r), None) => diffs.push(format!("{path}: missing `{key}` (reference: {r})")),
            (None, Some(o)) => diffs.push(format!("{path}: extra `{key}` ({o})")),
            (Some(r), Some(o)) if key == "properties" => {
                compare_properties(r, o, path, diffs, extra)
            }
            (Some(r), Some(o)) if key == "items" || key == "additionalProperties" => {
                compare_schema(r, o, &format!("{path}[{key}]"), diffs, extra)
            }
            (Some(r), Some(o)) => {
                let (r, o) = (without_descriptions(r), without_descriptions(o));
                if r != o {
                    diffs.push(format!("{path}: `{key}` differs: reference {r}, ours {o}"));
                }
            }
            (None, None) => {}
        }
    }
}

fn compare_properties(
    reference: &Value,
    ours: &Value,
    path: &str,
    diffs: &mut Vec<String>,
    extra: &mut BTreeSet<String>,
) {
    let empty = Map::new();
    let reference = reference.as_object().unwrap_or(&empty);
    let ours = ours.as_object().unwrap_or(&empty);
    for (name, r) in reference {
        let child = format!("{path}.{name}");
        match ours.get(name) {
            Some(o) => compare_schema(r, o, &child, diffs, extra),
            None => diffs.push(format!("{child}: missing in ours")),
        }
    }
    for name in ours.keys().filter(|name| !reference.contains_key(*name)) {
        extra.insert(format!("{path}.{name}"));
    }
}

/// A value with every `description` removed and every number as a float (`JSONSchemaProps`
/// holds bounds as floats, so ours say `0.0` where the reference says `0`), for comparing.
fn without_descriptions(value: &Value) -> Value {
    match value {
        Value::Number(number) => number
            .as_f64()
            .and_then(serde_json::Number::from_f64)
            .map_or(Value::Number(number.clone()), Value::Number),
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(key, _)| *key != "description")
                .map(|(key, value)| (key.clone(), without_descriptions(value)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_descriptions).collect()),
        other => other.clone(),
    }
}

/// The names of the reference, and in ours only the additions `kubectl` reads for brevity:
/// `shortNames` and `categories` (a name the reference gives must be ours too).
fn names_superset(reference: &Value, ours: &Value, diffs: &mut Vec<String>) {
    let empty = Map::new();
    let (reference, ours) = (
        reference.as_object().unwrap_or(&empty),
        ours.as_object().unwrap_or(&empty),
    );
    for (key, r) in reference {
        match (key.as_str(), ours.get(key)) {
            ("shortNames" | "categories", Some(Value::Array(o))) => {
                for name in r.as_array().into_iter().flatten() {
                    if !o.contains(name) {
                        diffs.push(format!("/spec/names/{key}: {name} missing in ours"));
                    }
                }
            }
            (_, Some(o)) if o == r => {}
            (_, o) => diffs.push(format!(
                "/spec/names/{key}: reference {r}, ours {}",
                o.map_or("nothing".to_owned(), Value::to_string)
            )),
        }
    }
    for key in ours.keys().filter(|key| !reference.contains_key(*key)) {
        if key != "shortNames" && key != "categories" {
            diffs.push(format!("/spec/names/{key}: in ours only"));
        }
    }
}

/// The reference's printer columns, each unchanged and in the same order, among ours: ours
/// may add columns anywhere (a script that reads the reference's columns by name still finds
/// them), never drop, rename or change one.
fn columns_superset(reference: &Value, ours: &Value, diffs: &mut Vec<String>) {
    let empty = Vec::new();
    let ours = ours.as_array().unwrap_or(&empty);
    let mut rest = ours.iter();
    for column in reference.as_array().unwrap_or(&empty) {
        if !rest.any(|o| o == column) {
            diffs.push(format!(
                "additionalPrinterColumns: the reference's {column} is not in ours, unchanged and \
                 in the reference's order (ours: {ours:?})"
            ));
            return;
        }
    }
}

fn check(plural: &str) {
    let reference = reference_crd(plural);
    let mut ours = our_crd(plural);
    let mut diffs = Vec::new();
    if let Some(versions) = ours["spec"]["versions"].as_array_mut() {
        for version in versions {
            undo_rule_extensions(
                plural,
                &mut version["schema"]["openAPIV3Schema"],
                &mut diffs,
            );
        }
    }

    for pointer in ["/metadata/name", "/spec/group", "/spec/scope"] {
        if reference.pointer(pointer) != ours.pointer(pointer) {
            diffs.push(format!(
                "{pointer}: reference {:?}, ours {:?}",
                reference.pointer(pointer),
                ours.pointer(pointer)
            ));
        }
    }
    names_superset(
        &reference["spec"]["names"],
        &ours["spec"]["names"],
        &mut diffs,
    );
    let versions = |crd: &Value| {
        crd["spec"]["versions"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let (reference_versions, our_versions) = (versions(&reference), versions(&ours));
    assert_eq!(
        reference_versions.len(),
        our_versions.len(),
        "{plural}: number of versions"
    );

    let mut extra = BTreeSet::new();
    for (r, o) in reference_versions.iter().zip(&our_versions) {
        columns_superset(
            &r["additionalPrinterColumns"],
            &o["additionalPrinterColumns"],
            &mut diffs,
        );
        for key in ["name", "served", "storage", "subresources"] {
            if r.get(key) != o.get(key) {
                diffs.push(format!(
                    "version {}: `{key}` differs: reference {:?}, ours {:?}",
                    r["name"],
                    r.get(key),
                    o.get(key)
                ));
            }
        }
        compare_schema(
            &r["schema"]["openAPIV3Schema"],
            &o["schema"]["openAPIV3Schema"],
            "",
            &mut diffs,
            &mut extra,
        );
    }

    let allowed: BTreeSet<String> = EXTENSIONS
        .iter()
        .filter(|(crd, _)| *crd == plural)
        .map(|(_, path)| (*path).to_owned())
        .collect();
    for path in extra.difference(&allowed) {
        diffs.push(format!("{path}: in ours only, and not a listed extension"));
    }
    for path in allowed.difference(&extra) {
        diffs.push(format!(
            "{path}: listed as an extension but not in our schema"
        ));
    }

    assert!(
        diffs.is_empty(),
        "{plural}: our CRD differs from the reference in {} places:\n  {}",
        diffs.len(),
        diffs.join("\n  ")
    );
}

#[test]
fn etcdclusters_match_the_reference() {
    check("etcdclusters");
}

#[test]
fn etcdmembers_match_the_reference() {
    check("etcdmembers");
}

#[test]
fn etcdsnapshots_match_the_reference() {
    check("etcdsnapshots");
}

#[test]
fn etcddefrags_match_the_reference() {
    check("etcddefrags");
}

#[test]
fn etcddefragpolicies_match_the_reference() {
    check("etcddefragpolicies");
}

/// The comparison itself must notice a difference, or the tests above prove nothing.
#[test]
fn the_comparison_notices_differences() {
    let reference = serde_json::json!({
        "type": "object",
        "properties": {
            "a": { "type": "integer", "minimum": 0, "description": "x" },
            "b": { "type": "string" },
        },
        "required": ["a"],
    });
    let ours = serde_json::json!({
        "type": "object",
        "properties": {
            "a": { "type": "integer", "minimum": 1, "description": "y", "nullable": true },
            "c": { "type": "string" },
        },
    });
    let (mut diffs, mut extra) = (Vec::new(), BTreeSet::new());
    compare_schema(&reference, &ours, "", &mut diffs, &mut extra);
    let text = diffs.join("\n");
    assert!(text.contains(".a: `minimum` differs"), "{text}");
    assert!(text.contains(".a: extra `nullable`"), "{text}");
    assert!(text.contains(".b: missing in ours"), "{text}");
    assert!(text.contains(": missing `required`"), "{text}");
    assert!(!text.contains("description"), "{text}");
    assert_eq!(extra, BTreeSet::from([".c".to_owned()]));
}

/// Undoing the listed rule extensions gives back the reference's rules, and nothing else is
/// forgiven: a changed message, an unlisted rule or a missing extension are differences.
#[test]
fn only_the_listed_rule_extensions_are_undone() {
    let reference = reference_crd("etcdclusters");
    let reference_tls = &reference["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
        ["spec"]["properties"]["tls"];
    let mut ours = our_crd("etcdclusters");
    let schema = &mut ours["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    let mut diffs = Vec::new();
    undo_rule_extensions("etcdclusters", schema, &mut diffs);
    assert!(diffs.is_empty(), "{diffs:?}");
    let tls = &node_at(schema, ".spec.tls").unwrap().clone();
    assert_eq!(tls.get("x-kubernetes-validations"), None);
    for side in ["client", "peer"] {
        assert_eq!(
            without_descriptions(&tls["properties"][side]["x-kubernetes-validations"]),
            without_descriptions(&reference_tls["properties"][side]["x-kubernetes-validations"]),
            "{side}"
        );
    }

    // A guarded rule whose message changed is not undone, and the comparison sees it.
    let mut changed = our_crd("etcdclusters");
    let schema = &mut changed["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    let rules = node_at(schema, ".spec.tls.peer").unwrap()["x-kubernetes-validations"]
        .as_array_mut()
        .unwrap();
    rules[0]["message"] = Value::from("another message");
    rules.push(serde_json::json!({"rule": "true", "message": "unlisted"}));
    let mut diffs = Vec::new();
    undo_rule_extensions("etcdclusters", schema, &mut diffs);
    let (mut compared, mut extra) = (Vec::new(), BTreeSet::new());
    compare_schema(
        &reference["spec"]["versions"][0]["schema"]["openAPIV3Schema"],
        schema,
        "",
        &mut compared,
        &mut extra,
    );
    let text = compared.join("\n");
    assert!(
        text.contains(".spec.tls.peer: `x-kubernetes-validations` differs"),
        "{text}"
    );
    assert!(text.contains("unlisted"), "{text}");

    // A listed extension that is missing is a difference.
    let mut missing = our_crd("etcdclusters");
    let schema = &mut missing["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    node_at(schema, ".spec.tls")
        .unwrap()
        .as_object_mut()
        .unwrap()
        .remove("x-kubernetes-validations");
    let mut diffs = Vec::new();
    undo_rule_extensions("etcdclusters", schema, &mut diffs);
    assert_eq!(diffs.len(), 1, "{diffs:?}");
    assert!(diffs[0].contains("is not in ours"), "{diffs:?}");
}

/// The superset checks notice a dropped, changed or reordered column and a changed name.
#[test]
fn the_superset_checks_notice_differences() {
    let column = |name: &str| serde_json::json!({"name": name, "type": "string", "jsonPath": ".x"});
    let reference = serde_json::json!([column("A"), column("B")]);
    let mut diffs = Vec::new();
    columns_superset(
        &reference,
        &serde_json::json!([column("A"), column("New"), column("B")]),
        &mut diffs,
    );
    assert!(diffs.is_empty(), "{diffs:?}");
    for ours in [
        serde_json::json!([column("A")]),
        serde_json::json!([column("B"), column("A")]),
        serde_json::json!([column("A"), {"name": "B", "type": "integer", "jsonPath": ".x"}]),
    ] {
        let mut diffs = Vec::new();
        columns_superset(&reference, &ours, &mut diffs);
        assert_eq!(diffs.len(), 1, "{ours}");
    }

    let names = serde_json::json!({"kind": "K", "plural": "ks"});
    let mut diffs = Vec::new();
    names_superset(
        &names,
        &serde_json::json!({"kind": "K", "plural": "ks", "shortNames": ["k"], "categories": ["c"]}),
        &mut diffs,
    );
    assert!(diffs.is_empty(), "{diffs:?}");
    let mut diffs = Vec::new();
    names_superset(
        &names,
        &serde_json::json!({"kind": "K", "plural": "kz", "singular": "k"}),
        &mut diffs,
    );
    assert_eq!(diffs.len(), 2, "{diffs:?}");
}

/// Every printer column of ours reads a field our schema has (the filter of a condition column
/// aside), so a renamed field cannot leave a column silently empty.
#[test]
fn every_printer_column_reads_a_field_of_the_schema() {
    for crd in etcd_operator_api::crds() {
        let crd = serde_json::to_value(&crd).unwrap();
        for version in crd["spec"]["versions"].as_array().unwrap() {
            let schema = &version["schema"]["openAPIV3Schema"];
            for column in version["additionalPrinterColumns"].as_array().unwrap() {
                let path = column["jsonPath"].as_str().unwrap();
                if path.starts_with(".metadata.") {
                    continue;
                }
                let mut node = schema;
                for part in path.trim_start_matches('.').split('.') {
                    let (name, filtered) = match part.split_once('[') {
                        Some((name, _)) => (name, true),
                        None => (part, false),
                    };
                    node = &node["properties"][name];
                    if filtered {
                        node = &node["items"];
                        break;
                    }
                }
                assert!(
                    node.is_object(),
                    "{}: the column {} reads {path}, which the schema does not have",
                    crd["metadata"]["name"],
                    column["name"]
                );
            }
        }
    }
}
