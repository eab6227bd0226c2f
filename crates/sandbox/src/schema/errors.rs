//! Field errors in the exact shape kube-apiserver reports them (`field.Error` in Go).

use serde_json::Value;

use super::go_text::{format_bad_value, quote};

/// What kind of problem a [`FieldError`] reports; mirrors Go's `field.ErrorType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldErrorKind {
    /// `Required value`: a required field is missing.
    Required,
    /// `Invalid value`: the value breaks a constraint (pattern, minimum, CEL rule, ...).
    Invalid,
    /// `Unsupported value`: the value is not one of the enum's values.
    NotSupported,
    /// `Too long`: a string or list is over its maximum length.
    TooLong,
    /// `Too short`: a string is under its minimum length.
    TooShort,
    /// `Too many`: a list or map has more items or properties than allowed.
    TooMany,
    /// `Too few`: a list has fewer items than required.
    TooFew,
    /// `Duplicate value`: a set or map-list item appears twice.
    Duplicate,
    /// `Forbidden`: the field may not be set (or changed) at all.
    Forbidden,
    /// `Invalid value` with a type mismatch, reported by the API server as a type error.
    TypeInvalid,
    /// `Not found`.
    NotFound,
    /// `Internal error`: evaluation failed for a reason that is not the user's value.
    Internal,
}

impl FieldErrorKind {
    /// The text Go's `field.ErrorType.String()` prints.
    pub fn description(self) -> &'static str {
        match self {
            Self::Required => "Required value",
            Self::Invalid => "Invalid value",
            Self::NotSupported => "Unsupported value",
            Self::TooLong => "Too long",
            Self::TooShort => "Too short",
            Self::TooMany => "Too many",
            Self::TooFew => "Too few",
            Self::Duplicate => "Duplicate value",
            Self::Forbidden => "Forbidden",
            Self::TypeInvalid => "Invalid value",
            Self::NotFound => "Not found",
            Self::Internal => "Internal error",
        }
    }

    /// The `StatusCause.reason` the API server sends for this kind.
    pub fn reason(self) -> &'static str {
        match self {
            Self::Required => "FieldValueRequired",
            Self::Invalid => "FieldValueInvalid",
            Self::NotSupported => "FieldValueNotSupported",
            Self::TooLong => "FieldValueTooLong",
            Self::TooShort => "FieldValueTooShort",
            Self::TooMany => "FieldValueTooMany",
            Self::TooFew => "FieldValueTooFew",
            Self::Duplicate => "FieldValueDuplicate",
            Self::Forbidden => "FieldValueForbidden",
            Self::TypeInvalid => "FieldValueTypeInvalid",
            Self::NotFound => "FieldValueNotFound",
            Self::Internal => "InternalError",
        }
    }
}

/// One validation failure of one field, as kube-apiserver reports it in a 422 `Invalid` status.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// The field path as the API server prints it, e.g. `spec.replicas` or `spec.members[0].name`.
    pub field: String,
    /// What went wrong.
    pub kind: FieldErrorKind,
    /// The offending value, printed after `Invalid value: `; `None` where the API server omits
    /// it. Kinds that never print a value (`Required`, `Forbidden`, `Too long`, `Internal error`)
    /// ignore it.
    pub bad_value: Option<Value>,
    /// The explanation after the value.
    pub detail: String,
}

impl FieldError {
    /// A `Required value` error.
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            kind: FieldErrorKind::Required,
            bad_value: None,
            detail: detail.into(),
        }
    }

    /// A `Forbidden` error.
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            kind: FieldErrorKind::Forbidden,
            bad_value: None,
            detail: detail.into(),
        }
    }

    /// An `Invalid value` error.
    pub fn invalid(field: impl Into<String>, value: Value, detail: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            kind: FieldErrorKind::Invalid,
            bad_value: Some(value),
            detail: detail.into(),
        }
    }

    /// A `Duplicate value` error.
    pub fn duplicate(field: impl Into<String>, value: Value) -> Self {
        Self {
            field: field.into(),
            kind: FieldErrorKind::Duplicate,
            bad_value: Some(value),
            detail: String::new(),
        }
    }

    /// An `Unsupported value` error listing the allowed values as Go's `field.NotSupported`
    /// does: strings as they are, other values as JSON, each quoted.
    pub fn not_supported(field: impl Into<String>, value: Value, allowed: &[Value]) -> Self {
        let quoted: Vec<String> = allowed
            .iter()
            .map(|value| match value {
                Value::String(text) => quote(text),
                other => quote(&other.to_string()),
            })
            .collect();
        let detail = if quoted.is_empty() {
            String::new()
        } else {
            format!("supported values: {}", quoted.join(", "))
        };
        Self {
            field: field.into(),
            kind: FieldErrorKind::NotSupported,
            bad_value: Some(value),
            detail,
        }
    }

    /// A `Too many` error for a list or map over its maximum.
    pub fn too_many(field: impl Into<String>, actual: i64, max: i64) -> Self {
        let detail = if max >= 0 {
            format!("must have at most {max} items")
        } else {
            "has too many items".into()
        };
        let bad_value = (actual >= 0).then(|| Value::from(actual));
        Self {
            field: field.into(),
            kind: FieldErrorKind::TooMany,
            bad_value,
            detail,
        }
    }

    /// An `Internal error`.
    pub fn internal(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            kind: FieldErrorKind::Internal,
            bad_value: None,
            detail: detail.into(),
        }
    }

    /// The error without its field path (`ErrorBody` in Go): what a `StatusCause.message` carries.
    pub fn body(&self) -> String {
        let mut text = self.kind.description().to_string();
        let prints_value = !matches!(
            self.kind,
            FieldErrorKind::Required
                | FieldErrorKind::Forbidden
                | FieldErrorKind::TooLong
                | FieldErrorKind::Internal
        );
        if prints_value && let Some(value) = &self.bad_value {
            text.push_str(": ");
            text.push_str(&format_bad_value(value));
        }
        if !self.detail.is_empty() {
            text.push_str(": ");
            text.push_str(&self.detail);
        }
        text
    }

    /// The text kube-apiserver prints, e.g.
    /// `spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0`.
    pub fn message(&self) -> String {
        format!("{}: {}", self.field, self.body())
    }

    /// The `StatusCause.reason`: `FieldValueRequired`, `FieldValueInvalid`, ...
    pub fn reason(&self) -> &'static str {
        self.kind.reason()
    }

    /// The same error with `prefix` put in front of its field path (`prefix.field`).
    pub fn with_prefix(mut self, prefix: &str) -> Self {
        self.field = if self.field.is_empty() || self.field == "<nil>" {
            prefix.to_string()
        } else {
            format!("{prefix}.{}", self.field)
        };
        self
    }
}

/// The `message` of kube-apiserver's 422 Invalid status for these errors, e.g.
/// `EtcdCluster.etcd-operator.cozystack.io "main" is invalid: [spec.replicas: ..., spec: ...]`.
///
/// `qualified_kind` is `Kind.group` (just `Kind` for the core group). Duplicate messages are
/// dropped and a single error is printed without brackets, as Go's error aggregate does.
pub fn invalid_status_message(qualified_kind: &str, name: &str, errors: &[FieldError]) -> String {
    let mut seen = std::collections::HashSet::new();
    let messages: Vec<String> = errors
        .iter()
        .map(FieldError::message)
        .filter(|message| seen.insert(message.clone()))
        .collect();
    match messages.len() {
        0 => format!("{qualified_kind} {} is invalid", quote(name)),
        1 => format!(
            "{qualified_kind} {} is invalid: {}",
            quote(name),
            messages[0]
        ),
        _ => format!(
            "{qualified_kind} {} is invalid: [{}]",
            quote(name),
            messages.join(", ")
        ),
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message())
    }
}

/// A CRD's schema that the API server would refuse: not structural, or with CEL rules that do
/// not compile. The causes name fields of the CRD (`spec.versions[0].schema.openAPIV3Schema...`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", self.message())]
pub struct SchemaError {
    /// Every problem found, in schema order.
    pub causes: Vec<FieldError>,
}

impl SchemaError {
    /// Wraps the causes found while compiling.
    pub fn new(causes: Vec<FieldError>) -> Self {
        Self { causes }
    }

    /// The causes with the path of CRD version `index` in front
    /// (`spec.versions[<index>].schema.openAPIV3Schema...`), as kube-apiserver reports them for
    /// a `CustomResourceDefinition` create or update.
    pub fn in_crd_version(self, index: usize) -> Self {
        let prefix = format!("spec.versions[{index}].schema");
        Self {
            causes: self
                .causes
                .into_iter()
                .map(|cause| cause.with_prefix(&prefix))
                .collect(),
        }
    }

    /// The causes joined with `, ` inside brackets as the API server's aggregate prints them.
    pub fn message(&self) -> String {
        let parts: Vec<String> = self.causes.iter().map(FieldError::message).collect();
        if parts.len() == 1 {
            parts[0].clone()
        } else {
            format!("[{}]", parts.join(", "))
        }
    }
}
