//! A minimal structural validator: the OpenAPI keywords our CRDs use, checked the way
//! kube-apiserver checks them, with its error wording (so the same expected substrings hold
//! when the cases are replayed through a real API server).

use serde_json::Value;

/// One failed constraint.
#[derive(Debug, Clone)]
pub struct Violation {
    /// Where the constraint is declared, in schema form: `.spec.tls`, `.spec.imagePullSecrets[]`.
    pub schema_path: String,
    /// The keyword (`pattern`, `required`, ...) or `rule:<message>` for a CEL rule.
    pub keyword: String,
    /// The API server's message: `<data path>: <detail>`.
    pub message: String,
}

/// Checks `value` (defaults already applied) against `schema`.
pub fn check(schema: &Value, value: &Value) -> Vec<Violation> {
    let mut violations = Vec::new();
    check_node(schema, value, "", "", &mut violations);
    violations
}

/// The data path form of the API server: `spec.replicas`, `spec.imagePullSecrets[0].name`.
fn data_path(path: &str) -> &str {
    path.strip_prefix('.').unwrap_or(path)
}

fn check_node(
    schema: &Value,
    value: &Value,
    path: &str,
    schema_path: &str,
    out: &mut Vec<Violation>,
) {
    let mut fail = |keyword: &str, message: String| {
        out.push(Violation {
            schema_path: schema_path.to_owned(),
            keyword: keyword.to_owned(),
            message: format!("{}: {message}", data_path(path)),
        })
    };
    let shown = data_path(path);

    let int_or_string = schema.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    let expected_type = if int_or_string {
        Some("integer,string")
    } else {
        schema.get("type").and_then(Value::as_str)
    };
    if let Some(expected) = expected_type
        && !has_type(value, expected)
    {
        let actual = type_name(value);
        fail(
            "type",
            format!(
                "Invalid value: \"{actual}\": {shown} in body must be of type {expected}: \"{actual}\""
            ),
        );
        return;
    }

    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let supported: Vec<String> = allowed.iter().map(Value::to_string).collect();
        fail(
            "enum",
            format!(
                "Unsupported value: {value}: supported values: {}",
                supported.join(", ")
            ),
        );
    }

    if let Some(text) = value.as_str() {
        if let Some(pattern) = schema.get("pattern").and_then(Value::as_str)
            && !go_regex(pattern).is_match(text.as_bytes())
        {
            fail(
                "pattern",
                format!("Invalid value: {value}: {shown} in body should match '{pattern}'"),
            );
        }
        let length = text.chars().count() as u64;
        if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
            && length < min
        {
            fail(
                "minLength",
                format!(
                    "Invalid value: {value}: {shown} in body should be at least {min} chars long"
                ),
            );
        }
        if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
            && length > max
        {
            fail(
                "maxLength",
                format!("Too long: may not be more than {max} bytes"),
            );
        }
    }

    if let Some(number) = value.as_f64().filter(|_| value.is_number()) {
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
            && number < min
        {
            fail(
                "minimum",
                format!(
                    "Invalid value: {value}: {shown} in body should be greater than or equal to {min}"
                ),
            );
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
            && number > max
        {
            fail(
                "maximum",
                format!(
                    "Invalid value: {value}: {shown} in body should be less than or equal to {max}"
                ),
            );
        }
    }

    if let Some(object) = value.as_object() {
        for name in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if !object.contains_key(name) {
                out.push(Violation {
                    schema_path: schema_path.to_owned(),
                    keyword: "required".to_owned(),
                    message: format!("{}: Required value", data_path(&format!("{path}.{name}"))),
                });
            }
        }
        let properties = schema.get("properties").and_then(Value::as_object);
        for (name, child) in object {
            let child_path = format!("{path}.{name}");
            match properties.and_then(|properties| properties.get(name)) {
                Some(child_schema) => check_node(
                    child_schema,
                    child,
                    &child_path,
                    &format!("{schema_path}.{name}"),
                    out,
                ),
                None => {
                    if let Some(values) =
                        schema.get("additionalProperties").filter(|s| s.is_object())
                    {
                        check_node(
                            values,
                            child,
                            &child_path,
                            &format!("{schema_path}{{}}"),
                            out,
                        );
                    }
                }
            }
        }
    }

    if let (Some(items), Some(list)) = (schema.get("items"), value.as_array()) {
        for (index, item) in list.iter().enumerate() {
            check_node(
                items,
                item,
                &format!("{path}[{index}]"),
                &format!("{schema_path}[]"),
                out,
            );
        }
        if schema.get("x-kubernetes-list-type").and_then(Value::as_str) == Some("map") {
            check_map_keys(schema, list, path, schema_path, out);
        }
    }
}

/// A `x-kubernetes-list-type: map` list holds each key combination once.
fn check_map_keys(
    schema: &Value,
    list: &[Value],
    path: &str,
    schema_path: &str,
    out: &mut Vec<Violation>,
) {
    let keys: Vec<&str> = schema
        .get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut seen = Vec::new();
    for (index, item) in list.iter().enumerate() {
        let key: serde_json::Map<String, Value> = keys
            .iter()
            .filter_map(|key| Some(((*key).to_owned(), item.get(*key)?.clone())))
            .collect();
        if seen.contains(&key) {
            out.push(Violation {
                schema_path: format!("{schema_path}[]"),
                keyword: "x-kubernetes-list-map-keys".to_owned(),
                message: format!(
                    "{}[{index}]: Duplicate value: {}",
                    data_path(path),
                    Value::Object(key)
                ),
            });
        } else {
            seen.push(key);
        }
    }
}

fn has_type(value: &Value, expected: &str) -> bool {
    expected.split(',').any(|expected| match expected {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        _ => true,
    })
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(number) if number.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Go's RE2 semantics for the patterns we use: `\d` and friends are ASCII-only.
fn go_regex(pattern: &str) -> regex::bytes::Regex {
    regex::bytes::RegexBuilder::new(pattern)
        .unicode(false)
        .build()
        .unwrap_or_else(|error| panic!("pattern {pattern} does not compile: {error}"))
}
