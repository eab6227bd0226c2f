//! Delete: preconditions, graceful deletion of Pods on nodes, finalizers and
//! `deletionTimestamp`, and the propagation policy recorded as a finalizer for the garbage
//! collector (`foregroundDeletion`, `orphan`).

use serde_json::{Value, json};

use super::metadata::{now, timestamp_after};
use super::{WriteOptions, update_with};
use crate::apiserver::error::{ApiError, ApiResult};
use crate::apiserver::registry::ResourceType;
use crate::apiserver::server::ApiServer;
use crate::apiserver::store::{Precondition, resource_version_of};

pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";
pub const ORPHAN_FINALIZER: &str = "orphan";
/// The finalizer of `namespace.spec.finalizers` the namespace controller removes.
pub const NAMESPACE_FINALIZER: &str = "kubernetes";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PropagationPolicy {
    Background,
    Foreground,
    Orphan,
}

/// The parts of `metav1.DeleteOptions` the server honours.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    pub propagation: Option<PropagationPolicy>,
    pub grace_period_seconds: Option<i64>,
    pub precondition_uid: Option<String>,
    pub precondition_resource_version: Option<String>,
    pub dry_run: bool,
    /// Who asks, for the admission policies (`None`: no policy sees this delete).
    pub user: Option<crate::apiserver::auth::Identity>,
}

impl DeleteOptions {
    /// Reads a `DeleteOptions` body and the query parameters that override it.
    pub fn from_request(
        body: &Value,
        query: &std::collections::HashMap<String, String>,
    ) -> ApiResult<Self> {
        let mut options = Self {
            grace_period_seconds: body["gracePeriodSeconds"].as_i64(),
            precondition_uid: body["preconditions"]["uid"].as_str().map(str::to_string),
            precondition_resource_version: body["preconditions"]["resourceVersion"]
                .as_str()
                .map(str::to_string),
            dry_run: body["dryRun"]
                .as_array()
                .is_some_and(|d| d.iter().any(|v| v == "All")),
            propagation: None,
            user: None,
        };
        let mut policy = body["propagationPolicy"].as_str().map(str::to_string);
        if body["orphanDependents"] == true {
            policy.get_or_insert_with(|| "Orphan".into());
        }
        if let Some(p) = query.get("propagationPolicy") {
            policy = Some(p.clone());
        }
        if query.get("orphanDependents").is_some_and(|v| v == "true") {
            policy = Some("Orphan".into());
        }
        options.propagation = match policy.as_deref() {
            None => None,
            Some("Background") => Some(PropagationPolicy::Background),
            Some("Foreground") => Some(PropagationPolicy::Foreground),
            Some("Orphan") => Some(PropagationPolicy::Orphan),
            Some(other) => {
                return Err(ApiError::invalid_field(
                    "",
                    "DeleteOptions",
                    "",
                    "propagationPolicy",
                    "FieldValueNotSupported",
                    &format!(
                        "Unsupported value: {other:?}: supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
                    ),
                ));
            }
        };
        if let Some(grace) = query.get("gracePeriodSeconds") {
            options.grace_period_seconds = Some(
                grace
                    .parse()
                    .map_err(|_| ApiError::bad_request("gracePeriodSeconds must be an integer"))?,
            );
        }
        if query.get("dryRun").is_some_and(|v| v == "All") {
            options.dry_run = true;
        }
        Ok(options)
    }
}

/// What a delete did.
#[derive(Debug, Clone)]
pub enum DeletionOutcome {
    /// The object is gone; its last state.
    Deleted(Value),
    /// The object stays until its finalizers or grace period are done; its state now.
    Pending(Value),
}

impl DeletionOutcome {
    pub fn object(&self) -> &Value {
        match self {
            DeletionOutcome::Deleted(o) | DeletionOutcome::Pending(o) => o,
        }
    }
}

pub fn delete(
    server: &ApiServer,
    kind: &ResourceType,
    namespace: &str,
    name: &str,
    options: &DeleteOptions,
) -> ApiResult<DeletionOutcome> {
    let storage = kind.storage_id();
    let Some(current) = server.store.get(&storage, namespace, name) else {
        return Err(ApiError::not_found(&kind.group, &kind.plural, name));
    };
    check_preconditions(kind, name, &current, options)?;
    if let Some(user) = &options.user {
        super::policies::admit(
            server,
            &super::policies::Request {
                kind,
                version: &kind.storage_version().name,
                subresource: None,
                operation: super::policies::Operation::Delete,
                namespace,
                name,
                object: None,
                old: Some(&current),
                user,
                dry_run: options.dry_run,
            },
        )?;
    }
    let grace = graceful_period(kind, &current, options);
    let finalizer = match options.propagation {
        Some(PropagationPolicy::Foreground) => Some(FOREGROUND_FINALIZER),
        Some(PropagationPolicy::Orphan) => Some(ORPHAN_FINALIZER),
        _ => None,
    };
    let has_finalizers = current["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| !f.is_empty());
    let is_namespace = kind.group.is_empty() && kind.kind == "Namespace";
    if has_finalizers || finalizer.is_some() || grace.is_some() || is_namespace {
        let already_deleting = current["metadata"]["deletionTimestamp"].is_string();
        let grace_shortened = grace.is_some_and(|g| {
            current["metadata"]["deletionGracePeriodSeconds"]
                .as_i64()
                .is_none_or(|old| g < old)
        });
        if already_deleting && finalizer.is_none() && !grace_shortened && grace != Some(0) {
            return Ok(DeletionOutcome::Pending((*current).clone()));
        }
        if grace != Some(0) || has_finalizers || finalizer.is_some() {
            return mark_deleting(
                server,
                kind,
                namespace,
                name,
                finalizer,
                grace,
                options.dry_run,
            );
        }
    }
    if options.dry_run {
        return Ok(DeletionOutcome::Deleted((*current).clone()));
    }
    let rv = resource_version_of(&current).unwrap_or(0);
    let removed = server.store.commit(
        &storage,
        namespace,
        name,
        Precondition::ResourceVersion(rv),
        None,
    )?;
    super::admission::release(server, kind, &removed);
    Ok(DeletionOutcome::Deleted((*removed).clone()))
}

fn check_preconditions(
    kind: &ResourceType,
    name: &str,
    current: &Value,
    options: &DeleteOptions,
) -> ApiResult<()> {
    if let Some(uid) = &options.precondition_uid
        && current["metadata"]["uid"].as_str() != Some(uid.as_str())
    {
        return Err(ApiError::conflict(
            &kind.group,
            &kind.plural,
            name,
            &format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                current["metadata"]["uid"].as_str().unwrap_or("")
            ),
        ));
    }
    if let Some(rv) = &options.precondition_resource_version
        && current["metadata"]["resourceVersion"].as_str() != Some(rv.as_str())
    {
        return Err(ApiError::conflict(
            &kind.group,
            &kind.plural,
            name,
            &format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                current["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or("")
            ),
        ));
    }
    Ok(())
}

/// Pods bound to a node end gracefully: the kubelet stops them and deletes them with grace 0.
/// Everything else (and an unscheduled Pod) goes at once.
fn graceful_period(kind: &ResourceType, current: &Value, options: &DeleteOptions) -> Option<i64> {
    if !(kind.group.is_empty() && kind.kind == "Pod") {
        return None;
    }
    let on_node = current["spec"]["nodeName"]
        .as_str()
        .is_some_and(|n| !n.is_empty());
    let terminal = matches!(
        current["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    );
    if !on_node || terminal {
        return Some(0);
    }
    let grace = options
        .grace_period_seconds
        .or_else(|| current["spec"]["terminationGracePeriodSeconds"].as_i64())
        .unwrap_or(30);
    Some(grace.max(0))
}

fn mark_deleting(
    server: &ApiServer,
    kind: &ResourceType,
    namespace: &str,
    name: &str,
    finalizer: Option<&str>,
    grace: Option<i64>,
    dry_run: bool,
) -> ApiResult<DeletionOutcome> {
    let options = WriteOptions {
        dry_run,
        system: true,
        ..WriteOptions::default()
    };
    let version = kind.storage_version().name.clone();
    let is_namespace = kind.group.is_empty() && kind.kind == "Namespace";
    let written = update_with(
        server,
        kind,
        &version,
        namespace,
        name,
        None,
        &options,
        &mut |current| {
            let mut object = current.clone();
            let metadata = &mut object["metadata"];
            if !metadata["deletionTimestamp"].is_string() || grace.is_some() {
                metadata["deletionTimestamp"] = json!(match grace {
                    Some(seconds) => timestamp_after(seconds),
                    None => now(),
                });
                metadata["deletionGracePeriodSeconds"] = json!(grace.unwrap_or(0));
            }
            if let Some(finalizer) = finalizer {
                let finalizers = metadata["finalizers"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                // Foreground and Orphan replace each other, as the real server does.
                let mut finalizers: Vec<Value> = finalizers
                    .into_iter()
                    .filter(|f| f != FOREGROUND_FINALIZER && f != ORPHAN_FINALIZER)
                    .collect();
                finalizers.push(json!(finalizer));
                metadata["finalizers"] = Value::Array(finalizers);
            }
            if is_namespace {
                object["status"]["phase"] = json!("Terminating");
            }
            Ok(object)
        },
    )?;
    Ok(DeletionOutcome::Pending(written.object))
}
