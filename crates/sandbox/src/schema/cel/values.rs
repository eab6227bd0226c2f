//! Custom resource values as CEL sees them (apiextensions' `UnstructuredToVal`), typed by the
//! schema: `number` fields are doubles even when written as `1`, `date-time` strings are
//! timestamps, `duration` strings durations, `byte` strings bytes, property names escaped.

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine;
use kube_cel::cel::Value as CelValue;
use kube_cel::cel::objects::{Key, Map};
use serde_json::Value;

use crate::schema::formats::parse_go_duration;
use crate::schema::node::Node;

/// CEL's reserved words: a property named like one is reachable as `__name__`.
const RESERVED: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// apiserver's `cel.Escape`: the CEL name of a property, or `None` when it cannot be named.
pub(crate) fn escape(name: &str) -> Option<String> {
    let first = name.chars().next()?;
    if first.is_ascii_digit() {
        return None;
    }
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut escaped = String::with_capacity(name.len());
    let mut characters = name.chars().peekable();
    while let Some(character) = characters.next() {
        match character {
            '_' if characters.peek() == Some(&'_') => {
                characters.next();
                escaped.push_str("__underscores__");
            }
            '.' => escaped.push_str("__dot__"),
            '-' => escaped.push_str("__dash__"),
            '/' => escaped.push_str("__slash__"),
            c if c.is_ascii_alphanumeric() || c == '_' => escaped.push(c),
            _ => return None,
        }
    }
    Some(escaped)
}

/// Converts `value` for CEL as described by `node` (`None` for untyped, preserved fields).
///
/// `resource_root` adds the implicit `apiVersion`, `kind` and `metadata` (`name`,
/// `generateName`) of a resource's root or of an embedded resource.
pub(crate) fn to_cel(value: &Value, node: Option<&Node>, resource_root: bool) -> CelValue {
    let Some(node) = node else {
        return untyped(value);
    };
    match value {
        Value::Null => CelValue::Null,
        Value::Bool(flag) => CelValue::Bool(*flag),
        Value::Number(number) => number_to_cel(number, node),
        Value::String(text) => string_to_cel(text, node),
        Value::Array(items) => {
            let item_node = node.items.as_deref();
            CelValue::List(Arc::new(
                items
                    .iter()
                    .map(|item| {
                        to_cel(
                            item,
                            item_node,
                            item_node.is_some_and(|n| n.embedded_resource),
                        )
                    })
                    .collect(),
            ))
        }
        Value::Object(fields) => object_to_cel(fields, node, resource_root),
    }
}

fn number_to_cel(number: &serde_json::Number, node: &Node) -> CelValue {
    if node.type_name == "number" {
        return CelValue::Float(number.as_f64().unwrap_or(0.0));
    }
    match number.as_i64() {
        Some(integer) => CelValue::Int(integer),
        None => match number.as_u64() {
            Some(unsigned) => CelValue::UInt(unsigned),
            None => CelValue::Float(number.as_f64().unwrap_or(0.0)),
        },
    }
}

fn string_to_cel(text: &str, node: &Node) -> CelValue {
    if node.type_name == "string" {
        match node.format.as_str() {
            "date-time" | "datetime" => {
                if let Ok(timestamp) = chrono::DateTime::parse_from_rfc3339(text) {
                    return CelValue::Timestamp(timestamp);
                }
            }
            "duration" => {
                if let Some(nanos) = parse_go_duration(text) {
                    return CelValue::Duration(chrono::Duration::nanoseconds(nanos as i64));
                }
            }
            "byte" => {
                if let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(text) {
                    return CelValue::Bytes(Arc::new(bytes));
                }
            }
            _ => {}
        }
    }
    CelValue::String(Arc::new(text.to_string()))
}

fn object_to_cel(
    fields: &serde_json::Map<String, Value>,
    node: &Node,
    resource_root: bool,
) -> CelValue {
    let mut map: HashMap<Key, CelValue> = HashMap::new();
    if let Some(element) = node.additional_schema() {
        // A map: keys are data, not field names, so they are not escaped.
        for (key, value) in fields {
            map.insert(
                key_of(key),
                to_cel(value, Some(element), element.embedded_resource),
            );
        }
        return CelValue::Map(Map { map: Arc::new(map) });
    }
    for (name, value) in fields {
        if resource_root && matches!(name.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        let Some(escaped) = escape(name) else {
            continue;
        };
        let converted = match node.properties.get(name) {
            Some(property) => to_cel(value, Some(property), property.embedded_resource),
            None if node.preserves_unknown_fields() || node.embedded_resource => untyped(value),
            // Pruned before validation; kept out of CEL as the API server's typed object would.
            None => continue,
        };
        map.insert(key_of(&escaped), converted);
    }
    if resource_root {
        for meta in ["apiVersion", "kind"] {
            if let Some(Value::String(text)) = fields.get(meta) {
                map.insert(key_of(meta), CelValue::String(Arc::new(text.clone())));
            }
        }
        if let Some(Value::Object(metadata)) = fields.get("metadata") {
            let mut meta_map: HashMap<Key, CelValue> = HashMap::new();
            for name in ["name", "generateName"] {
                if let Some(Value::String(text)) = metadata.get(name) {
                    meta_map.insert(key_of(name), CelValue::String(Arc::new(text.clone())));
                }
            }
            map.insert(
                key_of("metadata"),
                CelValue::Map(Map {
                    map: Arc::new(meta_map),
                }),
            );
        }
    }
    CelValue::Map(Map { map: Arc::new(map) })
}

fn key_of(text: &str) -> Key {
    Key::String(Arc::new(text.to_string()))
}

/// Plain JSON to CEL for values the schema does not describe.
pub(crate) fn untyped(value: &Value) -> CelValue {
    match value {
        Value::Null => CelValue::Null,
        Value::Bool(flag) => CelValue::Bool(*flag),
        Value::Number(number) => match number.as_i64() {
            Some(integer) => CelValue::Int(integer),
            None => match number.as_u64() {
                Some(unsigned) => CelValue::UInt(unsigned),
                None => CelValue::Float(number.as_f64().unwrap_or(0.0)),
            },
        },
        Value::String(text) => CelValue::String(Arc::new(text.clone())),
        Value::Array(items) => CelValue::List(Arc::new(items.iter().map(untyped).collect())),
        Value::Object(fields) => {
            let map: HashMap<Key, CelValue> = fields
                .iter()
                .map(|(key, value)| (key_of(key), untyped(value)))
                .collect();
            CelValue::Map(Map { map: Arc::new(map) })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_matches_the_api_server() {
        assert_eq!(escape("replicas").as_deref(), Some("replicas"));
        assert_eq!(escape("namespace").as_deref(), Some("__namespace__"));
        assert_eq!(escape("foo-bar").as_deref(), Some("foo__dash__bar"));
        assert_eq!(escape("a.b/c").as_deref(), Some("a__dot__b__slash__c"));
        assert_eq!(
            escape("my__field").as_deref(),
            Some("my__underscores__field")
        );
        assert_eq!(escape("my_field").as_deref(), Some("my_field"));
        assert_eq!(escape("1st"), None);
        assert_eq!(escape("with space"), None);
        assert_eq!(escape(""), None);
    }
}
