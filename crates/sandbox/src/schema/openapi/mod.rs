//! The OpenAPI documents kubectl reads: v3 per group-version, the v3 index, and v2.

mod builtin;
mod markers;

pub use builtin::{BUILTIN_KINDS, BuiltinSchema, builtin_schema};

use serde_json::{Map, Value, json};

/// One resource of a group-version as it appears in the OpenAPI documents.
#[derive(Debug, Clone)]
pub struct ResourceSchema {
    /// The API group, `""` for the core group.
    pub group: String,
    /// The version, e.g. `v1alpha2`.
    pub version: String,
    /// The kind, e.g. `EtcdCluster`.
    pub kind: String,
    /// The object's schema (a CRD's `openAPIV3Schema`, or a built-in kind's generated schema).
    pub schema: Value,
    /// Whether objects of this kind live in a namespace.
    pub namespaced: bool,
}

/// The definition name kube-apiserver uses for a kind, e.g.
/// `io.cozystack.etcd-operator.v1alpha2.EtcdCluster` (the group reversed).
pub fn definition_name(group: &str, version: &str, kind: &str) -> String {
    if group.is_empty() {
        return format!("io.k8s.api.core.{version}.{kind}");
    }
    let reversed: Vec<&str> = group.split('.').rev().collect();
    format!("{}.{version}.{kind}", reversed.join("."))
}

/// The OpenAPI v3 document served at `/openapi/v3/apis/<group>/<version>`.
pub fn v3_group_version(group: &str, version: &str, resources: &[ResourceSchema]) -> Value {
    let mut schemas = Map::new();
    for resource in resources {
        let mut schema = resource.schema.clone();
        if let Some(object) = schema.as_object_mut() {
            object.insert(
                "x-kubernetes-group-version-kind".into(),
                json!([{"group": group, "version": version, "kind": resource.kind}]),
            );
        }
        schemas.insert(definition_name(group, version, &resource.kind), schema);
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "unversioned"},
        "paths": {},
        "components": {"schemas": schemas},
    })
}

/// The path of a group-version in the v3 index: `api/v1` for the core group, else
/// `apis/<group>/<version>`.
pub fn v3_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// The `/openapi/v3` index: each `(path, document)` (path from [`v3_path`]) listed with a
/// `serverRelativeURL` carrying a hash of the document, which kubectl uses to cache it.
pub fn v3_index<'a>(documents: impl IntoIterator<Item = (&'a str, &'a Value)>) -> Value {
    let mut paths = Map::new();
    for (path, document) in documents {
        let url = format!("/openapi/v3/{path}?hash={}", document_hash(document));
        paths.insert(path.to_string(), json!({"serverRelativeURL": url}));
    }
    json!({"paths": paths})
}

/// The OpenAPI v2 document served at `/openapi/v2` (Swagger 2.0) for all resources.
pub fn v2_document(resources: &[ResourceSchema]) -> Value {
    let mut definitions = Map::new();
    for resource in resources {
        let mut schema = resource.schema.clone();
        if let Some(object) = schema.as_object_mut() {
            object.insert(
                "x-kubernetes-group-version-kind".into(),
                json!([{"group": resource.group, "version": resource.version, "kind": resource.kind}]),
            );
        }
        definitions.insert(
            definition_name(&resource.group, &resource.version, &resource.kind),
            schema,
        );
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": "unversioned"},
        "paths": {},
        "definitions": definitions,
    })
}

/// A stable hex hash of a document (FNV-1a over its JSON text), enough for kubectl's cache key.
pub fn document_hash(document: &Value) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in document.to_string().bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016X}")
}
