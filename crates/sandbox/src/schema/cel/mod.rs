//! `x-kubernetes-validations`: CEL rules compiled when a CRD is registered and evaluated on every
//! write, through the `cel` interpreter with the Kubernetes libraries of `kube-cel`.
//!
//! The interpreter has no type checker, so [`check`] adds the static checks that matter for a
//! CRD author: unknown functions, unknown variables and fields the schema does not declare fail
//! at registration, like the API server's compiler, instead of passing silently at runtime.

mod check;
mod eval;
mod values;

use std::sync::Arc;

use kube_cel::cel::Program;
use serde_json::Value;

pub(crate) use eval::evaluate;
pub(crate) use values::untyped;

use super::errors::FieldError;
use super::node::Node;

/// One entry of `x-kubernetes-validations`.
#[derive(Debug, Clone)]
pub(crate) struct ValidationRule {
    pub(crate) rule: String,
    pub(crate) message: String,
    pub(crate) message_expression: String,
    pub(crate) reason: Option<String>,
    pub(crate) field_path: String,
    pub(crate) optional_old_self: Option<bool>,
    /// The rule as written, for error values.
    pub(crate) raw: Value,
    pub(crate) compiled: Option<Arc<CompiledRule>>,
}

/// The programs of a rule that compiled.
#[derive(Debug)]
pub(crate) struct CompiledRule {
    pub(crate) program: Program,
    pub(crate) message_program: Option<Program>,
    pub(crate) uses_old_self: bool,
    /// `fieldPath` as a field path suffix (`replicas`, `ports[http]`), empty when unset.
    pub(crate) normalized_field_path: String,
}

impl ValidationRule {
    pub(crate) fn parse(raw: &Value) -> ValidationRule {
        let text = |key: &str| {
            raw.get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        ValidationRule {
            rule: text("rule"),
            message: text("message"),
            message_expression: text("messageExpression"),
            reason: raw
                .get("reason")
                .and_then(Value::as_str)
                .map(str::to_string),
            field_path: text("fieldPath"),
            optional_old_self: raw.get("optionalOldSelf").and_then(Value::as_bool),
            raw: raw.clone(),
            compiled: None,
        }
    }

    /// apiextensions' `ruleErrorString`: the message, else the rule, trimmed.
    pub(crate) fn error_string(&self) -> String {
        if self.message.is_empty() {
            self.rule.trim().to_string()
        } else {
            self.message.trim().to_string()
        }
    }

    /// apiextensions' `ruleMessageOrDefault`.
    pub(crate) fn message_or_default(&self) -> String {
        if self.message.is_empty() {
            format!("failed rule: {}", self.error_string())
        } else {
            self.message.trim().to_string()
        }
    }
}

/// Where a node sits, for the checks that depend on it.
pub(crate) struct RuleContext<'a> {
    /// The schema path of the node (`openAPIV3Schema.properties[spec]`).
    pub(crate) path: &'a str,
    /// Set when the node is inside a list or map whose items do not correlate: the path of
    /// that list, for the "oldSelf cannot be used" error.
    pub(crate) uncorrelatable_within: Option<&'a str>,
    /// The root of a resource (or of an embedded resource): `self` also has `apiVersion`,
    /// `kind` and `metadata`.
    pub(crate) resource_root: bool,
}

/// Compiles the rules of `node` in place and returns the errors the API server would report for
/// a CRD carrying them. Rules whose checks fail stay uncompiled.
pub(crate) fn compile_rules(node: &mut Node, context: &RuleContext<'_>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let typed = node.clone();
    for (index, rule) in node.rules.iter_mut().enumerate() {
        let rule_path = format!("{}.x-kubernetes-validations[{index}]", context.path);
        match compile_rule(rule, &typed, context) {
            Ok(compiled) => {
                if compiled.uses_old_self {
                    if let Some(within) = context.uncorrelatable_within {
                        errors.push(FieldError::invalid(
                            format!("{rule_path}.rule"),
                            Value::String(rule.rule.clone()),
                            format!("oldSelf cannot be used on the uncorrelatable portion of the schema within {within}"),
                        ));
                        continue;
                    }
                } else if let Some(optional) = rule.optional_old_self {
                    errors.push(FieldError::invalid(
                        format!("{rule_path}.optionalOldSelf"),
                        Value::Bool(optional),
                        "may not be set if oldSelf is not used in rule",
                    ));
                    continue;
                }
                rule.compiled = Some(Arc::new(compiled));
            }
            Err(RuleError::Rule(detail)) => errors.push(FieldError::invalid(
                format!("{rule_path}.rule"),
                rule.raw.clone(),
                detail,
            )),
            Err(RuleError::MessageExpression(detail)) => {
                errors.push(FieldError::invalid(
                    format!("{rule_path}.messageExpression"),
                    rule.raw.clone(),
                    detail,
                ));
            }
        }
    }
    errors
}

enum RuleError {
    Rule(String),
    MessageExpression(String),
}

fn compile_rule(
    rule: &ValidationRule,
    node: &Node,
    context: &RuleContext<'_>,
) -> Result<CompiledRule, RuleError> {
    let program = Program::compile(&rule.rule)
        .map_err(|error| RuleError::Rule(format!("compilation failed: {error}")))?;
    check::check_expression(
        &rule.rule,
        program.expression(),
        node,
        context.resource_root,
        true,
    )
    .map_err(|issue| RuleError::Rule(format!("compilation failed: {issue}")))?;
    let uses_old_self = program.references().has_variable("oldSelf");
    let message_program = if rule.message_expression.trim().is_empty() {
        None
    } else {
        let message_program = Program::compile(&rule.message_expression).map_err(|error| {
            RuleError::MessageExpression(format!("messageExpression compilation failed: {error}"))
        })?;
        check::check_expression(
            &rule.message_expression,
            message_program.expression(),
            node,
            context.resource_root,
            false,
        )
        .map_err(|issue| {
            RuleError::MessageExpression(format!("messageExpression compilation failed: {issue}"))
        })?;
        Some(message_program)
    };
    let normalized_field_path = if rule.field_path.is_empty() {
        String::new()
    } else {
        normalize_field_path(&rule.field_path, node).unwrap_or_default()
    };
    Ok(CompiledRule {
        program,
        message_program,
        uses_old_self,
        normalized_field_path,
    })
}

/// apiextensions' `ValidFieldPath`: `.a.b` and `['a.b']` steps through declared properties and
/// map keys, returned in field path form (`a.b`, `a[a.b]`); `None` when it does not resolve.
pub(crate) fn normalize_field_path(path: &str, node: &Node) -> Option<String> {
    let mut current = node;
    let mut normalized = String::new();
    let mut rest = path;
    while !rest.is_empty() {
        let (name, remaining) = if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            (after[..end].to_string(), &after[end..])
        } else if let Some(after) = rest.strip_prefix("['") {
            let end = find_closing_quote(after)?;
            let name = unescape_single_quoted(&after[..end])?;
            let after_quote = &after[end + 1..];
            (name, after_quote.strip_prefix(']')?)
        } else {
            return None;
        };
        if name.is_empty() {
            return None;
        }
        if current.properties.contains_key(&name) {
            if !normalized.is_empty() {
                normalized.push('.');
            }
            normalized.push_str(&name);
            current = current.properties.get(&name)?;
        } else if let Some(element) = current.additional_schema() {
            normalized.push_str(&format!("[{name}]"));
            current = element;
        } else {
            return None;
        }
        rest = remaining;
    }
    Some(normalized)
}

fn find_closing_quote(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    (0..bytes.len())
        .find(|&index| bytes[index] == b'\'' && (index == 0 || bytes[index - 1] != b'\\'))
}

fn unescape_single_quoted(text: &str) -> Option<String> {
    let mut unescaped = String::new();
    let mut characters = text.chars();
    while let Some(character) = characters.next() {
        if character != '\\' {
            unescaped.push(character);
            continue;
        }
        unescaped.push(match characters.next()? {
            'a' => '\u{07}',
            'b' => '\u{08}',
            'f' => '\u{0c}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'v' => '\u{0b}',
            '\'' => '\'',
            '\\' => '\\',
            _ => return None,
        });
    }
    Some(unescaped)
}
