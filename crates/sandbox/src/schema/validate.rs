//! Value validation against a structural schema, as kube-openapi's `validate` package does it
//! for custom resources, and the translation of its results into field errors
//! (`kubeOpenAPIResultToFieldErrors` in apiextensions-apiserver).
//!
//! Validators run per node in kube-openapi's order: type, allOf/anyOf/oneOf/not, string, format,
//! number, array, enum, object. Messages keep kube-openapi's wording (`<name> in body should be
//! ...`), where `<name>` is the value's path from the root with dots and `[i]`.

use serde_json::Value;

use super::correlation::Correlation;
use super::errors::{FieldError, FieldErrorKind};
use super::formats;
use super::go_text::{format_float, json_type_name, quote};
use super::node::{AdditionalProperties, Node};

/// kube-openapi's error codes that the API server maps to distinct field errors.
#[derive(Debug, Clone, PartialEq)]
enum Code {
    Required,
    Enum(Vec<Value>),
    TooLong(i64),
    TooMany { actual: i64, max: i64 },
    InvalidType,
    Other,
    /// Errors that are not `*errors.Validation` (anyOf/oneOf/allOf/not summaries): the API server
    /// reports them at the root with `Invalid value: ""`.
    Composite,
}

/// One kube-openapi validation error before translation.
#[derive(Debug, Clone, PartialEq)]
struct OpenApiError {
    name: String,
    code: Code,
    value: Option<Value>,
    message: String,
}

/// Validates `value` against `node` and returns field errors as the API server reports them.
///
/// `field_prefix` is the path the API server passes in (`None` for a custom resource, the
/// schema's `.default` path when checking defaults); `old` enables validation ratcheting: errors
/// inside a correlated node whose value did not change are dropped.
pub(crate) fn validate_value(node: &Node, value: &Value, old: Option<&Value>, field_prefix: Option<&str>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let correlation = Correlation::root(value, old);
    validate_node(node, value, "", &correlation, &mut errors);
    let mut seen = std::collections::HashSet::new();
    errors.retain(|error| seen.insert(error.message.clone()));
    errors.into_iter().map(|error| to_field_error(error, field_prefix)).collect()
}

fn to_field_error(error: OpenApiError, field_prefix: Option<&str>) -> FieldError {
    let name = error.name.trim_start_matches('.');
    let field = match (field_prefix, name.is_empty() || error.name == ".") {
        (None, true) => "<nil>".to_string(),
        (None, false) => name.to_string(),
        (Some(prefix), true) => prefix.to_string(),
        (Some(prefix), false) => format!("{prefix}.{name}"),
    };
    let root_field = field_prefix.unwrap_or("<nil>").to_string();
    let value = error.value.unwrap_or_else(|| Value::String(String::new()));
    match error.code {
        Code::Required => FieldError { field, kind: FieldErrorKind::Required, bad_value: None, detail: String::new() },
        Code::Enum(values) => FieldError::not_supported(field, value, &values),
        Code::TooLong(max) => FieldError {
            field,
            kind: FieldErrorKind::TooLong,
            bad_value: None,
            detail: format!("may not be more than {max} bytes"),
        },
        Code::TooMany { actual, max } => FieldError::too_many(field, actual, max),
        Code::InvalidType => {
            FieldError { field, kind: FieldErrorKind::TypeInvalid, bad_value: Some(value), detail: error.message }
        }
        Code::Other => FieldError { field, kind: FieldErrorKind::Invalid, bad_value: Some(value), detail: error.message },
        Code::Composite => FieldError {
            field: root_field,
            kind: FieldErrorKind::Invalid,
            bad_value: Some(Value::String(String::new())),
            detail: error.message,
        },
    }
}

fn validate_node(node: &Node, value: &Value, name: &str, correlation: &Correlation<'_>, errors: &mut Vec<OpenApiError>) {
    // Ratcheting: an unchanged correlated value keeps whatever errors it already had.
    if correlation.unchanged() {
        return;
    }
    let mut local = Vec::new();
    validate_type(node, value, name, &mut local);
    if value.is_null() {
        validate_enum(node, value, name, &mut local);
        errors.extend(local);
        return;
    }
    validate_combinators(node, value, name, &mut local);
    if let Value::String(text) = value {
        validate_string(node, text, name, &mut local);
        validate_format(node, text, name, &mut local);
    }
    if let Value::Number(number) = value {
        validate_number(node, number, name, &mut local);
    }
    if let Value::Array(items) = value {
        validate_array(node, items, name, correlation, &mut local);
    }
    validate_enum(node, value, name, &mut local);
    if let Value::Object(fields) = value {
        validate_object(node, fields, name, correlation, &mut local);
    }
    errors.extend(local);
}

/// The `type` list kube-openapi sees: `x-kubernetes-int-or-string` means `integer,string`.
fn declared_types(node: &Node) -> Vec<&str> {
    if node.int_or_string {
        vec!["integer", "string"]
    } else if node.type_name.is_empty() {
        Vec::new()
    } else {
        vec![node.type_name.as_str()]
    }
}

fn validate_type(node: &Node, value: &Value, name: &str, errors: &mut Vec<OpenApiError>) {
    let types = declared_types(node);
    let format = formats::effective_format(&node.format);
    if types.is_empty() {
        return;
    }
    if value.is_null() {
        if !node.nullable {
            errors.push(invalid_type(name, &types.join(","), "null"));
        }
        return;
    }
    let actual = json_type_name(value);
    let is_float_int = actual == "number" && value.as_f64().is_some_and(|f| f.fract() == 0.0) && types.contains(&"integer");
    let is_int_float = actual == "integer" && types.contains(&"number");
    let numeric = types.contains(&"number") || types.contains(&"integer");
    if !numeric && !format.is_empty() && (value.is_string() || value.is_array()) {
        return;
    }
    if !(types.contains(&actual) || is_float_int || is_int_float) {
        errors.push(invalid_type(name, &types.join(","), actual));
    }
}

fn invalid_type(name: &str, expected: &str, actual: &str) -> OpenApiError {
    OpenApiError {
        name: name.to_string(),
        code: Code::InvalidType,
        value: Some(Value::String(actual.to_string())),
        message: format!("{name} in body must be of type {expected}: {}", quote(actual)),
    }
}

fn validate_combinators(node: &Node, value: &Value, name: &str, errors: &mut Vec<OpenApiError>) {
    let detached = Correlation::detached();
    if !node.any_of.is_empty() {
        let mut best_failures: Option<Vec<OpenApiError>> = None;
        let mut succeeded = false;
        for branch in &node.any_of {
            let mut result = Vec::new();
            validate_node(branch, value, name, &detached, &mut result);
            if result.is_empty() {
                succeeded = true;
                best_failures = None;
                break;
            }
            if best_failures.is_none() {
                best_failures = Some(result);
            }
        }
        if !succeeded {
            errors.push(composite(format!("{} must validate at least one schema (anyOf)", quote(name))));
        }
        errors.extend(best_failures.unwrap_or_default());
    }
    if !node.one_of.is_empty() {
        let mut valid = 0;
        let mut best_failures: Option<Vec<OpenApiError>> = None;
        for branch in &node.one_of {
            let mut result = Vec::new();
            validate_node(branch, value, name, &detached, &mut result);
            if result.is_empty() {
                valid += 1;
                best_failures = None;
            } else if valid == 0 && best_failures.is_none() {
                best_failures = Some(result);
            }
        }
        if valid != 1 {
            let found = if valid == 0 { "Found none valid".to_string() } else { format!("Found {valid} valid alternatives") };
            errors.push(composite(format!("{} must validate one and only one schema (oneOf). {found}", quote(name))));
            errors.extend(best_failures.unwrap_or_default());
        }
    }
    if !node.all_of.is_empty() {
        let mut valid = 0;
        for branch in &node.all_of {
            let mut result = Vec::new();
            validate_node(branch, value, name, &detached, &mut result);
            if result.is_empty() {
                valid += 1;
            }
            errors.extend(result);
        }
        if valid != node.all_of.len() {
            let suffix = if valid == 0 { ". None validated" } else { "" };
            errors.push(composite(format!("{} must validate all the schemas (allOf){suffix}", quote(name))));
        }
    }
    if let Some(not) = &node.not {
        let mut result = Vec::new();
        validate_node(not, value, name, &detached, &mut result);
        if result.is_empty() {
            errors.push(composite(format!("{} must not validate the schema (not)", quote(name))));
        }
    }
}

fn composite(message: String) -> OpenApiError {
    OpenApiError { name: String::new(), code: Code::Composite, value: None, message }
}

fn validate_string(node: &Node, text: &str, name: &str, errors: &mut Vec<OpenApiError>) {
    let length = text.chars().count() as i64;
    if let Some(max) = node.max_length
        && length > max
    {
        errors.push(OpenApiError {
            name: name.to_string(),
            code: Code::TooLong(max),
            value: Some(Value::String(text.to_string())),
            message: format!("{name} in body should be at most {max} chars long"),
        });
        return;
    }
    if let Some(min) = node.min_length
        && length < min
    {
        errors.push(other(name, Value::String(text.to_string()), format!("{name} in body should be at least {min} chars long")));
        return;
    }
    if let Some(pattern) = &node.pattern {
        match &pattern.regex {
            Ok(regex) if regex.is_match(text) => {}
            Ok(_) => errors.push(other(
                name,
                Value::String(text.to_string()),
                format!("{name} in body should match '{}'", pattern.source),
            )),
            Err(error) => errors.push(other(
                name,
                Value::String(text.to_string()),
                format!("{name} in body should match '{}, but pattern is invalid: {error}'", pattern.source),
            )),
        }
    }
}

fn validate_format(node: &Node, text: &str, name: &str, errors: &mut Vec<OpenApiError>) {
    let format = formats::effective_format(&node.format);
    if format.is_empty() {
        return;
    }
    if !formats::is_valid(format, text) {
        errors.push(OpenApiError {
            name: name.to_string(),
            code: Code::InvalidType,
            value: Some(Value::String(text.to_string())),
            message: format!("{name} in body must be of type {}: {}", node.format, quote(text)),
        });
    }
}

/// A number as the API server decoded it: `int64` when it fits, else `float64`.
enum Decoded {
    Int(i64),
    Float(f64),
}

fn decode(number: &serde_json::Number) -> Decoded {
    match number.as_i64() {
        Some(integer) => Decoded::Int(integer),
        None => Decoded::Float(number.as_f64().unwrap_or(0.0)),
    }
}

fn validate_number(node: &Node, number: &serde_json::Number, name: &str, errors: &mut Vec<OpenApiError>) {
    let data = Value::Number(number.clone());
    let decoded = decode(number);
    if let Some(factor) = node.multiple_of {
        match decoded {
            Decoded::Int(value) => {
                let factor = factor as i64;
                if factor <= 0 {
                    errors.push(other(name, Value::from(factor), format!("factor MultipleOf declared for {name} must be positive: {factor}")));
                } else if value % factor != 0 {
                    errors.push(other(name, data.clone(), format!("{name} in body should be a multiple of {factor}")));
                }
            }
            Decoded::Float(value) => {
                if factor <= 0.0 {
                    errors.push(other(
                        name,
                        data.clone(),
                        format!("factor MultipleOf declared for {name} must be positive: {}", format_float(factor)),
                    ));
                } else {
                    let quotient = if factor < 1.0 { 1.0 / factor * value } else { value / factor };
                    if quotient.fract() != 0.0 || !quotient.is_finite() {
                        errors.push(other(name, data.clone(), format!("{name} in body should be a multiple of {}", format_float(factor))));
                    }
                }
            }
        }
    }
    if let Some(minimum) = node.minimum {
        let exclusive = node.exclusive_minimum;
        let (fails, bound) = match decoded {
            Decoded::Int(value) => {
                let bound = minimum as i64;
                (if exclusive { value <= bound } else { value < bound }, bound.to_string())
            }
            Decoded::Float(value) => (if exclusive { value <= minimum } else { value < minimum }, format_float(minimum)),
        };
        if fails {
            let relation = if exclusive { "greater than" } else { "greater than or equal to" };
            errors.push(other(name, data.clone(), format!("{name} in body should be {relation} {bound}")));
        }
    }
    if let Some(maximum) = node.maximum {
        let exclusive = node.exclusive_maximum;
        let (fails, bound) = match decoded {
            Decoded::Int(value) => {
                let bound = maximum as i64;
                (if exclusive { value >= bound } else { value > bound }, bound.to_string())
            }
            Decoded::Float(value) => (if exclusive { value >= maximum } else { value > maximum }, format_float(maximum)),
        };
        if fails {
            let relation = if exclusive { "less than" } else { "less than or equal to" };
            errors.push(other(name, data, format!("{name} in body should be {relation} {bound}")));
        }
    }
}

fn validate_array(node: &Node, items: &[Value], name: &str, correlation: &Correlation<'_>, errors: &mut Vec<OpenApiError>) {
    if let Some(item_schema) = &node.items {
        for (index, item) in items.iter().enumerate() {
            let child = correlation.index(node, index);
            validate_node(item_schema, item, &format!("{name}[{index}]"), &child, errors);
        }
    }
    let size = items.len() as i64;
    if let Some(min) = node.min_items
        && size < min
    {
        errors.push(other(name, Value::from(size), format!("{name} in body should have at least {min} items")));
    }
    if let Some(max) = node.max_items
        && size > max
    {
        errors.push(OpenApiError {
            name: name.to_string(),
            code: Code::TooMany { actual: size, max },
            value: Some(Value::from(size)),
            message: format!("{name} in body should have at most {max} items"),
        });
    }
    if node.unique_items {
        let duplicated = items.iter().enumerate().any(|(index, item)| items[..index].contains(item));
        if duplicated {
            errors.push(OpenApiError {
                name: name.to_string(),
                code: Code::Other,
                value: None,
                message: format!("{name} in body shouldn't contain duplicates"),
            });
        }
    }
}

fn validate_enum(node: &Node, value: &Value, name: &str, errors: &mut Vec<OpenApiError>) {
    let Some(allowed) = &node.enum_values else { return };
    if allowed.is_empty() || (!value.is_null() && allowed.iter().any(|candidate| enum_matches(value, candidate))) {
        return;
    }
    errors.push(OpenApiError {
        name: name.to_string(),
        code: Code::Enum(allowed.clone()),
        value: Some(value.clone()),
        message: format!("{name} in body should be one of {}", go_list(allowed)),
    });
}

/// reflect.DeepEqual after Go's numeric conversion: `1` matches `1.0`.
fn enum_matches(value: &Value, candidate: &Value) -> bool {
    match (value, candidate) {
        (Value::Number(left), Value::Number(right)) => left.as_f64() == right.as_f64(),
        _ => value == candidate,
    }
}

fn go_list(values: &[Value]) -> String {
    let parts: Vec<String> = values
        .iter()
        .map(|value| match value {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        })
        .collect();
    format!("[{}]", parts.join(" "))
}

fn validate_object(
    node: &Node,
    fields: &serde_json::Map<String, Value>,
    name: &str,
    correlation: &Correlation<'_>,
    errors: &mut Vec<OpenApiError>,
) {
    let size = fields.len() as i64;
    if let Some(min) = node.min_properties
        && size < min
    {
        errors.push(other(name, Value::from(size), format!("{name} in body should have at least {min} properties")));
    }
    if let Some(max) = node.max_properties
        && size > max
    {
        errors.push(OpenApiError {
            name: name.to_string(),
            code: Code::TooMany { actual: size, max },
            value: Some(Value::from(size)),
            message: format!("{name} in body should have at most {max} properties"),
        });
    }
    match &node.additional_properties {
        Some(AdditionalProperties::Allowed(false)) => {
            for key in fields.keys().filter(|key| !node.properties.contains_key(*key)) {
                errors.push(OpenApiError {
                    name: name.to_string(),
                    code: Code::Other,
                    value: Some(Value::String(key.clone())),
                    message: format!("{name}.{key} in body is a forbidden property"),
                });
            }
        }
        Some(AdditionalProperties::Schema(schema)) => {
            for (key, child) in fields.iter().filter(|(key, _)| !node.properties.contains_key(*key)) {
                let child_correlation = correlation.key(node, key);
                validate_node(schema, child, &format!("{name}.{key}"), &child_correlation, errors);
            }
        }
        _ => {}
    }
    for (property, schema) in &node.properties {
        if let Some(child) = fields.get(property) {
            let child_name = if name.is_empty() { property.clone() } else { format!("{name}.{property}") };
            let child_correlation = correlation.key(node, property);
            validate_node(schema, child, &child_name, &child_correlation, errors);
        }
    }
    for required in &node.required {
        if !fields.contains_key(required) {
            errors.push(OpenApiError {
                name: format!("{name}.{required}"),
                code: Code::Required,
                value: None,
                message: format!("{name}.{required} in body is required"),
            });
        }
    }
}

fn other(name: &str, value: Value, message: String) -> OpenApiError {
    OpenApiError { name: name.to_string(), code: Code::Other, value: Some(value), message }
}
