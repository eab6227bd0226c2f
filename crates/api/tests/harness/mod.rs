//! Validation cases as data, evaluated the way an API server admits a custom resource: drop
//! nulls, apply the schema's defaults (to the old object too), check the structural schema,
//! then run the `x-kubernetes-validations` CEL rules (with kube-cel, transition rules against
//! the old object).

// Each test binary uses a part of the harness.
#![allow(dead_code)]

pub mod coverage;
pub mod structural;

use std::path::{Path, PathBuf};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde::Deserialize;
use serde_json::Value;

pub use structural::Violation;

/// One case: an object (and, for an update, the object it replaces) and what the API server
/// must do with it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Case {
    pub name: String,
    pub object: Value,
    #[serde(default)]
    pub old_object: Option<Value>,
    pub expect: Expect,
    /// The file the case came from, filled in when loading.
    #[serde(skip)]
    pub file: String,
}

/// `expect: accepted` or `expect: {rejected: "<substring of the error>"}`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Expect {
    Accepted,
    Rejected(String),
}

pub fn cases_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/validation")
}

/// Every case of every `*.yaml` file in `dir`. A file is a list of cases; YAML anchors and
/// merge keys (`<<: *base`) may share objects between cases.
pub fn load_cases(dir: &Path) -> Vec<Case> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|error| panic!("cannot list {}: {error}", dir.display()))
        .filter_map(|entry| Some(entry.ok()?.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    files.sort();
    let mut cases = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).expect("case file is readable");
        let mut yaml: serde_yaml::Value = serde_yaml::from_str(&text)
            .unwrap_or_else(|error| panic!("{}: invalid YAML: {error}", path.display()));
        // One pass leaves the merge keys of merged-in mappings (`<<: *a` where `a` itself
        // says `<<: *b`); repeat until none is left.
        while has_merge_key(&yaml) {
            yaml.apply_merge()
                .unwrap_or_else(|error| panic!("{}: bad merge key: {error}", path.display()));
        }
        // Through JSON: serde_yaml reads enums only from YAML tags, serde_json from maps.
        let json = serde_json::to_value(yaml)
            .unwrap_or_else(|error| panic!("{}: not JSON-compatible: {error}", path.display()));
        let file_cases: Vec<Case> = serde_json::from_value(json)
            .unwrap_or_else(|error| panic!("{}: not a list of cases: {error}", path.display()));
        let file = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        cases.extend(file_cases.into_iter().map(|case| Case {
            file: file.clone(),
            ..case
        }));
    }
    cases
}

fn has_merge_key(yaml: &serde_yaml::Value) -> bool {
    match yaml {
        serde_yaml::Value::Mapping(map) => map
            .iter()
            .any(|(key, value)| key.as_str() == Some("<<") || has_merge_key(value)),
        serde_yaml::Value::Sequence(items) => items.iter().any(has_merge_key),
        _ => false,
    }
}

/// The CRD serving `object` (by apiVersion and kind).
pub fn crd_for<'a>(
    crds: &'a [CustomResourceDefinition],
    object: &Value,
) -> &'a CustomResourceDefinition {
    let kind = object["kind"].as_str().unwrap_or_default();
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    crds.iter()
        .find(|crd| {
            crd.spec.names.kind == kind
                && crd
                    .spec
                    .versions
                    .iter()
                    .any(|version| format!("{}/{}", crd.spec.group, version.name) == api_version)
        })
        .unwrap_or_else(|| panic!("no CRD serves {api_version} {kind}"))
}

pub fn schema_of(crd: &CustomResourceDefinition) -> Value {
    let schema = crd.spec.versions[0]
        .schema
        .as_ref()
        .and_then(|validation| validation.open_api_v3_schema.as_ref())
        .expect("CRD has an openAPIV3Schema");
    serde_json::to_value(schema).expect("schema serializes")
}

/// What the API server would see: nulls dropped (they are pruned for non-nullable fields),
/// then defaults applied.
pub fn admitted_form(schema: &Value, object: &Value) -> Value {
    kube_cel::apply_defaults(schema, &without_nulls(object))
}

fn without_nulls(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, value)| !value.is_null())
                .map(|(key, value)| (key.clone(), without_nulls(value)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

/// The API server's note when schema errors keep it from running the CEL rules.
pub const RULES_NOT_CHECKED: &str = "<nil>: Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation";

/// Keyword of a CEL rule that could not be evaluated on an invalid value (for example
/// `quantity()` of a string that is no quantity): a consequence of another error.
pub const RULE_EVALUATION_ERROR: &str = "rule-evaluation-error";

/// Schema errors after which kube-apiserver does not run the CEL rules (its `hasBlockingErr`):
/// a missing required field, a value outside an enum, a wrong type, too long or too many.
const BLOCKING: &[&str] = &["required", "enum", "type", "maxLength", "maxItems"];

/// Every violation of `object` (replacing `old`, for an update) against `schema`.
pub fn evaluate(schema: &Value, object: &Value, old: Option<&Value>) -> Vec<Violation> {
    let object = admitted_form(schema, object);
    let old = old.map(|old| admitted_form(schema, old));
    let mut violations = structural::check(schema, &object);
    if violations
        .iter()
        .any(|v| BLOCKING.contains(&v.keyword.as_str()))
    {
        violations.push(Violation {
            schema_path: String::new(),
            keyword: "rules-not-checked".to_owned(),
            message: RULES_NOT_CHECKED.to_owned(),
        });
        return violations;
    }
    if let Err(errors) = kube_cel::Validator::new().validate(schema, &object, old.as_ref()) {
        violations.extend(errors.iter().map(|error| Violation {
            schema_path: schema_form(&error.field_path),
            keyword: match error.kind {
                kube_cel::ErrorKind::EvaluationError => RULE_EVALUATION_ERROR.to_owned(),
                _ => format!("rule:{}", error.message),
            },
            message: format!(
                "{}: Invalid value: \"object\": {}",
                error.field_path, error.message
            ),
        }));
    }
    violations
}

/// `spec.members[2].name` as the schema path `.spec.members[].name`.
fn schema_form(data_path: &str) -> String {
    let mut out = String::from(".");
    let mut in_index = false;
    for character in data_path.chars() {
        match character {
            '[' => {
                in_index = true;
                out.push_str("[]");
            }
            ']' => in_index = false,
            _ if in_index => {}
            _ => out.push(character),
        }
    }
    if out == "." { String::new() } else { out }
}

/// Whether an object read into the Rust types and written back is the object again: the
/// serde contract of the API types (absent stays absent). Integers given for quantities come
/// back as strings of the same digits.
pub fn round_trips(original: &Value, written: &Value) -> Result<(), String> {
    match (original, written) {
        (Value::Object(a), Value::Object(b)) => {
            for key in a.keys().chain(b.keys()) {
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => round_trips(x, y).map_err(|e| format!(".{key}{e}"))?,
                    (Some(x), None) if !x.is_null() => return Err(format!(".{key}: dropped")),
                    (None, Some(y)) => return Err(format!(".{key}: added as {y}")),
                    _ => {}
                }
            }
            Ok(())
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => a
            .iter()
            .zip(b)
            .enumerate()
            .try_for_each(|(i, (x, y))| round_trips(x, y).map_err(|e| format!("[{i}]{e}"))),
        (Value::Number(n), Value::String(s)) if n.to_string() == *s => Ok(()),
        (a, b) if a == b => Ok(()),
        (a, b) => Err(format!(": {a} became {b}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_form_drops_indices() {
        assert_eq!(schema_form("spec.members[2].name"), ".spec.members[].name");
        assert_eq!(schema_form("spec"), ".spec");
        assert_eq!(schema_form(""), "");
    }
}
