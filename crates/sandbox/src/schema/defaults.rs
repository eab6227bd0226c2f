//! Defaulting (apiextensions' `structuraldefaulting.Default`) and the removal of `null`s that
//! neither `nullable` nor a `default` allow (`PruneNonNullableNullsWithoutDefaults`).

use serde_json::Value;

use super::node::Node;

fn non_nullable_null(value: &Value, node: Option<&Node>) -> bool {
    value.is_null() && node.is_some_and(|node| !node.nullable)
}

/// Fills in `default`s: a missing field (or a `null` one that is not nullable) gets the
/// property's default, then defaulting descends into it, so defaulted objects get their own
/// nested defaults; items and `additionalProperties` values are defaulted too.
pub(crate) fn apply_defaults(value: &mut Value, node: &Node) {
    match value {
        Value::Object(fields) => {
            for (name, property) in &node.properties {
                let Some(default) = &property.default else {
                    continue;
                };
                let missing = fields
                    .get(name)
                    .is_none_or(|existing| non_nullable_null(existing, Some(property)));
                if missing {
                    fields.insert(name.clone(), default.clone());
                }
            }
            let element = node.additional_schema();
            for (name, child) in fields.iter_mut() {
                if let Some(property) = node.properties.get(name) {
                    apply_defaults(child, property);
                } else if let Some(element) = element {
                    if non_nullable_null(child, Some(element))
                        && let Some(default) = &element.default
                    {
                        *child = default.clone();
                    }
                    apply_defaults(child, element);
                }
            }
        }
        Value::Array(items) => {
            let Some(item_node) = node.items.as_deref() else {
                return;
            };
            for item in items.iter_mut() {
                if non_nullable_null(item, Some(item_node))
                    && let Some(default) = &item_node.default
                {
                    *item = default.clone();
                }
                apply_defaults(item, item_node);
            }
        }
        _ => {}
    }
}

/// Removes object fields that are `null` where the schema allows neither `null` nor a default.
/// Fields without a schema (preserved unknown fields) keep their `null`s.
pub(crate) fn prune_non_nullable_nulls(value: &mut Value, node: Option<&Node>) {
    match value {
        Value::Object(fields) => {
            fields.retain(|name, child| {
                let schema = node.and_then(|node| node.child(name));
                !(child.is_null()
                    && schema.is_some_and(|schema| !schema.nullable && schema.default.is_none()))
            });
            for (name, child) in fields.iter_mut() {
                prune_non_nullable_nulls(child, node.and_then(|node| node.child(name)));
            }
        }
        Value::Array(items) => {
            let item_node = node.and_then(|node| node.items.as_deref());
            for item in items.iter_mut() {
                prune_non_nullable_nulls(item, item_node);
            }
        }
        _ => {}
    }
}
