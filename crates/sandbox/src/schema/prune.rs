//! Pruning of unknown fields (apiextensions' `pruning.PruneWithOptions`), and of unknown
//! `metadata` fields at the root and in embedded resources, where the API server round-trips
//! metadata through `ObjectMeta`.
//!
//! Removed paths are named as in the API server's `unknown field "spec.foo"` warnings:
//! dotted, `[i]` for list items, metadata paths first, then the others sorted.

use serde_json::{Map, Value};

use super::node::{AdditionalProperties, Node};

/// `ObjectMeta`'s JSON fields.
const OBJECT_META_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];
const OWNER_REFERENCE_FIELDS: &[&str] = &[
    "apiVersion",
    "kind",
    "name",
    "uid",
    "controller",
    "blockOwnerDeletion",
];
const MANAGED_FIELDS_ENTRY_FIELDS: &[&str] = &[
    "manager",
    "operation",
    "apiVersion",
    "time",
    "fieldsType",
    "fieldsV1",
    "subresource",
];

const META_FIELDS: &[&str] = &["apiVersion", "kind", "metadata"];

/// Prunes `object` (a whole resource) against `root` and returns the removed paths.
pub(crate) fn prune_resource(object: &mut Value, root: &Node) -> Vec<String> {
    let mut removed = Vec::new();
    if let Some(metadata) = object.get_mut("metadata") {
        prune_object_meta(metadata, "metadata", &mut removed);
    }
    let mut pruned = Vec::new();
    prune(object, Some(root), "", true, &mut pruned);
    pruned.sort();
    removed.extend(pruned);
    let mut embedded = Vec::new();
    coerce_embedded(object, root, "", true, &mut embedded);
    embedded.sort();
    removed.extend(embedded);
    removed
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn prune(
    value: &mut Value,
    node: Option<&Node>,
    path: &str,
    resource_root: bool,
    removed: &mut Vec<String>,
) {
    let Some(node) = node else {
        prune_everything(value, path, removed);
        return;
    };
    if node.preserves_unknown_fields() {
        skip_prune(value, node, path, resource_root, removed);
        return;
    }
    let embedded = resource_root || node.embedded_resource;
    match value {
        Value::Object(fields) => {
            let keys: Vec<String> = fields.keys().cloned().collect();
            for key in keys {
                if embedded && META_FIELDS.contains(&key.as_str()) {
                    continue;
                }
                let child_path = join(path, &key);
                if let Some(property) = node.properties.get(&key) {
                    if let Some(child) = fields.get_mut(&key) {
                        prune(child, Some(property), &child_path, false, removed);
                    }
                } else if let Some(additional) = &node.additional_properties {
                    let schema = match additional {
                        AdditionalProperties::Schema(schema) => Some(schema.as_ref()),
                        AdditionalProperties::Allowed(_) => None,
                    };
                    if let Some(child) = fields.get_mut(&key) {
                        prune(child, schema, &child_path, false, removed);
                    }
                } else {
                    removed.push(child_path);
                    fields.remove(&key);
                }
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter_mut().enumerate() {
                prune(
                    item,
                    node.items.as_deref(),
                    &format!("{path}[{index}]"),
                    false,
                    removed,
                );
            }
        }
        _ => {}
    }
}

/// Without a schema every object key is unknown.
fn prune_everything(value: &mut Value, path: &str, removed: &mut Vec<String>) {
    match value {
        Value::Object(fields) => {
            for key in fields.keys() {
                removed.push(join(path, key));
            }
            fields.clear();
        }
        Value::Array(items) => {
            for (index, item) in items.iter_mut().enumerate() {
                prune_everything(item, &format!("{path}[{index}]"), removed);
            }
        }
        _ => {}
    }
}

/// Under `x-kubernetes-preserve-unknown-fields`, unknown fields stay but declared ones are
/// still pruned below.
fn skip_prune(
    value: &mut Value,
    node: &Node,
    path: &str,
    resource_root: bool,
    removed: &mut Vec<String>,
) {
    let embedded = resource_root || node.embedded_resource;
    match value {
        Value::Object(fields) => {
            for (key, child) in fields.iter_mut() {
                if embedded && META_FIELDS.contains(&key.as_str()) {
                    continue;
                }
                let child_path = join(path, key);
                if let Some(property) = node.properties.get(key) {
                    prune(child, Some(property), &child_path, false, removed);
                } else if let Some(additional) = &node.additional_properties {
                    let schema = match additional {
                        AdditionalProperties::Schema(schema) => Some(schema.as_ref()),
                        AdditionalProperties::Allowed(_) => None,
                    };
                    prune(child, schema, &child_path, false, removed);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_node) = node.items.as_deref() {
                for (index, item) in items.iter_mut().enumerate() {
                    skip_prune(item, item_node, &format!("{path}[{index}]"), false, removed);
                }
            }
        }
        _ => {}
    }
}

/// Embedded resources below the root get their metadata pruned to `ObjectMeta`.
fn coerce_embedded(
    value: &mut Value,
    node: &Node,
    path: &str,
    resource_root: bool,
    removed: &mut Vec<String>,
) {
    if node.embedded_resource
        && !resource_root
        && let Some(metadata) = value.get_mut("metadata")
    {
        prune_object_meta(metadata, &join(path, "metadata"), removed);
    }
    match value {
        Value::Object(fields) => {
            for (key, child) in fields.iter_mut() {
                if resource_root && key == "metadata" {
                    continue;
                }
                if let Some(property) = node.properties.get(key) {
                    coerce_embedded(child, property, &join(path, key), false, removed);
                } else if let Some(element) = node.additional_schema() {
                    coerce_embedded(child, element, &format!("{path}[{key}]"), false, removed);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_node) = node.items.as_deref() {
                for (index, item) in items.iter_mut().enumerate() {
                    coerce_embedded(item, item_node, &format!("{path}[{index}]"), false, removed);
                }
            }
        }
        _ => {}
    }
}

/// Drops fields `ObjectMeta` does not have, including inside owner references and managed
/// fields entries.
pub(crate) fn prune_object_meta(metadata: &mut Value, path: &str, removed: &mut Vec<String>) {
    let Some(fields) = metadata.as_object_mut() else {
        return;
    };
    retain_known(fields, OBJECT_META_FIELDS, path, removed);
    for (list, known) in [
        ("ownerReferences", OWNER_REFERENCE_FIELDS),
        ("managedFields", MANAGED_FIELDS_ENTRY_FIELDS),
    ] {
        if let Some(Value::Array(items)) = fields.get_mut(list) {
            for (index, item) in items.iter_mut().enumerate() {
                if let Some(item_fields) = item.as_object_mut() {
                    retain_known(
                        item_fields,
                        known,
                        &format!("{path}.{list}[{index}]"),
                        removed,
                    );
                }
            }
        }
    }
}

fn retain_known(
    fields: &mut Map<String, Value>,
    known: &[&str],
    path: &str,
    removed: &mut Vec<String>,
) {
    fields.retain(|key, _| {
        let keep = known.contains(&key.as_str());
        if !keep {
            removed.push(format!("{path}.{key}"));
        }
        keep
    });
}

/// Pruning of a value that is not a whole resource (a `default`), without metadata handling.
pub(crate) fn prune_resource_like(
    value: &mut Value,
    node: &Node,
    resource_root: bool,
) -> Vec<String> {
    let mut removed = Vec::new();
    prune(value, Some(node), "", resource_root, &mut removed);
    removed
}
