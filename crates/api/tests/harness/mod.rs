//! Validation cases as data (`tests/validation/*.yaml`) and what every way of running them
//! shares: loading the files, finding the CRD of an object, and the serde round-trip contract.
//!
//! The cases are judged by the sandbox only: as a library by its schema engine
//! (`sandbox_engine/`, in `sandbox_validation.rs`) and, as the authority, by its API server
//! driven by kubectl (`kubectl_replay/`, in `kubectl_validation.rs`).

// Each test binary uses a part of the harness.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde::Deserialize;
use serde_json::Value;

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

/// Every case of `tests/validation/`, failing the test when there is none.
pub fn cases() -> Vec<Case> {
    let cases = load_cases(&cases_dir());
    assert!(!cases.is_empty(), "no cases in {}", cases_dir().display());
    cases
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

/// The reference operator's own sample, read from the reference directory beside the
/// repository, as a case that must be accepted as it stands.
/// The reference operator's sample EtcdCluster, beside the repository.
pub fn reference_sample_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/reference/cozystack-v1alpha2/sample-etcdcluster.yaml")
}

pub fn reference_sample() -> Case {
    let path = reference_sample_path();
    let text = std::fs::read_to_string(&path).unwrap_or_else(|error| {
        panic!(
            "cannot read the reference sample {}: {error}",
            path.display()
        )
    });
    Case {
        name: "the reference operator's sample is accepted as it stands".to_owned(),
        object: serde_yaml::from_str(&text).expect("the sample is YAML"),
        old_object: None,
        expect: Expect::Accepted,
        file: "sample-etcdcluster.yaml".to_owned(),
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
