//! The last pass over a generated CRD's schema.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps,
};
use serde_json::{Value, json};

/// Brings the derive's output to the shape the API server should see:
///
/// - drops `nullable` and the `null` the derive adds to the `enum` of an `Option` (the
///   reference schemas never accept `null`; a non-nullable field set to `null` is pruned like
///   an absent one);
/// - gives every `x-kubernetes-int-or-string` schema its `anyOf: [integer, string]`;
/// - declares `apiVersion`, `kind` and `metadata` at the root, and does not require `spec`
///   (the reference declares neither `spec` nor `status` required), without a `title`;
/// - joins the hard-wrapped lines of our doc comments, so `kubectl explain` can wrap them;
/// - names the list kind, `<Kind>List`.
///
/// # Panics
/// If the generated schema does not round-trip through `JSONSchemaProps`, which would be a bug
/// in this crate's types, caught by every test that generates the CRDs.
pub(crate) fn finalize(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    let names = &mut crd.spec.names;
    names.list_kind = Some(format!("{}List", names.kind));
    for version in &mut crd.spec.versions {
        let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|validation| validation.open_api_v3_schema.as_mut())
        else {
            continue;
        };
        let mut value = serde_json::to_value(&*schema).expect("JSONSchemaProps serializes");
        rewrite(&mut value);
        declare_root(&mut value);
        *schema = serde_json::from_value::<JSONSchemaProps>(value)
            .expect("finalized schema is valid JSONSchemaProps");
    }
    crd
}

/// Recursively rewrites one schema and every schema nested in it.
fn rewrite(schema: &mut Value) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    object.remove("nullable");
    if let Some(Value::Array(values)) = object.get_mut("enum") {
        values.retain(|value| !value.is_null());
    }
    if let Some(Value::String(description)) = object.get_mut("description") {
        *description = unwrap_lines(description);
    }
    if object.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
        object.remove("type");
        object.insert(
            "anyOf".into(),
            json!([{ "type": "integer" }, { "type": "string" }]),
        );
    }
    if let Some(Value::Object(properties)) = object.get_mut("properties") {
        properties.values_mut().for_each(rewrite);
    }
    for key in ["items", "additionalProperties"] {
        if let Some(nested) = object.get_mut(key) {
            rewrite(nested);
        }
    }
}

/// The root properties every Kubernetes object has, which the derive leaves out.
fn declare_root(schema: &mut Value) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    object.remove("required");
    object.remove("title");
    let properties = object
        .entry("properties")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .expect("root properties is an object");
    properties.insert(
        "apiVersion".into(),
        json!({
            "type": "string",
            "description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources",
        }),
    );
    properties.insert(
        "kind".into(),
        json!({
            "type": "string",
            "description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
        }),
    );
    properties.insert("metadata".into(), json!({ "type": "object" }));
}

/// Joins lines broken only for the width of the source; blank lines (paragraphs) stay.
fn unwrap_lines(text: &str) -> String {
    text.split("\n\n")
        .map(|paragraph| {
            paragraph
                .split('\n')
                .map(str::trim)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unwrap_lines_keeps_paragraphs() {
        assert_eq!(unwrap_lines("a\nb\n\nc\nd"), "a b\n\nc d");
        assert_eq!(unwrap_lines("one line"), "one line");
    }

    #[test]
    fn rewrite_reaches_nested_schemas() {
        let mut schema = json!({
            "type": "object",
            "nullable": true,
            "properties": {
                "size": { "x-kubernetes-int-or-string": true, "nullable": true },
                "list": { "type": "array", "items": { "type": "string", "enum": ["a", null] } },
            },
            "default": { "nullable": true },
        });
        rewrite(&mut schema);
        assert_eq!(
            schema,
            json!({
                "type": "object",
                "properties": {
                    "size": {
                        "x-kubernetes-int-or-string": true,
                        "anyOf": [{ "type": "integer" }, { "type": "string" }],
                    },
                    "list": { "type": "array", "items": { "type": "string", "enum": ["a"] } },
                },
                "default": { "nullable": true },
            })
        );
    }
}
