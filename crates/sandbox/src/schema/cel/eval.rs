//! Evaluating `x-kubernetes-validations` over an object, as apiextensions' CEL `Validator` does:
//! rules run at every non-null value their node describes, transition rules only where an old
//! value correlates, and errors of unchanged values are ratcheted (dropped) unless the rule
//! reads `oldSelf`.

use std::sync::Arc;

use kube_cel::KubeCelExt;
use kube_cel::cel::objects::OptionalValue;
use kube_cel::cel::{Context, ExecutionError, Value as CelValue};
use serde_json::Value;

use super::values::to_cel;
use super::{CompiledRule, ValidationRule};
use crate::schema::correlation::find_by_keys;
use crate::schema::errors::FieldError;
use crate::schema::node::{ListType, Node};

/// Longest message a `messageExpression` may produce (apiserver's `MaxEvaluatedMessageExpressionSizeBytes`).
const MAX_MESSAGE_BYTES: usize = 5 * 1024;

struct Walk<'c> {
    context: Context<'c>,
    errors: Vec<FieldError>,
}

/// Evaluates every rule under `root` against `value` (and `old` on update). `root_path` is the
/// field path of `value`: `<nil>` for a whole object, as the API server prints it.
pub(crate) fn evaluate(
    root: &Node,
    value: &Value,
    old: Option<&Value>,
    root_path: &str,
    resource_root: bool,
) -> Vec<FieldError> {
    let mut walk = Walk {
        context: Context::default().with_all(),
        errors: Vec::new(),
    };
    walk.node(
        root,
        root_path,
        value,
        old,
        Ratchet { unchanged: false },
        resource_root,
    );
    walk.errors
}

/// Whether errors here are ratcheted: the nearest correlated value did not change.
#[derive(Clone, Copy)]
struct Ratchet {
    unchanged: bool,
}

fn child_path(path: &str, name: &str) -> String {
    if path == "<nil>" {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

fn keyed_path(path: &str, key: &str) -> String {
    if path == "<nil>" {
        format!("[{key}]")
    } else {
        format!("{path}[{key}]")
    }
}

impl Walk<'_> {
    fn node(
        &mut self,
        node: &Node,
        path: &str,
        value: &Value,
        old: Option<&Value>,
        parent: Ratchet,
        resource_root: bool,
    ) {
        if value.is_null() {
            return;
        }
        let ratchet = match old {
            Some(old) => Ratchet {
                unchanged: old == value,
            },
            None => parent,
        };
        self.rules(node, path, value, old, ratchet, resource_root);
        for branch in &node.all_of {
            self.node(branch, path, value, old, ratchet, resource_root);
        }
        match value {
            Value::Array(items) => {
                let Some(item_node) = node.items.as_deref() else {
                    return;
                };
                let old_items = old.and_then(Value::as_array);
                for (index, item) in items.iter().enumerate() {
                    let old_item = match (node.list_semantics(), old_items) {
                        (ListType::Map, Some(old_items)) => {
                            find_by_keys(&node.list_map_keys, old_items, item)
                        }
                        _ => None,
                    };
                    let item_path = format!("{path}[{index}]");
                    self.node(
                        item_node,
                        &item_path,
                        item,
                        old_item,
                        ratchet,
                        item_node.embedded_resource,
                    );
                }
            }
            Value::Object(fields) => {
                let old_fields = old.and_then(Value::as_object);
                if let Some(element) = node.additional_schema() {
                    for (key, child) in fields {
                        let old_child = old_fields.and_then(|old| old.get(key));
                        self.node(
                            element,
                            &keyed_path(path, key),
                            child,
                            old_child,
                            ratchet,
                            element.embedded_resource,
                        );
                    }
                }
                for (name, child) in fields {
                    if let Some(property) = node.properties.get(name) {
                        let old_child = old_fields.and_then(|old| old.get(name));
                        self.node(
                            property,
                            &child_path(path, name),
                            child,
                            old_child,
                            ratchet,
                            property.embedded_resource,
                        );
                    }
                }
            }
            _ => {}
        }
    }

    fn rules(
        &mut self,
        node: &Node,
        path: &str,
        value: &Value,
        old: Option<&Value>,
        ratchet: Ratchet,
        resource_root: bool,
    ) {
        if node.rules.is_empty() {
            return;
        }
        let self_value = to_cel(value, Some(node), resource_root);
        let old_value = old.map(|old| to_cel(old, Some(node), resource_root));
        let type_name = Value::String(node.type_for_messages().to_string());
        for rule in &node.rules {
            let Some(compiled) = &rule.compiled else {
                continue;
            };
            let optional_old_self = rule.optional_old_self == Some(true);
            if compiled.uses_old_self && old_value.is_none() && !optional_old_self {
                continue;
            }
            let mut scope = self.context.new_inner_scope();
            scope.add_variable_from_value("self", self_value.clone());
            let old_binding = if optional_old_self {
                let optional = match &old_value {
                    Some(old) => OptionalValue::of(old.clone()),
                    None => OptionalValue::none(),
                };
                Some(CelValue::Opaque(Arc::new(optional)))
            } else {
                old_value.clone()
            };
            if let Some(old_binding) = old_binding {
                scope.add_variable_from_value("oldSelf", old_binding);
            }
            let outcome = compiled.program.execute(&scope);
            let error = match outcome {
                Ok(CelValue::Bool(true)) => continue,
                Ok(CelValue::Bool(false)) => {
                    failed_rule_error(rule, compiled, path, &type_name, &scope)
                }
                Ok(other) => FieldError::invalid(
                    path,
                    type_name.clone(),
                    format!(
                        "rule evaluated to {:?} instead of a bool evaluating rule: {}",
                        other.type_of(),
                        rule.error_string()
                    ),
                ),
                Err(error) => runtime_error(&error, rule, path, &type_name),
            };
            if !compiled.uses_old_self && ratchet.unchanged {
                continue;
            }
            self.errors.push(error);
        }
    }
}

fn failed_rule_error(
    rule: &ValidationRule,
    compiled: &CompiledRule,
    path: &str,
    type_name: &Value,
    scope: &Context<'_>,
) -> FieldError {
    let field = if compiled.normalized_field_path.is_empty() {
        path.to_string()
    } else if compiled.normalized_field_path.starts_with('[') {
        format!(
            "{}{}",
            if path == "<nil>" { "" } else { path },
            compiled.normalized_field_path
        )
    } else {
        child_path(path, &compiled.normalized_field_path)
    };
    let detail = compiled
        .message_program
        .as_ref()
        .and_then(|program| match program.execute(scope) {
            Ok(CelValue::String(text)) => {
                let trimmed = text.trim();
                let usable = !trimmed.is_empty()
                    && trimmed.len() <= MAX_MESSAGE_BYTES
                    && !trimmed.contains('\n');
                usable.then(|| trimmed.to_string())
            }
            _ => None,
        })
        .unwrap_or_else(|| rule.message_or_default());
    match rule.reason.as_deref() {
        Some("FieldValueForbidden") => FieldError::forbidden(field, detail),
        Some("FieldValueRequired") => FieldError::required(field, detail),
        Some("FieldValueDuplicate") => FieldError::duplicate(field, type_name.clone()),
        _ => FieldError::invalid(field, type_name.clone(), detail),
    }
}

/// A runtime failure in cel-go's words, wrapped as the API server does.
fn runtime_error(
    error: &ExecutionError,
    rule: &ValidationRule,
    path: &str,
    type_name: &Value,
) -> FieldError {
    let rule_text = rule.error_string();
    let text = match error {
        ExecutionError::NoSuchOverload
        | ExecutionError::UnsupportedBinaryOperator(..)
        | ExecutionError::UnsupportedUnaryOperator(..)
        | ExecutionError::ValuesNotComparable(..)
        | ExecutionError::UnexpectedType { .. }
        | ExecutionError::UnsupportedTargetType { .. }
        | ExecutionError::NotSupportedAsMethod { .. } => {
            return FieldError::invalid(
                path,
                type_name.clone(),
                format!(
                    "'no such overload': call arguments did not match a supported operator, function or macro signature for rule: {rule_text}"
                ),
            );
        }
        ExecutionError::NoSuchKey(key) => format!("no such key: {key}"),
        ExecutionError::IndexOutOfBounds(index) => {
            format!("index out of bounds: {}", cel_scalar(index))
        }
        ExecutionError::DivisionByZero(_) => "division by zero".to_string(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".to_string(),
        ExecutionError::Overflow(..) => "integer overflow".to_string(),
        ExecutionError::FunctionError { message, .. } => message.clone(),
        other => other.to_string(),
    };
    FieldError::invalid(
        path,
        type_name.clone(),
        format!("{text} evaluating rule: {rule_text}"),
    )
}

fn cel_scalar(value: &CelValue) -> String {
    match value {
        CelValue::Int(integer) => integer.to_string(),
        CelValue::UInt(unsigned) => unsigned.to_string(),
        CelValue::String(text) => text.to_string(),
        other => format!("{other:?}"),
    }
}
