//! The semantics of writes, shared by the HTTP handlers and the server's own controllers:
//! create, update (and the retrying update patches use), and delete with finalizers.

mod admission;
pub mod claims;
mod create;
pub mod delete;
pub mod metadata;
pub mod policies;
mod update;

pub use create::create;
pub use delete::{DeleteOptions, DeletionOutcome, PropagationPolicy, delete};
pub use update::{type_info, update, update_with};

/// How strictly unknown or duplicate fields are treated (`fieldValidation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    Ignore,
    #[default]
    Warn,
    Strict,
}

/// Options every write takes from its query string.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// `dryRun=All`: every check runs, nothing is stored.
    pub dry_run: bool,
    pub field_manager: Option<String>,
    pub field_validation: FieldValidation,
    /// Who asks, for the admission policies; `None` for the server's own controllers' writes,
    /// which no policy sees.
    pub user: Option<crate::apiserver::auth::Identity>,
    /// A write by the server itself that may set what clients may not (deletionTimestamp,
    /// status through the main resource).
    pub(crate) system: bool,
}

impl WriteOptions {
    /// A write by one of the server's own controllers.
    pub fn internal(manager: &str) -> Self {
        Self {
            field_manager: Some(manager.to_string()),
            ..Self::default()
        }
    }
}

/// What a write produced: the object, and warnings for the `Warning` header.
#[derive(Debug, Clone)]
pub struct Written {
    pub object: serde_json::Value,
    pub warnings: Vec<String>,
}
