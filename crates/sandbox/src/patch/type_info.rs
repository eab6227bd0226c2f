//! List and map semantics per field path: what strategic merge and managed fields need to know.

use crate::schema::StructuralSchema;

/// List semantics per path (atomic / set / map with keys), map semantics, and, for built-in
/// kinds, strategic merge keys and strategies.
#[derive(Debug, Clone, Default)]
pub struct TypeInfo {
    strategic_merge: bool,
}

impl TypeInfo {
    /// From a custom resource's schema (`x-kubernetes-list-type`, `-list-map-keys`, `-map-type`).
    /// Strategic merge is not supported for these, as in kube-apiserver.
    pub fn from_schema(schema: &StructuralSchema) -> TypeInfo {
        let _ = schema;
        TypeInfo { strategic_merge: false }
    }

    /// The merge keys and strategies of a built-in kind, e.g. `("", "v1", "Pod")`.
    pub fn builtin(group: &str, version: &str, kind: &str) -> TypeInfo {
        let _ = (group, version, kind);
        TypeInfo { strategic_merge: true }
    }

    /// Whether the kind accepts `application/strategic-merge-patch+json`.
    pub fn supports_strategic_merge(&self) -> bool {
        self.strategic_merge
    }
}
