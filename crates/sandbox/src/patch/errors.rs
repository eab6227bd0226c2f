//! Why a patch could not be applied, with the status the API server answers.

/// A patch that could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// The patch document itself is not valid for its type (400 BadRequest).
    #[error("{0}")]
    Malformed(String),
    /// The patch is valid but cannot apply to this object, e.g. a failed JSON patch `test`
    /// or a path that does not exist (422 Invalid in kube-apiserver).
    #[error("{0}")]
    Failed(String),
    /// Strategic merge patch sent for a custom resource (415 UnsupportedMediaType).
    #[error(
        "the body of the request was in an unknown format - accepted media types include: \
         application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    )]
    StrategicMergeUnsupported,
}

impl PatchError {
    /// The HTTP status code kube-apiserver answers with.
    pub fn status_code(&self) -> u16 {
        match self {
            Self::Malformed(_) => 400,
            Self::Failed(_) => 422,
            Self::StrategicMergeUnsupported => 415,
        }
    }

    /// The `Status.reason` kube-apiserver answers with.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Malformed(_) => "BadRequest",
            Self::Failed(_) => "Invalid",
            Self::StrategicMergeUnsupported => "UnsupportedMediaType",
        }
    }
}
