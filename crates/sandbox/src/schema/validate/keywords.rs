//! The per-keyword validators of kube-openapi: strings, formats, numbers, arrays, enums and
//! objects, with its messages.

use serde_json::Value;

use super::{Code, OpenApiError, other, validate_node};
use crate::schema::correlation::Correlation;
use crate::schema::formats;
use crate::schema::go_text::{format_float, quote};
use crate::schema::node::{AdditionalProperties, Node};

pub(super) fn validate_string(node: &Node, text: &str, name: &str, errors: &mut Vec<OpenApiError>) {
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
        errors.push(other(
            name,
            Value::String(text.to_string()),
            format!("{name} in body should be at least {min} chars long"),
        ));
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
                format!(
                    "{name} in body should match '{}, but pattern is invalid: {error}'",
                    pattern.source
                ),
            )),
        }
    }
}

pub(super) fn validate_format(node: &Node, text: &str, name: &str, errors: &mut Vec<OpenApiError>) {
    let format = formats::effective_format(&node.format);
    if format.is_empty() {
        return;
    }
    if !formats::is_valid(format, text) {
        errors.push(OpenApiError {
            name: name.to_string(),
            code: Code::InvalidType,
            value: Some(Value::String(text.to_string())),
            message: format!(
                "{name} in body must be of type {}: {}",
                node.format,
                quote(text)
            ),
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

pub(super) fn validate_number(
    node: &Node,
    number: &serde_json::Number,
    name: &str,
    errors: &mut Vec<OpenApiError>,
) {
    let data = Value::Number(number.clone());
    let decoded = decode(number);
    if let Some(factor) = node.multiple_of {
        match decoded {
            Decoded::Int(value) => {
                let factor = factor as i64;
                if factor <= 0 {
                    errors.push(other(
                        name,
                        Value::from(factor),
                        format!("factor MultipleOf declared for {name} must be positive: {factor}"),
                    ));
                } else if value % factor != 0 {
                    errors.push(other(
                        name,
                        data.clone(),
                        format!("{name} in body should be a multiple of {factor}"),
                    ));
                }
            }
            Decoded::Float(value) => {
                if factor <= 0.0 {
                    errors.push(other(
                        name,
                        data.clone(),
                        format!(
                            "factor MultipleOf declared for {name} must be positive: {}",
                            format_float(factor)
                        ),
                    ));
                } else {
                    let quotient = if factor < 1.0 {
                        1.0 / factor * value
                    } else {
                        value / factor
                    };
                    if quotient.fract() != 0.0 || !quotient.is_finite() {
                        errors.push(other(
                            name,
                            data.clone(),
                            format!(
                                "{name} in body should be a multiple of {}",
                                format_float(factor)
                            ),
                        ));
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
                (
                    if exclusive {
                        value <= bound
                    } else {
                        value < bound
                    },
                    bound.to_string(),
                )
            }
            Decoded::Float(value) => (
                if exclusive {
                    value <= minimum
                } else {
                    value < minimum
                },
                format_float(minimum),
            ),
        };
        if fails {
            let relation = if exclusive {
                "greater than"
            } else {
                "greater than or equal to"
            };
            errors.push(other(
                name,
                data.clone(),
                format!("{name} in body should be {relation} {bound}"),
            ));
        }
    }
    if let Some(maximum) = node.maximum {
        let exclusive = node.exclusive_maximum;
        let (fails, bound) = match decoded {
            Decoded::Int(value) => {
                let bound = maximum as i64;
                (
                    if exclusive {
                        value >= bound
                    } else {
                        value > bound
                    },
                    bound.to_string(),
                )
            }
            Decoded::Float(value) => (
                if exclusive {
                    value >= maximum
                } else {
                    value > maximum
                },
                format_float(maximum),
            ),
        };
        if fails {
            let relation = if exclusive {
                "less than"
            } else {
                "less than or equal to"
            };
            errors.push(other(
                name,
                data,
                format!("{name} in body should be {relation} {bound}"),
            ));
        }
    }
}

pub(super) fn validate_array(
    node: &Node,
    items: &[Value],
    name: &str,
    correlation: &Correlation<'_>,
    errors: &mut Vec<OpenApiError>,
) {
    if let Some(item_schema) = &node.items {
        for (index, item) in items.iter().enumerate() {
            let child = correlation.index(node, index);
            validate_node(
                item_schema,
                item,
                &format!("{name}[{index}]"),
                &child,
                errors,
            );
        }
    }
    let size = items.len() as i64;
    if let Some(min) = node.min_items
        && size < min
    {
        errors.push(other(
            name,
            Value::from(size),
            format!("{name} in body should have at least {min} items"),
        ));
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
        let duplicated = items
            .iter()
            .enumerate()
            .any(|(index, item)| items[..index].contains(item));
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

pub(super) fn validate_enum(
    node: &Node,
    value: &Value,
    name: &str,
    errors: &mut Vec<OpenApiError>,
) {
    let Some(allowed) = &node.enum_values else {
        return;
    };
    if allowed.is_empty()
        || (!value.is_null()
            && allowed
                .iter()
                .any(|candidate| enum_matches(value, candidate)))
    {
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

pub(super) fn validate_object(
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
        errors.push(other(
            name,
            Value::from(size),
            format!("{name} in body should have at least {min} properties"),
        ));
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
            for key in fields
                .keys()
                .filter(|key| !node.properties.contains_key(*key))
            {
                errors.push(OpenApiError {
                    name: name.to_string(),
                    code: Code::Other,
                    value: Some(Value::String(key.clone())),
                    message: format!("{name}.{key} in body is a forbidden property"),
                });
            }
        }
        Some(AdditionalProperties::Schema(schema)) => {
            for (key, child) in fields
                .iter()
                .filter(|(key, _)| !node.properties.contains_key(*key))
            {
                let child_correlation = correlation.key(node, key);
                validate_node(
                    schema,
                    child,
                    &format!("{name}.{key}"),
                    &child_correlation,
                    errors,
                );
            }
        }
        _ => {}
    }
    for (property, schema) in &node.properties {
        if let Some(child) = fields.get(property) {
            let child_name = if name.is_empty() {
                property.clone()
            } else {
                format!("{name}.{property}")
            };
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
