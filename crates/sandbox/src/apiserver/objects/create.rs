//! Create: names and generateName, uid, creationTimestamp, generation, defaults, validation.

use serde_json::{Value, json};

use super::admission::{admit, assign_cluster_ip, check_namespace, release};
use super::metadata::{generate_name, new_uid, now};
use super::{WriteOptions, Written};
use crate::apiserver::error::{ApiError, ApiResult};
use crate::apiserver::registry::ResourceType;
use crate::apiserver::server::ApiServer;
use crate::apiserver::store::Precondition;

/// Creates `object` of `kind` (served at `version`) in `namespace` ("" for cluster-scoped).
pub fn create(
    server: &ApiServer,
    kind: &ResourceType,
    version: &str,
    namespace: &str,
    mut object: Value,
    options: &WriteOptions,
) -> ApiResult<Written> {
    if !object.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    }
    check_type(kind, version, &object)?;
    object = crate::apiserver::convert::to_storage(kind, object);
    if !object["metadata"].is_object() {
        object["metadata"] = json!({});
    }
    let metadata = &mut object["metadata"];
    if kind.namespaced {
        match metadata["namespace"].as_str() {
            None | Some("") => metadata["namespace"] = json!(namespace),
            Some(ns) if ns == namespace => {}
            Some(_) => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
        }
    } else if let Some(map) = metadata.as_object_mut() {
        map.remove("namespace");
    }
    if metadata["name"].as_str().is_none_or(str::is_empty)
        && let Some(prefix) = metadata["generateName"].as_str().filter(|p| !p.is_empty())
    {
        metadata["name"] = json!(generate_name(prefix));
    }
    let name = metadata["name"].as_str().unwrap_or("").to_string();
    check_namespace(server, kind, namespace, &name)?;

    if let Some(map) = metadata.as_object_mut() {
        for server_owned in [
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
        ] {
            map.remove(server_owned);
        }
    }
    metadata["uid"] = json!(new_uid());
    metadata["creationTimestamp"] = json!(now());
    metadata["generation"] = json!(1);
    object["apiVersion"] = json!(kind.storage_api_version());
    object["kind"] = json!(kind.kind);
    // A kind with a status subresource ignores the status sent on create, as the real server does.
    if kind.has_subresource(version, "status")
        && let Some(map) = object.as_object_mut()
    {
        map.remove("status");
    }

    super::claims::default_storage_class(server, kind, &mut object);
    let mut warnings = admit(kind, version, &mut object, None, options.field_validation)?;
    if let Some(user) = &options.user {
        warnings.extend(super::policies::admit(
            server,
            &super::policies::Request {
                kind,
                version,
                subresource: None,
                operation: super::policies::Operation::Create,
                namespace,
                name: &name,
                object: Some(&object),
                old: None,
                user,
                dry_run: options.dry_run,
            },
        )?);
    }
    super::update::record_managed_fields(kind, version, None, &mut object, options, None);
    if options.dry_run {
        return Ok(Written { object, warnings });
    }
    let is_service = kind.group.is_empty() && kind.kind == "Service";
    if is_service {
        assign_cluster_ip(server, &mut object)?;
    }
    match server.store.commit(
        &kind.storage_id(),
        namespace,
        &name,
        Precondition::MustNotExist,
        Some(object.clone()),
    ) {
        Ok(stored) => {
            super::admission::after_write(server, kind, &stored);
            Ok(Written {
                object: (*stored).clone(),
                warnings,
            })
        }
        Err(err) => {
            if is_service {
                release(server, kind, &object);
            }
            Err(err)
        }
    }
}

/// The body's apiVersion and kind, when given, must be those of the URL.
pub fn check_type(kind: &ResourceType, version: &str, object: &Value) -> ApiResult<()> {
    let expected_api_version = kind.api_version(version);
    if let Some(api_version) = object["apiVersion"].as_str()
        && api_version != expected_api_version
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({expected_api_version})"
        )));
    }
    if let Some(body_kind) = object["kind"].as_str()
        && body_kind != kind.kind
    {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({body_kind}) does not match the expected kind ({})",
            kind.kind
        )));
    }
    Ok(())
}
