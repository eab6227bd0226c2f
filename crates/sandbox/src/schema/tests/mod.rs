//! Table tests with kube-apiserver's expected outputs (Kubernetes 1.33).

mod cel_rules;
mod compile;
mod defaulting;
mod pruning;
mod validation;

use serde_json::{Value, json};

use super::StructuralSchema;

/// A CRD-like schema with `spec` built from `spec_schema`.
pub(super) fn schema_with_spec(spec_schema: Value) -> StructuralSchema {
    let raw = json!({
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec_schema,
        },
    });
    StructuralSchema::compile(&raw).unwrap_or_else(|error| panic!("schema must compile: {error}"))
}

/// The error messages for `spec` validated as a new object.
pub(super) fn messages(schema: &StructuralSchema, spec: Value) -> Vec<String> {
    let object = json!({"apiVersion": "example.com/v1", "kind": "Example", "metadata": {"name": "x"}, "spec": spec});
    schema
        .validate(&object, None)
        .iter()
        .map(|error| error.message())
        .collect()
}
