//! Uniqueness of `x-kubernetes-list-type: set` items and `map` keys (apiextensions'
//! `ValidateListSetsAndMaps`), and the TypeMeta of embedded resources.

use serde_json::{Map, Value};

use super::errors::FieldError;
use super::node::{ListType, Node};

/// `Duplicate value` errors for every repeated set item or map-list key under `value`.
pub(crate) fn validate_lists(node: &Node, value: &Value, path: &str, errors: &mut Vec<FieldError>) {
    match value {
        Value::Array(items) => {
            match node.list_semantics() {
                ListType::Set if node.list_type.is_some() => {
                    for index in first_repeats(items) {
                        errors.push(FieldError::duplicate(
                            format!("{path}[{index}]"),
                            items[index].clone(),
                        ));
                    }
                }
                ListType::Map => validate_map_list(node, items, path, errors),
                _ => {}
            }
            if let Some(item_node) = &node.items {
                for (index, item) in items.iter().enumerate() {
                    validate_lists(item_node, item, &format!("{path}[{index}]"), errors);
                }
            }
        }
        Value::Object(fields) => {
            if let Some(element) = node.additional_schema() {
                for (key, child) in fields {
                    validate_lists(element, child, &format!("{path}[{key}]"), errors);
                }
            }
            for (name, child) in fields {
                if let Some(property) = node.properties.get(name) {
                    let child_path = if path.is_empty() {
                        name.clone()
                    } else {
                        format!("{path}.{name}")
                    };
                    validate_lists(property, child, &child_path, errors);
                }
            }
        }
        _ => {}
    }
}

/// Indices of the second occurrence of each repeated value (reported once per value).
fn first_repeats(items: &[Value]) -> Vec<usize> {
    let mut repeats = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let earlier = items[..index].iter().filter(|other| *other == item).count();
        if earlier == 1 {
            repeats.push(index);
        }
    }
    repeats
}

fn validate_map_list(node: &Node, items: &[Value], path: &str, errors: &mut Vec<FieldError>) {
    for (index, item) in items.iter().enumerate() {
        if !item.is_null() && !item.is_object() {
            errors.push(FieldError::invalid(
                format!("{path}[{index}]"),
                item.clone(),
                "must be an object for an array of list-type map",
            ));
            return;
        }
    }
    let keys: Vec<Value> = items
        .iter()
        .map(|item| {
            let mut key = Map::new();
            if let Some(fields) = item.as_object() {
                for name in &node.list_map_keys {
                    if let Some(value) = fields.get(name) {
                        key.insert(name.clone(), value.clone());
                    }
                }
            }
            Value::Object(key)
        })
        .collect();
    for index in first_repeats(&keys) {
        errors.push(FieldError::duplicate(
            format!("{path}[{index}]"),
            keys[index].clone(),
        ));
    }
}

/// `apiVersion` and `kind` of resources embedded with `x-kubernetes-embedded-resource`.
pub(crate) fn validate_embedded(
    node: &Node,
    value: &Value,
    path: &str,
    errors: &mut Vec<FieldError>,
) {
    match value {
        Value::Object(fields) => {
            if node.embedded_resource {
                validate_type_meta(fields, path, errors);
            }
            for (name, child) in fields {
                let child_path = if path.is_empty() {
                    name.clone()
                } else {
                    format!("{path}.{name}")
                };
                if let Some(property) = node.properties.get(name) {
                    validate_embedded(property, child, &child_path, errors);
                } else if let Some(element) = node.additional_schema() {
                    validate_embedded(element, child, &format!("{path}[{name}]"), errors);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_node) = &node.items {
                for (index, item) in items.iter().enumerate() {
                    validate_embedded(item_node, item, &format!("{path}[{index}]"), errors);
                }
            }
        }
        _ => {}
    }
}

fn validate_type_meta(fields: &Map<String, Value>, path: &str, errors: &mut Vec<FieldError>) {
    let field = |name: &str| {
        if path.is_empty() {
            name.to_string()
        } else {
            format!("{path}.{name}")
        }
    };
    if !fields.contains_key("apiVersion") {
        errors.push(FieldError::required(
            field("apiVersion"),
            "must not be empty",
        ));
    }
    if !fields.contains_key("kind") {
        errors.push(FieldError::required(field("kind"), "must not be empty"));
    }
    match fields.get("apiVersion") {
        Some(Value::String(version)) if version.is_empty() => {
            errors.push(FieldError::invalid(
                field("apiVersion"),
                Value::String(String::new()),
                "must not be empty",
            ));
        }
        Some(Value::String(version)) if version.matches('/').count() > 1 => {
            errors.push(FieldError::invalid(
                field("apiVersion"),
                Value::String(version.clone()),
                format!("unexpected GroupVersion string: {version}"),
            ));
        }
        Some(Value::String(_)) | None => {}
        Some(other) => errors.push(FieldError::invalid(
            field("apiVersion"),
            other.clone(),
            "must be a string",
        )),
    }
    match fields.get("kind") {
        Some(Value::String(kind)) if kind.is_empty() => {
            errors.push(FieldError::invalid(
                field("kind"),
                Value::String(String::new()),
                "must not be empty",
            ));
        }
        Some(Value::String(_)) | None => {}
        Some(other) => errors.push(FieldError::invalid(
            field("kind"),
            other.clone(),
            "must be a string",
        )),
    }
}
