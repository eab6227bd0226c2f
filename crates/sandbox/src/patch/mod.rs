//! Patches: JSON merge, JSON patch, strategic merge, and server-side apply.
//!
//! Pure functions over [`serde_json::Value`]; the API server picks one by the request's
//! `Content-Type` and then records managed fields with [`managed`].

mod errors;
pub mod managed;
mod strategic;
mod type_info;

pub use errors::PatchError;
pub use type_info::TypeInfo;

use serde_json::Value;

/// Applies a JSON merge patch (RFC 7386): objects merge recursively, `null` deletes, anything
/// else replaces.
pub fn merge_patch(target: &Value, patch: &Value) -> Value {
    let mut merged = target.clone();
    json_patch::merge(&mut merged, patch);
    merged
}

/// Applies a JSON patch (RFC 6902), including `test`.
pub fn json_patch(target: &Value, patch: &Value) -> Result<Value, PatchError> {
    let operations: json_patch::Patch = serde_json::from_value(patch.clone())
        .map_err(|error| PatchError::Malformed(error.to_string()))?;
    let mut patched = target.clone();
    json_patch::patch(&mut patched, &operations)
        .map_err(|error| PatchError::Failed(error.to_string()))?;
    Ok(patched)
}

/// Applies a strategic merge patch with the merge keys and strategies in `types`.
///
/// Custom resources do not support it: for a [`TypeInfo::from_schema`] this returns
/// [`PatchError::StrategicMergeUnsupported`], which the server answers with 415.
pub fn strategic_merge_patch(
    target: &Value,
    patch: &Value,
    types: &TypeInfo,
) -> Result<Value, PatchError> {
    if !types.supports_strategic_merge() {
        return Err(PatchError::StrategicMergeUnsupported);
    }
    strategic::merge_object(target, patch, Some(types.root()))
}

#[cfg(test)]
mod tests;
