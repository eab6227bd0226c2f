//! The small JSON edits every schema function makes: a property looked up, a key set, the
//! list and map markers of the Kubernetes Go types, and the `Quantity` pattern.

use serde_json::{Value, json};

/// The pattern the API server's `resource.Quantity` accepts, as controller-gen writes it.
pub const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// The property `name` of an object schema, when present.
pub(super) fn property<'a>(schema: &'a mut Value, name: &str) -> Option<&'a mut Value> {
    schema.get_mut("properties")?.get_mut(name)
}

/// Sets `key: value` on a schema object.
pub(super) fn set(schema: &mut Value, key: &str, value: Value) {
    if let Some(object) = schema.as_object_mut() {
        object.insert(key.to_owned(), value);
    }
}

/// Marks a list schema `x-kubernetes-list-type: atomic`.
pub(super) fn atomic_list(schema: &mut Value) {
    set(schema, "x-kubernetes-list-type", json!("atomic"));
}

/// Marks an object schema `x-kubernetes-map-type: atomic`.
pub(super) fn atomic_map(schema: &mut Value) {
    set(schema, "x-kubernetes-map-type", json!("atomic"));
}
