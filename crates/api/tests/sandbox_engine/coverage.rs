//! Which constraints of our schemas the cases exercise.
//!
//! A constraint is a keyword at a schema path (`.spec.version` + `pattern`) or a CEL rule
//! (`rule:<message>`). Each one declared by this API's own types needs a case that the
//! constraint rejects and an accepted case in which it was evaluated. The Kubernetes types we
//! embed (affinity, resources, topology spread constraints, conditions) are Kubernetes' own
//! validation, exercised by some cases but not required here.
//!
//! Which constraint rejected a case is read from the sandbox engine's errors
//! ([`constraint_of`]): the error's field path leads to the schema node, its kind and detail
//! to the keyword or rule.

use std::collections::BTreeSet;

use kube_sandbox::schema::{FieldError, FieldErrorKind};
use serde_json::Value;

/// `(kind, schema path, keyword)`.
pub type Constraint = (String, String, String);

/// Properties holding embedded Kubernetes types.
const EMBEDDED: &[&str] = &[
    "affinity",
    "resources",
    "topologySpreadConstraints",
    "conditions",
];

const KEYWORDS: &[&str] = &[
    "enum",
    "pattern",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
];

fn is_embedded(schema_path: &str) -> bool {
    schema_path
        .split(['.', '['])
        .any(|segment| EMBEDDED.contains(&segment))
}

/// The constraints of the node itself (not its children).
fn node_constraints(schema: &Value) -> Vec<(String, bool)> {
    let mut found: Vec<(String, bool)> = KEYWORDS
        .iter()
        .filter(|keyword| schema.get(**keyword).is_some())
        .map(|keyword| ((*keyword).to_owned(), false))
        .collect();
    if schema
        .get("required")
        .and_then(Value::as_array)
        .is_some_and(|required| !required.is_empty())
    {
        found.push(("required".to_owned(), false));
    }
    for rule in schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let message = rule["message"].as_str().unwrap_or_default();
        let transition = rule["rule"]
            .as_str()
            .unwrap_or_default()
            .contains("oldSelf");
        found.push((format!("rule:{message}"), transition));
    }
    found
}

/// Every constraint our own types declare in `schema`.
pub fn targets(kind: &str, schema: &Value) -> BTreeSet<Constraint> {
    let mut out = BTreeSet::new();
    walk_schema(schema, "", &mut |path, node| {
        if !is_embedded(path) {
            for (keyword, _) in node_constraints(node) {
                out.insert((kind.to_owned(), path.to_owned(), keyword));
            }
        }
    });
    out
}

fn walk_schema(schema: &Value, path: &str, visit: &mut dyn FnMut(&str, &Value)) {
    visit(path, schema);
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, child) in properties {
            walk_schema(child, &format!("{path}.{name}"), visit);
        }
    }
    if let Some(items) = schema.get("items") {
        walk_schema(items, &format!("{path}[]"), visit);
    }
    if let Some(values) = schema.get("additionalProperties").filter(|s| s.is_object()) {
        walk_schema(values, &format!("{path}{{}}"), visit);
    }
}

/// The constraints evaluated on `object` (admitted form): those at every path the object has,
/// transition rules only where the old object has the path too.
pub fn exercised(
    kind: &str,
    schema: &Value,
    object: &Value,
    old: Option<&Value>,
) -> BTreeSet<Constraint> {
    let mut out = BTreeSet::new();
    walk_value(kind, schema, object, old, "", &mut out);
    out
}

fn walk_value(
    kind: &str,
    schema: &Value,
    value: &Value,
    old: Option<&Value>,
    path: &str,
    out: &mut BTreeSet<Constraint>,
) {
    for (keyword, transition) in node_constraints(schema) {
        if !transition || old.is_some() {
            out.insert((kind.to_owned(), path.to_owned(), keyword));
        }
    }
    if let (Some(properties), Some(object)) = (
        schema.get("properties").and_then(Value::as_object),
        value.as_object(),
    ) {
        for (name, child) in object {
            if let Some(child_schema) = properties.get(name) {
                let child_old = old.and_then(|old| old.get(name));
                walk_value(
                    kind,
                    child_schema,
                    child,
                    child_old,
                    &format!("{path}.{name}"),
                    out,
                );
            }
        }
    }
    if let (Some(items), Some(list)) = (schema.get("items"), value.as_array()) {
        for (index, item) in list.iter().enumerate() {
            let item_old = old.and_then(|old| old.get(index));
            walk_value(kind, items, item, item_old, &format!("{path}[]"), out);
        }
    }
}

/// The constraint of `schema` (the raw schema of `kind`) that `error` reports, or `None` when
/// the error's field path leads nowhere in the schema.
pub fn constraint_of(kind: &str, schema: &Value, error: &FieldError) -> Option<Constraint> {
    let segments = field_segments(&error.field);
    let constraint =
        |path: String, keyword: &str| Some((kind.to_owned(), path, keyword.to_owned()));
    if error.kind == FieldErrorKind::Required {
        // Reported at the missing field; declared by its parent's `required` list.
        let (_, parent) = segments.split_last()?;
        let (path, _) = resolve(schema, parent)?;
        return constraint(path, "required");
    }
    let (path, node) = resolve(schema, &segments)?;
    let is_array = node.get("type").and_then(Value::as_str) == Some("array");
    let keyword = match error.kind {
        FieldErrorKind::NotSupported => "enum".to_owned(),
        FieldErrorKind::TypeInvalid => "type".to_owned(),
        FieldErrorKind::TooLong if is_array => "maxItems".to_owned(),
        FieldErrorKind::TooLong => "maxLength".to_owned(),
        FieldErrorKind::TooMany if is_array => "maxItems".to_owned(),
        FieldErrorKind::TooMany => "maxProperties".to_owned(),
        FieldErrorKind::Duplicate => "x-kubernetes-list-type".to_owned(),
        _ => keyword_of_detail(node, &error.detail),
    };
    constraint(path, &keyword)
}

/// The keyword behind an `Invalid value`: a CEL rule of the node (by its message), or the
/// OpenAPI keyword kube-openapi's wording names.
fn keyword_of_detail(node: &Value, detail: &str) -> String {
    let rule = node
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|rule| {
            let message = rule["message"].as_str().unwrap_or_default();
            let default = format!("failed rule: {}", rule["rule"].as_str().unwrap_or_default());
            detail == message || (message.is_empty() && detail == default)
        });
    if let Some(rule) = rule {
        return format!("rule:{}", rule["message"].as_str().unwrap_or_default());
    }
    let wording: &[(&str, &str)] = &[
        (" evaluating rule: ", "rule-evaluation-error"),
        (
            "some validation rules were not checked",
            "rules-not-checked",
        ),
        (" in body should match '", "pattern"),
        (" chars long", "minLength"),
        (" in body should be greater than", "minimum"),
        (" in body should be less than", "maximum"),
    ];
    wording
        .iter()
        .find(|(words, _)| detail.contains(words))
        .map_or_else(
            || format!("unclassified: {detail}"),
            |(_, keyword)| (*keyword).to_owned(),
        )
}

/// A field path as the API server prints it, split into names and `[...]` subscripts:
/// `spec.members[0].name` → `spec`, `members`, `[0]`, `name`. `<nil>` is the root.
fn field_segments(field: &str) -> Vec<String> {
    if field == "<nil>" {
        return Vec::new();
    }
    let mut segments = Vec::new();
    let mut current = String::new();
    let mut in_subscript = false;
    for character in field.chars() {
        match character {
            '[' if !in_subscript => {
                if !current.is_empty() {
                    segments.push(std::mem::take(&mut current));
                }
                in_subscript = true;
                current.push('[');
            }
            ']' if in_subscript => {
                current.push(']');
                segments.push(std::mem::take(&mut current));
                in_subscript = false;
            }
            '.' if !in_subscript => {
                if !current.is_empty() {
                    segments.push(std::mem::take(&mut current));
                }
            }
            _ => current.push(character),
        }
    }
    if !current.is_empty() {
        segments.push(current);
    }
    segments
}

/// The schema path (`.spec.members[]`, `.spec.additionalMetadata.labels{}`) and node that the
/// data path `segments` leads to: a name is a property or, failing that, a map value; a
/// subscript is a list item or a map value.
fn resolve<'a>(schema: &'a Value, segments: &[String]) -> Option<(String, &'a Value)> {
    let mut path = String::new();
    let mut node = schema;
    for segment in segments {
        let map_values = node.get("additionalProperties").filter(|s| s.is_object());
        if segment.starts_with('[') {
            if let Some(items) = node.get("items") {
                path.push_str("[]");
                node = items;
            } else {
                path.push_str("{}");
                node = map_values?;
            }
        } else if let Some(property) = node.get("properties").and_then(|p| p.get(segment)) {
            path.push('.');
            path.push_str(segment);
            node = property;
        } else {
            path.push_str("{}");
            node = map_values?;
        }
    }
    Some((path, node))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> Value {
        json!({"type": "object", "properties": {"spec": {
            "type": "object",
            "required": ["version"],
            "x-kubernetes-validations": [{"rule": "self.replicas > 0", "message": "replicas must be positive"}],
            "properties": {
                "version": {"type": "string", "pattern": "^\\d+$"},
                "members": {"type": "array", "maxItems": 3, "items": {"type": "object", "properties": {
                    "name": {"type": "string", "minLength": 1}}}},
                "labels": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 3}}}}}})
    }

    fn constraint(error: FieldError) -> Option<(String, String)> {
        constraint_of("Widget", &schema(), &error).map(|(_, path, keyword)| (path, keyword))
    }

    fn pair(path: &str, keyword: &str) -> Option<(String, String)> {
        Some((path.to_owned(), keyword.to_owned()))
    }

    #[test]
    fn field_paths_split_into_names_and_subscripts() {
        assert_eq!(
            field_segments("spec.members[0].name"),
            ["spec", "members", "[0]", "name"]
        );
        assert_eq!(
            field_segments("spec.labels[a.b/c]"),
            ["spec", "labels", "[a.b/c]"]
        );
        assert!(field_segments("<nil>").is_empty());
    }

    #[test]
    fn errors_lead_to_the_keyword_that_declared_them() {
        assert_eq!(
            constraint(FieldError::required("spec.version", "")),
            pair(".spec", "required")
        );
        let bad = |field: &str, detail: &str| FieldError::invalid(field, json!("x"), detail);
        assert_eq!(
            constraint(bad(
                "spec.version",
                "spec.version in body should match '^\\d+$'"
            )),
            pair(".spec.version", "pattern")
        );
        assert_eq!(
            constraint(bad(
                "spec.members[2].name",
                "spec.members[2].name in body should be at least 1 chars long"
            )),
            pair(".spec.members[].name", "minLength")
        );
        assert_eq!(
            constraint(bad("spec", "replicas must be positive")),
            pair(".spec", "rule:replicas must be positive")
        );
        assert_eq!(
            constraint(FieldError::too_many("spec.members", 4, 3)),
            pair(".spec.members", "maxItems")
        );
        assert_eq!(
            constraint(bad("spec.labels.tier", "something else")),
            pair(".spec.labels{}", "unclassified: something else")
        );
        assert_eq!(constraint(bad("spec.nothing[0]", "")), None);
    }
}
