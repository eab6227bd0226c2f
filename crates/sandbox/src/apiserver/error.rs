//! Errors as `metav1.Status`, with the reason, code and causes kube-apiserver gives, so kubectl
//! and kube-rs print and branch on them exactly as they do against a real cluster.

use serde_json::{Value, json};

/// One field-level cause of an `Invalid` (422) error.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusCause {
    /// `FieldValueInvalid`, `FieldValueRequired`, `FieldValueNotSupported`, ...
    pub reason: String,
    pub message: String,
    /// The field path, e.g. `spec.replicas`.
    pub field: String,
}

/// A failed API request, rendered as `metav1.Status`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{reason} ({code}): {message}")]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    /// `details.group`, `details.kind` and `details.name` of the object concerned.
    pub details: Option<Box<StatusDetails>>,
    pub causes: Vec<StatusCause>,
    /// Seconds a client should wait before retrying (429 and 5xx).
    pub retry_after_seconds: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct StatusDetails {
    pub group: String,
    pub kind: String,
    pub name: String,
}

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
            causes: Vec::new(),
            retry_after_seconds: None,
        }
    }

    fn with_details(mut self, group: &str, kind: &str, name: &str) -> Self {
        self.details = Some(Box::new(StatusDetails {
            group: group.to_string(),
            kind: kind.to_string(),
            name: name.to_string(),
        }));
        self
    }

    /// `<resource>.<group> "name" not found`, the message kubectl shows.
    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(group, resource)),
        )
        .with_details(group, resource, name)
    }

    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", qualified(group, resource)),
        )
        .with_details(group, resource, name)
    }

    /// A write whose resourceVersion precondition no longer holds.
    pub fn conflict(group: &str, resource: &str, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                qualified(group, resource)
            ),
        )
        .with_details(group, resource, name)
    }

    /// Server-side apply conflicts: 409 with one cause per contested field.
    pub fn apply_conflict(message: String, causes: Vec<StatusCause>) -> Self {
        let mut err = Self::new(409, "Conflict", message);
        err.causes = causes;
        err
    }

    /// 422 with field causes: `<Kind>.<group> "name" is invalid: <field>: <message>, ...`.
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<StatusCause>) -> Self {
        let summary = causes
            .iter()
            .map(|c| {
                if c.field.is_empty() {
                    c.message.clone()
                } else {
                    format!("{}: {}", c.field, c.message)
                }
            })
            .collect::<Vec<_>>();
        let listed = if summary.len() == 1 {
            summary[0].clone()
        } else {
            format!("[{}]", summary.join(", "))
        };
        let mut err = Self::new(
            422,
            "Invalid",
            format!("{} \"{name}\" is invalid: {listed}", qualified(group, kind)),
        )
        .with_details(group, kind, name);
        err.causes = causes;
        err
    }

    /// A single-field 422, the common case.
    pub fn invalid_field(
        group: &str,
        kind: &str,
        name: &str,
        field: &str,
        reason: &str,
        message: &str,
    ) -> Self {
        Self::invalid(
            group,
            kind,
            name,
            vec![StatusCause {
                reason: reason.to_string(),
                message: message.to_string(),
                field: field.to_string(),
            }],
        )
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub fn request_too_large(message: impl Into<String>) -> Self {
        Self::new(413, "RequestEntityTooLarge", message)
    }

    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// An error with the given code and reason (an admission policy's `reason`).
    pub fn with_reason(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self::new(code, reason, message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/merge-patch+json, application/json-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml (got {content_type:?})"
            ),
        )
    }

    pub fn not_acceptable(message: impl Into<String>) -> Self {
        Self::new(406, "NotAcceptable", message)
    }

    /// 429 without Retry-After, as the real server refuses an eviction a PDB forbids.
    pub fn too_many_requests(message: impl Into<String>) -> Self {
        Self::new(429, "TooManyRequests", message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// A 404 for a URL that names no resource at all (no `details`).
    pub fn no_route(path: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("the server could not find the requested resource ({path})"),
        )
    }

    /// The `metav1.Status` body.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        let mut details = serde_json::Map::new();
        if let Some(d) = &self.details {
            if !d.name.is_empty() {
                details.insert("name".into(), json!(d.name));
            }
            if !d.group.is_empty() {
                details.insert("group".into(), json!(d.group));
            }
            details.insert("kind".into(), json!(d.kind));
        }
        if !self.causes.is_empty() {
            let causes: Vec<Value> = self
                .causes
                .iter()
                .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                .collect();
            details.insert("causes".into(), Value::Array(causes));
        }
        if let Some(seconds) = self.retry_after_seconds {
            details.insert("retryAfterSeconds".into(), json!(seconds));
        }
        if !details.is_empty() {
            status["details"] = Value::Object(details);
        }
        status
    }
}

/// `pods` or `etcdclusters.etcd-operator.cozystack.io`, as the server names a resource in messages.
fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_names_the_resource_like_kube_apiserver() {
        let status = ApiError::not_found("apps", "deployments", "web").to_status();
        assert_eq!(status["message"], "deployments.apps \"web\" not found");
        assert_eq!(status["reason"], "NotFound");
        assert_eq!(status["code"], 404);
        assert_eq!(status["details"]["kind"], "deployments");
    }

    #[test]
    fn invalid_lists_every_field_cause() {
        let err = ApiError::invalid(
            "",
            "Pod",
            "p",
            vec![
                StatusCause {
                    reason: "FieldValueRequired".into(),
                    message: "Required value".into(),
                    field: "spec.containers".into(),
                },
                StatusCause {
                    reason: "FieldValueInvalid".into(),
                    message: "Invalid value".into(),
                    field: "metadata.name".into(),
                },
            ],
        );
        let status = err.to_status();
        assert_eq!(status["code"], 422);
        assert_eq!(
            status["message"],
            "Pod \"p\" is invalid: [spec.containers: Required value, metadata.name: Invalid value]"
        );
        assert_eq!(status["details"]["causes"].as_array().unwrap().len(), 2);
    }
}
