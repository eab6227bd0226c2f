//! Structural schemas of custom resources: validation, defaulting, pruning, CEL, OpenAPI.
//!
//! The API server compiles each CRD version's `openAPIV3Schema` once into a
//! [`StructuralSchema`] and then, on every write of a custom resource, runs
//! [`StructuralSchema::prune`], [`StructuralSchema::apply_defaults`] and
//! [`StructuralSchema::validate`] in that order, as kube-apiserver does (decode and prune,
//! default, validate). Everything here is pure: functions over [`serde_json::Value`].
//!
//! Behaviour follows Kubernetes 1.33 (apiextensions-apiserver v0.33, kube-openapi), including
//! message texts, field paths and `StatusCause` reasons.

pub(crate) mod cel;
mod correlation;
mod crd_schema;
mod defaults;
mod errors;
mod formats;
mod go_text;
mod listtype;
pub(crate) mod node;
pub mod openapi;
mod prune;
mod structural;
mod validate;

pub use errors::{FieldError, FieldErrorKind, SchemaError, invalid_status_message};

use serde_json::Value;

use node::Node;

/// The field path the API server gives a CRD version's schema; [`SchemaError::in_crd_version`]
/// puts `spec.versions[i].schema.` in front.
const SCHEMA_PATH: &str = "openAPIV3Schema";

/// The detail of the error added when structural errors keep CEL rules from running.
const BLOCKED_RULES: &str = "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation";

/// One CRD version's `openAPIV3Schema`, checked to be structural and with its CEL rules compiled.
///
/// Cheap to clone (the compiled rules are shared) and safe to share between threads.
#[derive(Debug, Clone)]
pub struct StructuralSchema {
    raw: Value,
    root: Node,
    /// Whether any node carries `x-kubernetes-validations` (the API server only builds a CEL
    /// validator, and reports blocked rules, when one does).
    has_rules: bool,
}

impl StructuralSchema {
    /// Compiles `spec.versions[i].schema.openAPIV3Schema`.
    ///
    /// Fails for non-structural schemas, for invalid defaults and for CEL rules that do not
    /// compile or call a function we do not provide, with the API server's CRD validation
    /// messages. Paths start at `openAPIV3Schema`; use [`SchemaError::in_crd_version`] for the
    /// full path of a CRD.
    pub fn compile(openapi_v3_schema: &Value) -> Result<Self, SchemaError> {
        if !openapi_v3_schema.is_object() {
            return Err(SchemaError::new(vec![FieldError::required(
                SCHEMA_PATH,
                "schemas are required",
            )]));
        }
        let mut root = Node::parse(openapi_v3_schema);
        let mut errors = Vec::new();
        if root.nullable {
            errors.push(FieldError::forbidden(
                format!("{SCHEMA_PATH}.nullable"),
                "nullable cannot be true at the root",
            ));
        }
        let structural_errors = structural::validate_structural(&root, SCHEMA_PATH);
        let structural_ok = structural_errors.is_empty();
        errors.extend(structural_errors);
        let checked = crd_schema::check_and_compile(&mut root, SCHEMA_PATH);
        if structural_ok && checked.schema.is_empty() {
            errors.extend(defaults_errors(&root));
        }
        errors.extend(checked.schema);
        errors.extend(checked.cel);
        if errors.is_empty() {
            let has_rules = has_rules(&root);
            Ok(Self {
                raw: openapi_v3_schema.clone(),
                root,
                has_rules,
            })
        } else {
            Err(SchemaError::new(errors))
        }
    }

    /// The schema this was compiled from, as given.
    pub fn raw(&self) -> &Value {
        &self.raw
    }

    /// Defaulting as the API server does it on create, update and when reading stored objects:
    /// `null`s that are neither nullable nor defaulted are removed, then missing fields get their
    /// `default` (recursively, so a defaulted object gets its own nested defaults).
    pub fn apply_defaults(&self, obj: &mut Value) {
        defaults::prune_non_nullable_nulls(obj, Some(&self.root));
        defaults::apply_defaults(obj, &self.root);
    }

    /// Removes fields the schema does not know and returns their paths as the API server names
    /// them in `fieldValidation` warnings and errors (`unknown field "spec.foo"`): no leading
    /// dot, `[i]` for list items, `metadata.*` first.
    ///
    /// Respects `x-kubernetes-preserve-unknown-fields` and embedded resources; `metadata` (at
    /// the root and in embedded resources) is pruned to `ObjectMeta`'s fields. `apiVersion` and
    /// `kind` at the root are kept.
    pub fn prune(&self, obj: &mut Value) -> Vec<String> {
        prune::prune_resource(obj, &self.root)
    }

    /// Structural validation, list-type uniqueness, embedded resources' `apiVersion`/`kind`, and
    /// `x-kubernetes-validations` (CEL); `old` is the stored object on updates.
    ///
    /// On updates, errors inside values that did not change are ratcheted (dropped) as in
    /// Kubernetes, and transition rules (`oldSelf`) run only where an old value correlates.
    /// `metadata` and the root's `apiVersion`/`kind` are checked by the server, not here.
    pub fn validate(&self, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        let errors = validate::validate_value(&self.root, obj, old, None);
        self.validate_rest(obj, old, errors)
    }

    /// [`Schema::validate`] of a write to the status subresource, as kube-apiserver's status
    /// strategy runs it: the structural checks of `status` alone against its own schema (the
    /// field named `status.x`, the message naming `x`), list types and CEL rules over the
    /// whole object as on any update.
    pub fn validate_status(&self, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        let errors = match (self.root.properties.get("status"), obj.get("status")) {
            (Some(node), Some(status)) => validate::validate_value(
                node,
                status,
                old.and_then(|old| old.get("status")),
                Some("status"),
            ),
            _ => Vec::new(),
        };
        self.validate_rest(obj, old, errors)
    }

    /// The checks after the structural ones: embedded resources, list types, CEL.
    fn validate_rest(
        &self,
        obj: &Value,
        old: Option<&Value>,
        mut errors: Vec<FieldError>,
    ) -> Vec<FieldError> {
        listtype::validate_embedded(&self.root, obj, "", &mut errors);
        let mut list_errors = Vec::new();
        listtype::validate_lists(&self.root, obj, "", &mut list_errors);
        let old_lists_valid = old.is_none_or(|old| {
            let mut old_errors = Vec::new();
            listtype::validate_lists(&self.root, old, "", &mut old_errors);
            old_errors.is_empty()
        });
        if old_lists_valid {
            errors.extend(list_errors);
        }
        let blocking = errors.iter().any(|error| {
            matches!(
                error.kind,
                FieldErrorKind::NotSupported
                    | FieldErrorKind::Required
                    | FieldErrorKind::TooLong
                    | FieldErrorKind::TooMany
                    | FieldErrorKind::TypeInvalid
            )
        });
        if !self.has_rules {
            return errors;
        }
        if blocking {
            errors.push(FieldError::invalid("<nil>", Value::Null, BLOCKED_RULES));
        } else {
            errors.extend(cel::evaluate(&self.root, obj, old, "<nil>", true));
        }
        errors
    }

    /// Type information for the patch engine: list and map semantics by path.
    pub(crate) fn root_node(&self) -> &Node {
        &self.root
    }
}

fn has_rules(node: &Node) -> bool {
    !node.rules.is_empty()
        || node.items.as_deref().is_some_and(has_rules)
        || node.additional_schema().is_some_and(has_rules)
        || node.properties.values().any(has_rules)
        || node.all_of.iter().any(has_rules)
}

/// apiextensions' `ValidateDefaults`: every `default` must be pruned already, validate against
/// its own schema and pass its CEL rules.
fn defaults_errors(root: &Node) -> Vec<FieldError> {
    let mut errors = Vec::new();
    check_defaults(root, SCHEMA_PATH, true, false, &mut errors);
    errors
}

fn check_defaults(
    node: &Node,
    path: &str,
    resource_root: bool,
    inside_meta: bool,
    errors: &mut Vec<FieldError>,
) {
    let resource_root = resource_root || node.embedded_resource;
    let inside_meta = inside_meta && !node.embedded_resource;
    if let Some(default) = &node.default
        && !inside_meta
    {
        let default_path = format!("{path}.default");
        let mut pruned = default.clone();
        let _ = prune::prune_resource_like(&mut pruned, node, node.embedded_resource);
        if &pruned != default {
            errors.push(FieldError::invalid(
                &default_path,
                default.clone(),
                "must not have unknown fields",
            ));
        }
        let schema_errors = validate::validate_value(node, default, None, Some(&default_path));
        if schema_errors.is_empty() {
            errors.extend(cel::evaluate(
                node,
                default,
                Some(default),
                &default_path,
                resource_root,
            ));
            errors.extend(cel::evaluate(
                node,
                default,
                None,
                &default_path,
                resource_root,
            ));
        } else {
            errors.extend(schema_errors);
        }
    }
    if let Some(items) = &node.items {
        check_defaults(items, &format!("{path}.items"), false, inside_meta, errors);
    }
    for (name, property) in &node.properties {
        let child_inside_meta = inside_meta
            || (resource_root && matches!(name.as_str(), "metadata" | "apiVersion" | "kind"));
        check_defaults(
            property,
            &format!("{path}.properties[{name}]"),
            false,
            child_inside_meta,
            errors,
        );
    }
}

#[cfg(test)]
mod tests;
