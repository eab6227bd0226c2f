//! PATCH: JSON merge, JSON patch, strategic merge and server-side apply, through the patch
//! engine; the result goes through the same checks as an update.

use axum::body::Body;
use http::{Response, StatusCode};
use serde_json::Value;

use super::Call;
use super::resources::{Target, render_object, write_options};
use crate::apiserver::convert::{from_storage, to_storage};
use crate::apiserver::error::{ApiError, ApiResult, StatusCause};
use crate::apiserver::objects::metadata::now;
use crate::apiserver::objects::{self, update_with};
use crate::apiserver::registry::ResourceType;
use crate::patch::managed::{ApplyConflicts, apply};
use crate::patch::{PatchError, json_patch, merge_patch, strategic_merge_patch};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Merge,
    Json,
    StrategicMerge,
    Apply,
}

impl PatchType {
    pub fn from_content_type(content_type: &str) -> ApiResult<Self> {
        let media = content_type.split(';').next().unwrap_or("").trim();
        match media {
            "application/merge-patch+json" => Ok(Self::Merge),
            "application/json-patch+json" => Ok(Self::Json),
            "application/strategic-merge-patch+json" => Ok(Self::StrategicMerge),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Ok(Self::Apply),
            other => Err(ApiError::unsupported_media_type(other)),
        }
    }
}

pub fn patch_error(err: PatchError) -> ApiError {
    match err {
        PatchError::StrategicMergeUnsupported => {
            let mut unsupported =
                ApiError::bad_request(PatchError::StrategicMergeUnsupported.to_string());
            unsupported.code = 415;
            unsupported.reason = "UnsupportedMediaType";
            unsupported
        }
        PatchError::Malformed(message) => ApiError::bad_request(message),
        PatchError::Failed(message) => {
            let mut invalid = ApiError::bad_request(message);
            invalid.code = 422;
            invalid.reason = "Invalid";
            invalid
        }
    }
}

pub fn conflict_error(conflicts: ApplyConflicts) -> ApiError {
    let causes = conflicts
        .conflicts
        .iter()
        .map(|c| StatusCause {
            reason: "FieldManagerConflict".into(),
            message: format!("conflict with \"{}\"", c.manager),
            field: c.field.clone(),
        })
        .collect();
    ApiError::apply_conflict(conflicts.message(), causes)
}

/// One patch as the client sent it.
pub struct PatchRequest<'a> {
    pub patch_type: PatchType,
    pub document: &'a Value,
    /// The field manager (server-side apply only).
    pub manager: &'a str,
    /// `force=true`: take over fields other managers own (server-side apply only).
    pub force: bool,
}

/// Applies one patch document to `current` (in the version the client sees).
pub fn apply_patch(
    kind: &ResourceType,
    version: &str,
    request: &PatchRequest,
    current: Option<&Value>,
    subresource: Option<&str>,
) -> ApiResult<Value> {
    let types = objects::type_info(kind, version);
    let empty = Value::Object(Default::default());
    let target = current.unwrap_or(&empty);
    let document = request.document;
    match request.patch_type {
        PatchType::Merge => Ok(merge_patch(target, document)),
        PatchType::Json => json_patch(target, document).map_err(patch_error),
        PatchType::StrategicMerge => {
            strategic_merge_patch(target, document, &types).map_err(patch_error)
        }
        PatchType::Apply => apply(
            current,
            document,
            request.manager,
            request.force,
            subresource,
            &types,
            &now(),
        )
        .map_err(conflict_error),
    }
}

pub fn patch(call: &Call, target: &Target, subresource: Option<&str>) -> ApiResult<Response<Body>> {
    let patch_type = PatchType::from_content_type(call.content_type())?;
    let document: Value = if patch_type == PatchType::Apply {
        serde_yaml::from_slice(&call.body)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?
    } else {
        serde_json::from_slice(&call.body)
            .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?
    };
    let mut options = write_options(call)?;
    let force = call.param("force") == Some("true");
    let name = target.name()?.to_string();
    let kind = &target.kind;
    let manager = if patch_type == PatchType::Apply {
        if call.param("fieldManager").is_none() {
            return Err(ApiError::bad_request(
                "PATCH, application/apply-patch+yaml requires fieldManager",
            ));
        }
        // Apply records its own managed fields; the update path must not record them again.
        options.field_manager.take().unwrap_or_default()
    } else {
        String::new()
    };
    let request = PatchRequest {
        patch_type,
        document: &document,
        manager: &manager,
        force,
    };
    let exists = call
        .server
        .store
        .get(&kind.storage_id(), &target.namespace, &name)
        .is_some();
    if !exists && patch_type == PatchType::Apply && subresource.is_none() {
        let created = apply_patch(kind, &target.version, &request, None, None)?;
        let written = objects::create(
            &call.server,
            kind,
            &target.version,
            &target.namespace,
            created,
            &options,
        )?;
        return Ok(render_object(
            call,
            target,
            StatusCode::CREATED,
            &written.object,
            &written.warnings,
        ));
    }
    let written = update_with(
        &call.server,
        kind,
        &target.version,
        &target.namespace,
        &name,
        subresource,
        &options,
        &mut |current| {
            let presented = from_storage(kind, &target.version, current);
            let patched = apply_patch(
                kind,
                &target.version,
                &request,
                Some(&presented),
                subresource,
            )?;
            let wanted_rv = patched["metadata"]["resourceVersion"]
                .as_str()
                .filter(|rv| !rv.is_empty());
            if wanted_rv.is_some() && wanted_rv != current["metadata"]["resourceVersion"].as_str() {
                return Err(ApiError::conflict(
                    &kind.group,
                    &kind.plural,
                    &name,
                    "the object has been modified; please apply your changes to the latest version and try again",
                ));
            }
            Ok(to_storage(kind, patched))
        },
    )?;
    Ok(render_object(
        call,
        target,
        StatusCode::OK,
        &written.object,
        &written.warnings,
    ))
}
