//! Update: resourceVersion preconditions, server-owned metadata, generation, the status
//! subresource split, finalizers ending a deletion, and managed fields.

use serde_json::{Value, json};

use super::create::check_type;
use super::metadata::{keep_server_metadata, now, spec_changed};
use super::{WriteOptions, Written};
use crate::apiserver::convert;
use crate::apiserver::error::{ApiError, ApiResult};
use crate::apiserver::registry::ResourceType;
use crate::apiserver::server::ApiServer;
use crate::apiserver::store::{Precondition, resource_version_of};
use crate::patch::TypeInfo;
use crate::patch::managed::record_update;

/// How many times an update that lost a race is retried before answering 409.
const MAX_RETRIES: usize = 32;

/// PUT: replaces the object (or its `subresource` part) with `object`. A resourceVersion in the
/// body must match the stored one; without one the update is unconditional.
#[allow(clippy::too_many_arguments)]
pub fn update(
    server: &ApiServer,
    kind: &ResourceType,
    version: &str,
    namespace: &str,
    name: &str,
    subresource: Option<&str>,
    object: Value,
    options: &WriteOptions,
) -> ApiResult<Written> {
    if !object.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    }
    check_type(kind, version, &object)?;
    if let Some(body_name) = object["metadata"]["name"].as_str()
        && body_name != name
    {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    let expected = object["metadata"]["resourceVersion"]
        .as_str()
        .filter(|rv| !rv.is_empty())
        .map(str::to_string);
    let body = convert::to_storage(kind, object);
    update_with(
        server,
        kind,
        version,
        namespace,
        name,
        subresource,
        options,
        &mut |current| {
            if let Some(expected) = &expected
                && current["metadata"]["resourceVersion"].as_str() != Some(expected.as_str())
            {
                return Err(ApiError::conflict(
                    &kind.group,
                    &kind.plural,
                    name,
                    "the object has been modified; please apply your changes to the latest version and try again",
                ));
            }
            Ok(body.clone())
        },
    )
}

/// Reads the stored object, computes its new state with `mutate` and writes it if nothing
/// changed in between, retrying on a lost race (GuaranteedUpdate in kube-apiserver).
#[allow(clippy::too_many_arguments)]
pub fn update_with(
    server: &ApiServer,
    kind: &ResourceType,
    version: &str,
    namespace: &str,
    name: &str,
    subresource: Option<&str>,
    options: &WriteOptions,
    mutate: &mut dyn FnMut(&Value) -> ApiResult<Value>,
) -> ApiResult<Written> {
    let storage = kind.storage_id();
    for _ in 0..MAX_RETRIES {
        let Some(current) = server.store.get(&storage, namespace, name) else {
            return Err(ApiError::not_found(&kind.group, &kind.plural, name));
        };
        let desired = mutate(&current)?;
        let (mut object, mut warnings) =
            prepare(kind, version, subresource, &current, desired, options)?;
        if !options.system {
            super::claims::check_resize(server, kind, subresource, &current, &object)?;
        }
        let current_rv = resource_version_of(&current).unwrap_or(0);
        if unchanged(&current, &object) {
            return Ok(Written {
                object: (*current).clone(),
                warnings,
            });
        }
        if let Some(user) = &options.user {
            warnings.extend(super::policies::admit(
                server,
                &super::policies::Request {
                    kind,
                    version,
                    subresource,
                    operation: super::policies::Operation::Update,
                    namespace,
                    name,
                    object: Some(&object),
                    old: Some(&current),
                    user,
                    dry_run: options.dry_run,
                },
            )?);
        }
        if options.dry_run {
            return Ok(Written { object, warnings });
        }
        // Gone once deleting, with no finalizers left and no grace period to wait out.
        let finished_deleting = object["metadata"]["deletionTimestamp"].is_string()
            && object["metadata"]["finalizers"]
                .as_array()
                .is_none_or(Vec::is_empty)
            && object["metadata"]["deletionGracePeriodSeconds"]
                .as_i64()
                .unwrap_or(0)
                == 0
            && (kind.kind != "Namespace"
                || object["spec"]["finalizers"]
                    .as_array()
                    .is_none_or(Vec::is_empty));
        let result = if finished_deleting {
            let removed = server.store.commit(
                &storage,
                namespace,
                name,
                Precondition::ResourceVersion(current_rv),
                None,
            );
            if removed.is_ok() {
                super::admission::release(server, kind, &object);
            }
            removed
        } else {
            object["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
            server.store.commit(
                &storage,
                namespace,
                name,
                Precondition::ResourceVersion(current_rv),
                Some(object),
            )
        };
        match result {
            Ok(stored) => {
                if !finished_deleting {
                    super::admission::after_write(server, kind, &stored);
                }
                return Ok(Written {
                    object: (*stored).clone(),
                    warnings,
                });
            }
            Err(err) if err.code == 409 && err.reason == "Conflict" => continue,
            Err(err) => return Err(err),
        }
    }
    Err(ApiError::conflict(
        &kind.group,
        &kind.plural,
        name,
        "too many concurrent writes; try again",
    ))
}

/// The object as it would be stored: subresource split, server metadata, generation, defaults,
/// validation, managed fields.
fn prepare(
    kind: &ResourceType,
    version: &str,
    subresource: Option<&str>,
    current: &Value,
    desired: Value,
    options: &WriteOptions,
) -> ApiResult<(Value, Vec<String>)> {
    let mut object = match subresource {
        _ if options.system => desired,
        Some("status") => {
            let mut object = current.clone();
            object["status"] = desired.get("status").cloned().unwrap_or(Value::Null);
            // Server-side apply to the status records its manager in the object's managedFields.
            if let Some(managed) = desired["metadata"].get("managedFields") {
                object["metadata"]["managedFields"] = managed.clone();
            }
            object
        }
        Some("finalize") => {
            let mut object = current.clone();
            object["spec"]["finalizers"] = desired["spec"]["finalizers"].clone();
            object
        }
        _ => {
            let mut object = desired;
            if kind.has_subresource(version, "status") {
                match current.get("status") {
                    Some(status) => object["status"] = status.clone(),
                    None => {
                        if let Some(map) = object.as_object_mut() {
                            map.remove("status");
                        }
                    }
                }
            }
            keep_kind_specific(kind, current, &mut object);
            object
        }
    };
    if options.system {
        object["metadata"]["uid"] = current["metadata"]["uid"].clone();
    } else {
        keep_server_metadata(current, &mut object);
    }
    object["apiVersion"] = current["apiVersion"].clone();
    object["kind"] = json!(kind.kind);
    if !options.system && object["metadata"]["deletionTimestamp"].is_string() {
        let before: Vec<&Value> = current["metadata"]["finalizers"]
            .as_array()
            .into_iter()
            .flatten()
            .collect();
        let added = object["metadata"]["finalizers"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|f| !before.contains(&f));
        if added {
            return Err(ApiError::invalid_field(
                &kind.group,
                &kind.kind,
                object["metadata"]["name"].as_str().unwrap_or(""),
                "metadata.finalizers",
                "FieldValueForbidden",
                "Forbidden: no new finalizers can be added if the object is being deleted",
            ));
        }
    }
    if spec_changed(current, &object) {
        let generation = current["metadata"]["generation"].as_i64().unwrap_or(1);
        object["metadata"]["generation"] = json!(generation + 1);
    }
    let warnings = super::admission::admit_write(
        kind,
        version,
        &mut object,
        Some(current),
        options.field_validation,
        subresource == Some("status"),
    )?;
    record_managed_fields(
        kind,
        version,
        Some(current),
        &mut object,
        options,
        subresource,
    );
    Ok((object, warnings))
}

/// Fields that only the server or a subresource may change.
fn keep_kind_specific(kind: &ResourceType, current: &Value, object: &mut Value) {
    match (kind.group.as_str(), kind.kind.as_str()) {
        ("", "Service") => {
            for field in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
                if object["spec"][field].is_null() || object["spec"][field] == "" {
                    object["spec"][field] = current["spec"][field].clone();
                }
            }
        }
        // Namespace finalizers change only through `/finalize`.
        ("", "Namespace") => object["spec"]["finalizers"] = current["spec"]["finalizers"].clone(),
        _ => {}
    }
}

/// Same object apart from resourceVersion and the timestamps of managed fields: such a write
/// is not stored and takes no new resourceVersion, as in kube-apiserver.
fn unchanged(current: &Value, object: &Value) -> bool {
    let strip = |value: &Value| {
        let mut value = value.clone();
        if let Some(metadata) = value["metadata"].as_object_mut() {
            metadata.remove("resourceVersion");
            for entry in metadata
                .get_mut("managedFields")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                if let Some(entry) = entry.as_object_mut() {
                    entry.remove("time");
                }
            }
        }
        value
    };
    strip(current) == strip(object)
}

/// Records the write in `metadata.managedFields` for the field manager.
pub fn record_managed_fields(
    kind: &ResourceType,
    version: &str,
    old: Option<&Value>,
    object: &mut Value,
    options: &WriteOptions,
    subresource: Option<&str>,
) {
    let Some(manager) = options.field_manager.as_deref() else {
        return;
    };
    let types = type_info(kind, version);
    record_update(old, object, manager, subresource, &types, &now());
}

/// The list and map semantics patches and managed fields need for `kind`.
pub fn type_info(kind: &ResourceType, version: &str) -> TypeInfo {
    match kind.version(version).and_then(|v| v.schema.as_ref()) {
        Some(schema) => TypeInfo::from_schema(schema),
        None => TypeInfo::builtin(&kind.group, version, &kind.kind),
    }
}
