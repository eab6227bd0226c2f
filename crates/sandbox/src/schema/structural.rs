//! Structural schema invariants (apiextensions' `ValidateStructural`): every field has a type,
//! value validations under `anyOf`/`allOf`/`oneOf`/`not` only restrict what the structural part
//! already declares, metadata at the root may only restrict `name` and `generateName`.
//!
//! Errors are sorted by their text, as the API server sorts them.

use super::errors::FieldError;
use super::node::{AdditionalProperties, Node};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Item,
    Field,
}

/// All structural violations of the schema rooted at `root`, whose path is `path`.
pub(crate) fn validate_structural(root: &Node, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    invariants(root, Level::Root, path, &mut errors);
    completeness(root, path, &mut errors);
    errors.sort_by_key(FieldError::message);
    errors
}

fn invariants(node: &Node, level: Level, path: &str, errors: &mut Vec<FieldError>) {
    if node.type_name == "array" && node.items.is_none() {
        errors.push(FieldError::required(
            format!("{path}.items"),
            "must be specified",
        ));
    }
    if let Some(items) = &node.items {
        invariants(items, Level::Item, &format!("{path}.items"), errors);
    }
    for (name, property) in &node.properties {
        invariants(
            property,
            Level::Field,
            &format!("{path}.properties[{name}]"),
            errors,
        );
    }
    if let Some(additional) = &node.additional_properties {
        if level == Level::Root {
            errors.push(FieldError::forbidden(
                format!("{path}.additionalProperties"),
                "must not be used at the root",
            ));
        }
        if let AdditionalProperties::Schema(schema) = additional {
            invariants(
                schema,
                Level::Field,
                &format!("{path}.additionalProperties"),
                errors,
            );
        }
    }
    if node.int_or_string && node.preserves_unknown_fields() {
        errors.push(FieldError::invalid(
            format!("{path}.x-kubernetes-preserve-unknown-fields"),
            true.into(),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if node.int_or_string && node.embedded_resource {
        errors.push(FieldError::invalid(
            format!("{path}.x-kubernetes-embedded-resource"),
            true.into(),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    let skip_any_of = is_int_or_string_any_of(&node.any_of);
    let skip_first_all_of_any_of = node
        .all_of
        .first()
        .is_some_and(|first| is_int_or_string_any_of(&first.any_of));
    value_validation(node, skip_any_of, skip_first_all_of_any_of, path, errors);

    let check_metadata = level == Level::Root || node.embedded_resource;
    if node.embedded_resource && node.type_name != "object" {
        let detail = "must be object if x-kubernetes-embedded-resource is true";
        errors.push(type_error(path, &node.type_name, detail));
    } else if node.type_name.is_empty() && !node.int_or_string && !node.preserves_unknown_fields() {
        let detail = match level {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        errors.push(FieldError::required(format!("{path}.type"), detail));
    }
    if node.embedded_resource && node.additional_properties.is_some() {
        errors.push(FieldError::forbidden(
            format!("{path}.additionalProperties"),
            "must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    if level == Level::Root && !node.type_name.is_empty() && node.type_name != "object" {
        errors.push(FieldError::invalid(
            format!("{path}.type"),
            node.type_name.clone().into(),
            "must be object at the root",
        ));
    }
    for meta_string in ["kind", "apiVersion"] {
        if let Some(property) = node.properties.get(meta_string)
            && check_metadata
            && property.type_name != "string"
        {
            errors.push(FieldError::invalid(
                format!("{path}.properties[{meta_string}].type"),
                property.type_name.clone().into(),
                "must be string",
            ));
        }
    }
    if let Some(metadata) = node.properties.get("metadata") {
        let metadata_path = format!("{path}.properties[metadata]");
        if check_metadata && metadata.type_name != "object" {
            errors.push(FieldError::invalid(
                format!("{metadata_path}.type"),
                metadata.type_name.clone().into(),
                "must be object",
            ));
        }
        if level == Level::Root && !metadata_only_restricts_names(metadata) {
            errors.push(FieldError::forbidden(
                metadata_path,
                "must not specify anything other than name and generateName, but metadata is implicitly specified",
            ));
        }
    }
    if node.embedded_resource && !node.preserves_unknown_fields() && node.properties.is_empty() {
        errors.push(FieldError::required(
            format!("{path}.properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
}

fn type_error(path: &str, type_name: &str, detail: &str) -> FieldError {
    if type_name.is_empty() {
        FieldError::required(format!("{path}.type"), detail)
    } else {
        FieldError::invalid(format!("{path}.type"), type_name.to_string().into(), detail)
    }
}

/// `anyOf: [{type: integer}, {type: string}]` and nothing else in either branch.
fn is_int_or_string_any_of(any_of: &[Node]) -> bool {
    let only_type =
        |node: &Node, expected: &str| node.type_name == expected && node.keys == ["type"];
    any_of.len() == 2 && only_type(&any_of[0], "integer") && only_type(&any_of[1], "string")
}

/// Root metadata may set `type`, `default`, and `name`/`generateName` properties, nothing else.
fn metadata_only_restricts_names(metadata: &Node) -> bool {
    let allowed_keys = ["type", "default", "properties"];
    metadata
        .keys
        .iter()
        .all(|key| allowed_keys.contains(&key.as_str()))
        && metadata
            .properties
            .keys()
            .all(|name| name == "name" || name == "generateName")
}

fn value_validation(
    node: &Node,
    skip_any_of: bool,
    skip_first_all_of_any_of: bool,
    path: &str,
    errors: &mut Vec<FieldError>,
) {
    if !skip_any_of {
        for (index, branch) in node.any_of.iter().enumerate() {
            nested(branch, false, &format!("{path}.anyOf[{index}]"), errors);
        }
    }
    for (index, branch) in node.all_of.iter().enumerate() {
        nested(
            branch,
            skip_first_all_of_any_of && index == 0,
            &format!("{path}.allOf[{index}]"),
            errors,
        );
    }
    for (index, branch) in node.one_of.iter().enumerate() {
        nested(branch, false, &format!("{path}.oneOf[{index}]"), errors);
    }
    if let Some(not) = &node.not {
        nested(not, false, &format!("{path}.not"), errors);
    }
    if let Some(pattern) = &node.pattern
        && let Err(error) = &pattern.regex
    {
        errors.push(FieldError::invalid(
            format!("{path}.pattern"),
            pattern.source.clone().into(),
            format!("must be a valid regular expression, but isn't: {error}"),
        ));
    }
}

/// A schema under a logical junctor: only value validations are allowed.
fn nested(node: &Node, skip_any_of: bool, path: &str, errors: &mut Vec<FieldError>) {
    value_validation(node, skip_any_of, false, path, errors);
    if let Some(items) = &node.items {
        nested(items, false, &format!("{path}.items"), errors);
    }
    for (name, property) in &node.properties {
        nested(
            property,
            false,
            &format!("{path}.properties[{name}]"),
            errors,
        );
    }
    let mut forbid = |field: &str, detail: &str| {
        errors.push(FieldError::forbidden(format!("{path}.{field}"), detail))
    };
    if !node.type_name.is_empty() {
        forbid("type", "must be empty to be structural");
    }
    if node.additional_properties.is_some() {
        forbid("additionalProperties", "must be undefined to be structural");
    }
    if node.default.is_some() {
        forbid("default", "must be undefined to be structural");
    }
    if node.title.as_deref().is_some_and(|title| !title.is_empty()) {
        forbid("title", "must be empty to be structural");
    }
    if node
        .description
        .as_deref()
        .is_some_and(|description| !description.is_empty())
    {
        forbid("description", "must be empty to be structural");
    }
    if node.nullable {
        forbid("nullable", "must be false to be structural");
    }
    if node.preserves_unknown_fields() {
        forbid(
            "x-kubernetes-preserve-unknown-fields",
            "must be false to be structural",
        );
    }
    if node.embedded_resource {
        forbid(
            "x-kubernetes-embedded-resource",
            "must be false to be structural",
        );
    }
    if node.int_or_string {
        forbid(
            "x-kubernetes-int-or-string",
            "must be false to be structural",
        );
    }
    if !node.list_map_keys.is_empty() {
        forbid(
            "x-kubernetes-list-map-keys",
            "must be empty to be structural",
        );
    }
    if node.list_type.is_some() {
        forbid(
            "x-kubernetes-list-type",
            "must be undefined to be structural",
        );
    }
    if node.map_type.is_some() {
        forbid(
            "x-kubernetes-map-type",
            "must be undefined to be structural",
        );
    }
    if !node.rules.is_empty() {
        forbid("x-kubernetes-validations", "must be empty to be structural");
    }
    if node.properties.contains_key("metadata") {
        errors.push(FieldError::forbidden(
            format!("{path}.properties[metadata]"),
            "must not be specified in a nested context",
        ));
    }
}

/// Every property or items restricted under a junctor must exist in the structural part.
fn completeness(node: &Node, path: &str, errors: &mut Vec<FieldError>) {
    value_completeness(node, Some(node), path, path, errors);
}

fn value_completeness(
    validations: &Node,
    structural: Option<&Node>,
    structural_path: &str,
    validation_path: &str,
    errors: &mut Vec<FieldError>,
) {
    let Some(structural) = structural else {
        if has_value_validation(validations) {
            errors.push(FieldError::required(
                structural_path,
                format!("because it is defined in {validation_path}"),
            ));
        }
        return;
    };
    let junctors = validations
        .not
        .iter()
        .map(|not| (not.as_ref(), format!("{validation_path}.not")))
        .chain(
            validations
                .all_of
                .iter()
                .enumerate()
                .map(|(i, node)| (node, format!("{validation_path}.allOf[{i}]"))),
        )
        .chain(
            validations
                .any_of
                .iter()
                .enumerate()
                .map(|(i, node)| (node, format!("{validation_path}.anyOf[{i}]"))),
        )
        .chain(
            validations
                .one_of
                .iter()
                .enumerate()
                .map(|(i, node)| (node, format!("{validation_path}.oneOf[{i}]"))),
        );
    for (branch, branch_path) in junctors {
        nested_completeness(branch, structural, structural_path, &branch_path, errors);
    }
}

fn nested_completeness(
    nested: &Node,
    structural: &Node,
    structural_path: &str,
    nested_path: &str,
    errors: &mut Vec<FieldError>,
) {
    value_completeness(
        nested,
        Some(structural),
        structural_path,
        nested_path,
        errors,
    );
    if let Some(items) = &nested.items {
        let items_path = format!("{nested_path}.items");
        match &structural.items {
            Some(structural_items) => nested_completeness(
                items,
                structural_items,
                &format!("{structural_path}.items"),
                &items_path,
                errors,
            ),
            None => errors.push(FieldError::required(
                format!("{structural_path}.items"),
                format!("because it is defined in {items_path}"),
            )),
        }
    }
    for (name, property) in &nested.properties {
        let property_path = format!("{nested_path}.properties[{name}]");
        match structural.properties.get(name) {
            Some(structural_property) => nested_completeness(
                property,
                structural_property,
                &format!("{structural_path}.properties[{name}]"),
                &property_path,
                errors,
            ),
            None => errors.push(FieldError::required(
                format!("{structural_path}.properties[{name}]"),
                format!("because it is defined in {property_path}"),
            )),
        }
    }
}

fn has_value_validation(node: &Node) -> bool {
    !node.all_of.is_empty()
        || !node.any_of.is_empty()
        || !node.one_of.is_empty()
        || node.not.is_some()
}
