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

/// The definition name kube-apiserver uses for a kind: a built-in kind's Go package name
/// (`io.k8s.api.apps.v1.Deployment`), else the group reversed
/// (`io.cozystack.etcd-operator.v1alpha2.EtcdCluster`).
pub fn definition_name(group: &str, version: &str, kind: &str) -> String {
    if let Some(schema) = builtin_schema(group, version, kind) {
        return schema.root.clone();
    }
    if group.is_empty() {
        return format!("io.k8s.api.core.{version}.{kind}");
    }
    let reversed: Vec<&str> = group.split('.').rev().collect();
    format!("{}.{version}.{kind}", reversed.join("."))
}

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const V3_REFERENCE: &str = "#/components/schemas/";
const V2_REFERENCE: &str = "#/definitions/";

/// The definitions describing one resource, keyed by name, with `$ref`s in v3 form.
///
/// Built-in kinds get their generated, decorated schema (whatever `resource.schema` says);
/// custom resources get their CRD schema with `metadata` pointing at `ObjectMeta`, as
/// kube-apiserver publishes them, so `kubectl explain <kind>.metadata` works too.
fn resource_definitions(resource: &ResourceSchema) -> Map<String, Value> {
    let gvk =
        json!([{"group": resource.group, "version": resource.version, "kind": resource.kind}]);
    if let Some(builtin) = builtin_schema(&resource.group, &resource.version, &resource.kind) {
        let mut definitions = builtin.definitions.clone();
        if let Some(Value::Object(root)) = definitions.get_mut(&builtin.root) {
            root.insert("x-kubernetes-group-version-kind".into(), gvk);
        }
        return definitions;
    }
    let mut definitions = object_meta_definitions();
    let mut schema = resource.schema.clone();
    if let Some(object) = schema.as_object_mut() {
        let properties = object.entry("properties").or_insert_with(|| json!({}));
        if let Some(properties) = properties.as_object_mut() {
            properties.insert(
                "metadata".into(),
                json!({
                    "description": "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
                    "allOf": [{"$ref": format!("{V3_REFERENCE}{OBJECT_META}")}],
                }),
            );
            properties
                .entry("apiVersion")
                .or_insert_with(|| json!({"type": "string"}));
            properties
                .entry("kind")
                .or_insert_with(|| json!({"type": "string"}));
        }
        object.insert("x-kubernetes-group-version-kind".into(), gvk);
    }
    definitions.insert(
        definition_name(&resource.group, &resource.version, &resource.kind),
        schema,
    );
    definitions
}

/// `ObjectMeta` and the definitions it refers to.
fn object_meta_definitions() -> Map<String, Value> {
    builtin_schema("", "v1", "ConfigMap")
        .map(|schema| {
            schema
                .definitions
                .iter()
                .filter(|(name, _)| name.starts_with("io.k8s.apimachinery.pkg.apis.meta.v1."))
                .map(|(name, definition)| (name.clone(), definition.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// The OpenAPI v3 document served at `/openapi/v3/apis/<group>/<version>` (`/openapi/v3/api/v1`
/// for the core group): every resource's definitions under `components.schemas`, each
/// resource's root marked with `x-kubernetes-group-version-kind`.
pub fn v3_group_version(_group: &str, _version: &str, resources: &[ResourceSchema]) -> Value {
    let mut schemas = Map::new();
    for resource in resources {
        schemas.extend(resource_definitions(resource));
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

/// The OpenAPI v2 document served at `/openapi/v2` (Swagger 2.0) for all resources, with the
/// v3-only keywords of CRD schemas removed as kube-apiserver does (`nullable`, `anyOf`,
/// `oneOf`, `not`, CEL rules) and `$ref`s pointing at `#/definitions/`.
pub fn v2_document(resources: &[ResourceSchema]) -> Value {
    let mut definitions = Map::new();
    for resource in resources {
        for (name, mut definition) in resource_definitions(resource) {
            to_v2(&mut definition);
            definitions.insert(name, definition);
        }
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": "unversioned"},
        "paths": {},
        "definitions": definitions,
    })
}

fn to_v2(schema: &mut Value) {
    match schema {
        Value::Object(fields) => {
            for keyword in [
                "nullable",
                "anyOf",
                "oneOf",
                "not",
                "x-kubernetes-validations",
            ] {
                fields.remove(keyword);
            }
            // `allOf: [{$ref}]` wrappers become plain references in v2.
            let single_reference = match fields.get("allOf") {
                Some(Value::Array(all_of)) if all_of.len() == 1 => all_of[0].get("$ref").cloned(),
                _ => None,
            };
            if let Some(reference) = single_reference {
                fields.remove("allOf");
                fields.insert("$ref".into(), reference);
            }
            if let Some(Value::String(reference)) = fields.get_mut("$ref") {
                *reference = reference.replace(V3_REFERENCE, V2_REFERENCE);
            }
            for value in fields.values_mut() {
                to_v2(value);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(to_v2),
        _ => {}
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn etcd_cluster() -> ResourceSchema {
        ResourceSchema {
            group: "etcd-operator.cozystack.io".into(),
            version: "v1alpha2".into(),
            kind: "EtcdCluster".into(),
            schema: json!({
                "type": "object",
                "properties": {
                    "spec": {"type": "object", "properties": {
                        "size": {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": true},
                        "note": {"type": "string", "nullable": true},
                    }},
                },
                "x-kubernetes-validations": [{"rule": "true"}],
            }),
            namespaced: true,
        }
    }

    fn pod() -> ResourceSchema {
        ResourceSchema {
            group: String::new(),
            version: "v1".into(),
            kind: "Pod".into(),
            schema: json!({"type": "object"}),
            namespaced: true,
        }
    }

    #[test]
    fn v3_documents_name_kinds_and_link_object_meta() {
        let document =
            v3_group_version("etcd-operator.cozystack.io", "v1alpha2", &[etcd_cluster()]);
        let schemas = &document["components"]["schemas"];
        let cluster = &schemas["io.cozystack.etcd-operator.v1alpha2.EtcdCluster"];
        assert_eq!(
            cluster["x-kubernetes-group-version-kind"],
            json!([{"group": "etcd-operator.cozystack.io", "version": "v1alpha2", "kind": "EtcdCluster"}])
        );
        assert_eq!(
            cluster["properties"]["metadata"]["allOf"][0]["$ref"],
            "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
        );
        assert!(schemas[OBJECT_META]["properties"]["ownerReferences"].is_object());
        assert_eq!(
            cluster["properties"]["spec"]["properties"]["note"]["nullable"],
            true
        );
    }

    #[test]
    fn builtin_kinds_use_their_generated_schemas() {
        let document = v3_group_version("", "v1", &[pod()]);
        let schemas = &document["components"]["schemas"];
        assert_eq!(
            schemas["io.k8s.api.core.v1.Pod"]["x-kubernetes-group-version-kind"][0]["kind"],
            "Pod"
        );
        assert_eq!(
            schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]["x-kubernetes-patch-merge-key"],
            "name"
        );
        assert_eq!(
            definition_name("apps", "v1", "Deployment"),
            "io.k8s.api.apps.v1.Deployment"
        );
    }

    #[test]
    fn v2_drops_v3_only_keywords() {
        let document = v2_document(&[etcd_cluster(), pod()]);
        let cluster = &document["definitions"]["io.cozystack.etcd-operator.v1alpha2.EtcdCluster"];
        assert_eq!(
            cluster["properties"]["metadata"]["$ref"],
            "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
        );
        assert!(
            cluster["properties"]["spec"]["properties"]["size"]
                .get("anyOf")
                .is_none()
        );
        assert!(
            cluster["properties"]["spec"]["properties"]["note"]
                .get("nullable")
                .is_none()
        );
        assert!(cluster.get("x-kubernetes-validations").is_none());
        let pod_spec =
            document["definitions"]["io.k8s.api.core.v1.Pod"]["properties"]["spec"].to_string();
        assert!(
            pod_spec.contains("#/definitions/io.k8s.api.core.v1.PodSpec"),
            "{pod_spec}"
        );
    }

    #[test]
    fn the_index_points_at_each_document_with_a_hash() {
        let document = v3_group_version("", "v1", &[pod()]);
        let index = v3_index([(v3_path("", "v1").as_str(), &document)]);
        let url = index["paths"]["api/v1"]["serverRelativeURL"]
            .as_str()
            .expect("url");
        assert_eq!(
            url,
            format!("/openapi/v3/api/v1?hash={}", document_hash(&document))
        );
        assert_eq!(v3_path("apps", "v1"), "apis/apps/v1");
    }
}
