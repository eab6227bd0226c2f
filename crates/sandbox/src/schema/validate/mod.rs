//! Value validation against a structural schema, as kube-openapi's `validate` package does it
//! for custom resources, and the translation of its results into field errors
//! (`kubeOpenAPIResultToFieldErrors` in apiextensions-apiserver).
//!
//! Validators run per node in kube-openapi's order: type, allOf/anyOf/oneOf/not, string, format,
//! number, array, enum, object. Messages keep kube-openapi's wording (`<name> in body should be
//! ...`), where `<name>` is the value's path from the root with dots and `[i]`.

use serde_json::Value;

mod keywords;

use self::keywords::{
    validate_array, validate_enum, validate_format, validate_number, validate_object,
    validate_string,
};
use super::correlation::Correlation;
use super::errors::{FieldError, FieldErrorKind};
use super::formats;
use super::go_text::{json_type_name, quote};
use super::node::Node;

/// kube-openapi's error codes that the API server maps to distinct field errors.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Code {
    Required,
    Enum(Vec<Value>),
    TooLong(i64),
    TooMany {
        actual: i64,
        max: i64,
    },
    InvalidType,
    Other,
    /// Errors that are not `*errors.Validation` (anyOf/oneOf/allOf/not summaries): the API server
    /// reports them at the root with `Invalid value: ""`.
    Composite,
}

/// One kube-openapi validation error before translation.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct OpenApiError {
    pub(super) name: String,
    pub(super) code: Code,
    pub(super) value: Option<Value>,
    pub(super) message: String,
}

/// Validates `value` against `node` and returns field errors as the API server reports them.
///
/// `field_prefix` is the path the API server passes in (`None` for a custom resource, the
/// schema's `.default` path when checking defaults); `old` enables validation ratcheting: errors
/// inside a correlated node whose value did not change are dropped.
pub(crate) fn validate_value(
    node: &Node,
    value: &Value,
    old: Option<&Value>,
    field_prefix: Option<&str>,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let correlation = Correlation::root(value, old);
    validate_node(node, value, "", &correlation, &mut errors);
    let mut seen = std::collections::HashSet::new();
    errors.retain(|error| seen.insert(error.message.clone()));
    errors
        .into_iter()
        .map(|error| to_field_error(error, field_prefix))
        .collect()
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
        Code::Required => FieldError {
            field,
            kind: FieldErrorKind::Required,
            bad_value: None,
            detail: String::new(),
        },
        Code::Enum(values) => FieldError::not_supported(field, value, &values),
        Code::TooLong(max) => FieldError {
            field,
            kind: FieldErrorKind::TooLong,
            bad_value: None,
            detail: format!("may not be more than {max} bytes"),
        },
        Code::TooMany { actual, max } => FieldError::too_many(field, actual, max),
        Code::InvalidType => FieldError {
            field,
            kind: FieldErrorKind::TypeInvalid,
            bad_value: Some(value),
            detail: error.message,
        },
        Code::Other => FieldError {
            field,
            kind: FieldErrorKind::Invalid,
            bad_value: Some(value),
            detail: error.message,
        },
        Code::Composite => FieldError {
            field: root_field,
            kind: FieldErrorKind::Invalid,
            bad_value: Some(Value::String(String::new())),
            detail: error.message,
        },
    }
}

fn validate_node(
    node: &Node,
    value: &Value,
    name: &str,
    correlation: &Correlation<'_>,
    errors: &mut Vec<OpenApiError>,
) {
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
    let is_float_int = actual == "number"
        && value.as_f64().is_some_and(|f| f.fract() == 0.0)
        && types.contains(&"integer");
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
        message: format!(
            "{name} in body must be of type {expected}: {}",
            quote(actual)
        ),
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
            errors.push(composite(format!(
                "{} must validate at least one schema (anyOf)",
                quote(name)
            )));
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
            let found = if valid == 0 {
                "Found none valid".to_string()
            } else {
                format!("Found {valid} valid alternatives")
            };
            errors.push(composite(format!(
                "{} must validate one and only one schema (oneOf). {found}",
                quote(name)
            )));
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
            errors.push(composite(format!(
                "{} must validate all the schemas (allOf){suffix}",
                quote(name)
            )));
        }
    }
    if let Some(not) = &node.not {
        let mut result = Vec::new();
        validate_node(not, value, name, &detached, &mut result);
        if result.is_empty() {
            errors.push(composite(format!(
                "{} must not validate the schema (not)",
                quote(name)
            )));
        }
    }
}

fn composite(message: String) -> OpenApiError {
    OpenApiError {
        name: String::new(),
        code: Code::Composite,
        value: None,
        message,
    }
}

pub(super) fn other(name: &str, value: Value, message: String) -> OpenApiError {
    OpenApiError {
        name: name.to_string(),
        code: Code::Other,
        value: Some(value),
        message,
    }
}
