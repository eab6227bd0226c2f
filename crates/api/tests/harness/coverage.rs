//! Which constraints of our schemas the cases exercise.
//!
//! A constraint is a keyword at a schema path (`.spec.version` + `pattern`) or a CEL rule
//! (`rule:<message>`). Each one declared by this API's own types needs a case that the
//! constraint rejects and an accepted case in which it was evaluated. The Kubernetes types we
//! embed (affinity, resources, topology spread constraints, conditions) are Kubernetes' own
//! validation, exercised by some cases but not required here.

use std::collections::BTreeSet;

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
