//! The checks kube-apiserver runs on a CRD's `openAPIV3Schema` beyond structurality
//! (`ValidateCustomResourceDefinitionOpenAPISchema`): unsupported keywords, list and map types,
//! `x-kubernetes-validations` entries, and then compiling the CEL rules of every node whose
//! subtree has no schema errors.

use serde_json::Value;

use super::cel::{self, RuleContext};
use super::errors::FieldError;
use super::node::{AdditionalProperties, Node};

const OPENAPI_TYPES: &[&str] = &["array", "boolean", "integer", "number", "object", "string"];
const VALIDATION_REASONS: &[&str] = &[
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];

/// How the parent constrains a node.
#[derive(Clone, Default)]
struct Scope {
    is_root: bool,
    inside_resource_meta: bool,
    forbidden_defaults: Option<String>,
    uncorrelatable_within: Option<String>,
}

/// Schema errors and CEL errors, kept apart as the API server does (CEL errors come last and
/// are only computed where the schema itself is fine).
#[derive(Default)]
pub(crate) struct SchemaErrors {
    pub(crate) schema: Vec<FieldError>,
    pub(crate) cel: Vec<FieldError>,
}

impl SchemaErrors {
    fn append(&mut self, other: SchemaErrors) {
        self.schema.extend(other.schema);
        self.cel.extend(other.cel);
    }
}

/// Checks the root and compiles every CEL rule in place.
pub(crate) fn check_and_compile(root: &mut Node, path: &str) -> SchemaErrors {
    check_node(
        root,
        path,
        &Scope {
            is_root: true,
            ..Scope::default()
        },
        true,
    )
}

fn check_node(node: &mut Node, path: &str, scope: &Scope, compile_cel: bool) -> SchemaErrors {
    let mut errors = SchemaErrors::default();
    standard_checks(node, path, scope, &mut errors.schema);
    if node.unique_items {
        errors.schema.push(FieldError::forbidden(
            format!("{path}.uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
    if let Some(additional) = &mut node.additional_properties {
        let mutually_exclusive = !node.properties.is_empty()
            && !matches!(additional, AdditionalProperties::Allowed(true));
        if mutually_exclusive {
            errors.schema.push(FieldError::forbidden(
                format!("{path}.additionalProperties"),
                "additionalProperties and properties are mutual exclusive",
            ));
        }
        if let AdditionalProperties::Schema(schema) = additional {
            let mut child_scope = Scope {
                is_root: false,
                ..scope.clone()
            };
            if scope.inside_resource_meta {
                child_scope.forbidden_defaults =
                    Some("inside additionalProperties applying to object metadata".into());
            }
            errors.append(check_node(
                schema,
                &format!("{path}.additionalProperties"),
                &child_scope,
                compile_cel,
            ));
        }
    }
    let is_root = scope.is_root;
    let embedded = node.embedded_resource;
    for (name, property) in node.properties.iter_mut() {
        let mut child_scope = Scope {
            is_root: false,
            ..scope.clone()
        };
        if (is_root || embedded) && matches!(name.as_str(), "metadata" | "kind" | "apiVersion") {
            child_scope.inside_resource_meta = true;
            if is_root {
                child_scope.forbidden_defaults = Some(format!("in top-level {name}"));
            }
        }
        errors.append(check_node(
            property,
            &format!("{path}.properties[{name}]"),
            &child_scope,
            compile_cel,
        ));
    }
    let plain = Scope {
        is_root: false,
        ..scope.clone()
    };
    if let Some(not) = &mut node.not {
        errors.append(check_node(not, &format!("{path}.not"), &plain, false));
    }
    for (keyword, branches) in [
        ("allOf", &mut node.all_of),
        ("oneOf", &mut node.one_of),
        ("anyOf", &mut node.any_of),
    ] {
        for (index, branch) in branches.iter_mut().enumerate() {
            errors.append(check_node(
                branch,
                &format!("{path}.{keyword}[{index}]"),
                &plain,
                false,
            ));
        }
    }
    let list_type = node.list_type.clone();
    if let Some(items) = &mut node.items {
        let mut child_scope = plain.clone();
        if list_type.as_deref() != Some("map") {
            child_scope.uncorrelatable_within = Some(path.to_string());
        }
        errors.append(check_node(
            items,
            &format!("{path}.items"),
            &child_scope,
            compile_cel,
        ));
    }
    if node.preserve_unknown_fields == Some(false) {
        errors.schema.push(FieldError::invalid(
            format!("{path}.x-kubernetes-preserve-unknown-fields"),
            false.into(),
            "must be true or undefined",
        ));
    }
    list_and_map_checks(node, path, &mut errors.schema);
    rule_field_checks(node, path, &mut errors.schema);
    if compile_cel && errors.schema.is_empty() && !node.rules.is_empty() {
        let context = RuleContext {
            path,
            uncorrelatable_within: scope.uncorrelatable_within.as_deref(),
            resource_root: is_root || embedded,
        };
        errors.cel.extend(cel::compile_rules(node, &context));
    }
    errors
}

/// apiextensions' `specStandardValidatorV3.validate`.
fn standard_checks(node: &Node, path: &str, scope: &Scope, errors: &mut Vec<FieldError>) {
    if !node.type_name.is_empty() && !OPENAPI_TYPES.contains(&node.type_name.as_str()) {
        let supported: Vec<Value> = OPENAPI_TYPES
            .iter()
            .map(|name| Value::from(*name))
            .collect();
        errors.push(FieldError::not_supported(
            format!("{path}.type"),
            node.type_name.clone().into(),
            &supported,
        ));
    }
    if node.default.is_some()
        && let Some(reason) = &scope.forbidden_defaults
    {
        errors.push(FieldError::forbidden(
            format!("{path}.default"),
            format!("must not be set {reason}"),
        ));
    }
    for (key, _) in &node.unsupported {
        let detail = match key.as_str() {
            "id" => "id is not supported",
            "additionalItems" => "additionalItems is not supported",
            "patternProperties" => "patternProperties is not supported",
            "definitions" => "definitions is not supported",
            "dependencies" => "dependencies is not supported",
            "$ref" => "$ref is not supported",
            "items" => "items must be a schema object and not an array",
            _ => continue,
        };
        errors.push(FieldError::forbidden(format!("{path}.{key}"), detail));
    }
    if node.type_name == "null" {
        errors.push(FieldError::forbidden(
            format!("{path}.type"),
            "type cannot be set to null, use nullable as an alternative",
        ));
    }
    if scope.inside_resource_meta && node.embedded_resource {
        errors.push(FieldError::forbidden(
            format!("{path}.x-kubernetes-embedded-resource"),
            "must not be used inside of resource meta",
        ));
    }
}

fn list_and_map_checks(node: &Node, path: &str, errors: &mut Vec<FieldError>) {
    if let Some(map_type) = &node.map_type {
        if node.type_name != "object" {
            errors.push(type_must_be(
                path,
                &node.type_name,
                "must be object if x-kubernetes-map-type is specified",
            ));
        }
        if map_type != "atomic" && map_type != "granular" {
            errors.push(FieldError::not_supported(
                format!("{path}.x-kubernetes-map-type"),
                map_type.clone().into(),
                &["atomic".into(), "granular".into()],
            ));
        }
    }
    if let Some(list_type) = &node.list_type {
        if node.type_name != "array" {
            errors.push(type_must_be(
                path,
                &node.type_name,
                "must be array if x-kubernetes-list-type is specified",
            ));
        } else if list_type == "set"
            && let Some(items) = &node.items
        {
            if items.type_name == "array"
                && items
                    .list_type
                    .as_deref()
                    .is_some_and(|inner| inner != "atomic")
            {
                errors.push(FieldError::invalid(
                    format!("{path}.items.x-kubernetes-list-type"),
                    items.list_type.clone().into(),
                    "must be atomic as item of a list with x-kubernetes-list-type=set",
                ));
            }
            if items.type_name == "object" && items.map_type.as_deref() != Some("atomic") {
                errors.push(FieldError::invalid(
                    format!("{path}.items.x-kubernetes-map-type"),
                    Value::Null,
                    "must be atomic as item of a list with x-kubernetes-list-type=set",
                ));
            }
        }
        if !matches!(list_type.as_str(), "atomic" | "set" | "map") {
            errors.push(FieldError::not_supported(
                format!("{path}.x-kubernetes-list-type"),
                list_type.clone().into(),
                &["atomic".into(), "set".into(), "map".into()],
            ));
        }
    }
    if !node.list_map_keys.is_empty() {
        match node.list_type.as_deref() {
            None => errors.push(FieldError::required(
                format!("{path}.x-kubernetes-list-type"),
                "must be map if x-kubernetes-list-map-keys is non-empty",
            )),
            Some("map") => {}
            Some(other) => errors.push(FieldError::invalid(
                format!("{path}.x-kubernetes-list-type"),
                other.to_string().into(),
                "must be map if x-kubernetes-list-map-keys is non-empty",
            )),
        }
    }
    if node.list_type.as_deref() == Some("map") {
        map_list_checks(node, path, errors);
    }
    if matches!(node.list_type.as_deref(), Some("set" | "map"))
        && let Some(items) = &node.items
        && items.nullable
    {
        let list_type = node.list_type.as_deref().unwrap_or_default();
        errors.push(FieldError::forbidden(
            format!("{path}.items.nullable"),
            format!("cannot be nullable when x-kubernetes-list-type is {list_type}"),
        ));
    }
}

fn map_list_checks(node: &Node, path: &str, errors: &mut Vec<FieldError>) {
    let keys_value = Value::from(node.list_map_keys.clone());
    if node.list_map_keys.is_empty() {
        errors.push(FieldError::required(
            format!("{path}.x-kubernetes-list-map-keys"),
            "must not be empty if x-kubernetes-list-type is map",
        ));
    }
    let Some(items) = &node.items else {
        errors.push(FieldError::required(
            format!("{path}.items"),
            "must have a schema if x-kubernetes-list-type is map",
        ));
        return;
    };
    if items.type_name != "object" {
        errors.push(FieldError::invalid(
            format!("{path}.items.type"),
            items.type_name.clone().into(),
            "must be object if parent array's x-kubernetes-list-type is map",
        ));
        return;
    }
    let mut seen = Vec::new();
    for key in &node.list_map_keys {
        match items.properties.get(key) {
            Some(property) => {
                if property.type_name == "array" || property.type_name == "object" {
                    errors.push(FieldError::invalid(
                        format!("{path}.items.properties[{key}].type"),
                        items.type_name.clone().into(),
                        "must be a scalar type if parent array's x-kubernetes-list-type is map",
                    ));
                }
                if !items.required.contains(key) && property.default.is_none() {
                    errors.push(FieldError::required(
                        format!("{path}.items.properties[{key}].default"),
                        "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
                    ));
                }
                if property.nullable {
                    errors.push(FieldError::forbidden(
                        format!("{path}.items.properties[{key}].nullable"),
                        "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
                    ));
                }
            }
            None => errors.push(FieldError::invalid(
                format!("{path}.x-kubernetes-list-map-keys"),
                keys_value.clone(),
                "entries must all be names of item properties",
            )),
        }
        if seen.contains(&key) {
            errors.push(FieldError::invalid(
                format!("{path}.x-kubernetes-list-map-keys"),
                keys_value.clone(),
                "must not contain duplicate entries",
            ));
        }
        seen.push(key);
    }
}

fn type_must_be(path: &str, type_name: &str, detail: &str) -> FieldError {
    if type_name.is_empty() {
        FieldError::required(format!("{path}.type"), detail)
    } else {
        FieldError::invalid(format!("{path}.type"), type_name.to_string().into(), detail)
    }
}

/// The shape of each `x-kubernetes-validations` entry.
fn rule_field_checks(node: &Node, path: &str, errors: &mut Vec<FieldError>) {
    for (index, rule) in node.rules.iter().enumerate() {
        let rule_path = format!("{path}.x-kubernetes-validations[{index}]");
        let trimmed_rule = rule.rule.trim();
        let trimmed_message = rule.message.trim();
        if trimmed_rule.is_empty() {
            errors.push(FieldError::required(
                format!("{rule_path}.rule"),
                "rule is not specified",
            ));
        } else if !rule.message.is_empty() && trimmed_message.is_empty() {
            errors.push(FieldError::invalid(
                format!("{rule_path}.message"),
                rule.message.clone().into(),
                "message must be non-empty if specified",
            ));
        } else if trimmed_message.contains('\n') {
            errors.push(FieldError::invalid(
                format!("{rule_path}.message"),
                rule.message.clone().into(),
                "message must not contain line breaks",
            ));
        } else if trimmed_rule.contains('\n') && trimmed_message.is_empty() {
            errors.push(FieldError::required(
                format!("{rule_path}.message"),
                "message must be specified if rule contains line breaks",
            ));
        }
        if !rule.message_expression.is_empty() && rule.message_expression.trim().is_empty() {
            errors.push(FieldError::required(
                format!("{rule_path}.messageExpression"),
                "messageExpression must be non-empty if specified",
            ));
        }
        if let Some(reason) = &rule.reason
            && !VALIDATION_REASONS.contains(&reason.as_str())
        {
            let supported: Vec<Value> = VALIDATION_REASONS
                .iter()
                .map(|reason| Value::from(*reason))
                .collect();
            errors.push(FieldError::not_supported(
                format!("{rule_path}.reason"),
                reason.clone().into(),
                &supported,
            ));
        }
        if !rule.field_path.is_empty() {
            let field_path_field = format!("{rule_path}.fieldPath");
            if rule.field_path.trim().is_empty() {
                errors.push(FieldError::invalid(
                    field_path_field,
                    rule.field_path.clone().into(),
                    "fieldPath must be non-empty if specified",
                ));
            } else if rule.field_path.contains('\n') {
                errors.push(FieldError::invalid(
                    field_path_field,
                    rule.field_path.clone().into(),
                    "fieldPath must not contain line breaks",
                ));
            } else if cel::normalize_field_path(&rule.field_path, node).is_none() {
                errors.push(FieldError::invalid(
                    field_path_field,
                    rule.field_path.clone().into(),
                    "fieldPath must be a valid path",
                ));
            }
        }
    }
}
