//! Field errors in the exact shape kube-apiserver reports them (`field.Error` in Go).

use serde_json::Value;

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
    /// `Too many`: a list or map has more items or properties than allowed.
    TooMany,
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
            Self::TooMany => "Too many",
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
            Self::TooMany => "FieldValueTooMany",
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
    /// The offending value, printed after `Invalid value: `; `None` where the API server omits it.
    pub bad_value: Option<Value>,
    /// The explanation after the value.
    pub detail: String,
}

impl FieldError {
    /// A `Required value` error.
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self { field: field.into(), kind: FieldErrorKind::Required, bad_value: None, detail: detail.into() }
    }

    /// An `Invalid value` error.
    pub fn invalid(field: impl Into<String>, value: Value, detail: impl Into<String>) -> Self {
        Self { field: field.into(), kind: FieldErrorKind::Invalid, bad_value: Some(value), detail: detail.into() }
    }

    /// The text kube-apiserver prints, e.g.
    /// `spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0`.
    pub fn message(&self) -> String {
        let mut text = format!("{}: {}", self.field, self.kind.description());
        if let Some(value) = &self.bad_value {
            text.push_str(": ");
            text.push_str(&value.to_string());
        }
        if !self.detail.is_empty() {
            text.push_str(": ");
            text.push_str(&self.detail);
        }
        text
    }

    /// The `StatusCause.reason`: `FieldValueRequired`, `FieldValueInvalid`, ...
    pub fn reason(&self) -> &'static str {
        self.kind.reason()
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

    /// The causes joined with `, ` inside brackets as the API server's aggregate prints them.
    pub fn message(&self) -> String {
        let parts: Vec<String> = self.causes.iter().map(FieldError::message).collect();
        if parts.len() == 1 { parts[0].clone() } else { format!("[{}]", parts.join(", ")) }
    }
}
