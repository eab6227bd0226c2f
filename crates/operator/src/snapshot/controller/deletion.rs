//! `deletionPolicy: Delete`: the artifact finalizer, and the stored object deleted (only when
//! it is this snapshot's) before the finalizer goes.

use std::time::Duration;

use etcd_operator_api::EtcdSnapshot;
use etcd_operator_api::snapshot::SnapshotDeletionPolicy;
use kube::Api;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::json;
use tracing::{info, warn};

use super::super::decide::{Existing, Failure};
use super::super::store;
use super::context::{SnapshotContext, SnapshotError, event, name};
use super::pvc_destination::delete_pvc_artifact;
use super::take::credentials;

/// The finalizer of an EtcdSnapshot with `deletionPolicy: Delete`: its stored object is
/// deleted before the EtcdSnapshot goes.
pub const ARTIFACT_FINALIZER: &str = "etcd-operator.cozystack.io/snapshot-artifact";

/// How often a stored object that could not be deleted is tried again.
pub(super) const ARTIFACT_RETRY: Duration = Duration::from_secs(30);

pub(super) fn wants_artifact_deleted(snapshot: &EtcdSnapshot) -> bool {
    snapshot.spec.deletion_policy == Some(SnapshotDeletionPolicy::Delete)
}

pub(super) fn has_artifact_finalizer(snapshot: &EtcdSnapshot) -> bool {
    snapshot
        .metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == ARTIFACT_FINALIZER))
}

/// The deletion policy's part of a pass: with `Delete`, the finalizer is put on first; once
/// the EtcdSnapshot is being deleted, its stored object is deleted (only an object this snapshot
/// wrote) and the finalizer removed. `Some` ends the pass.
pub(super) async fn deletion(
    ctx: &SnapshotContext,
    snapshot: &EtcdSnapshot,
) -> Result<Option<Action>, SnapshotError> {
    let namespace = snapshot.metadata.namespace.clone().unwrap_or_default();
    let api: Api<EtcdSnapshot> = Api::namespaced(ctx.act.client.clone(), &namespace);
    let own = name(snapshot);
    let finalizers = |list: Vec<String>| json!({"metadata": {"finalizers": list, "resourceVersion": snapshot.metadata.resource_version}});
    let current: Vec<String> = snapshot.metadata.finalizers.clone().unwrap_or_default();
    if snapshot.metadata.deletion_timestamp.is_none() {
        if wants_artifact_deleted(snapshot) && !has_artifact_finalizer(snapshot) {
            let mut list = current;
            list.push(ARTIFACT_FINALIZER.to_string());
            ctx.act.count_write("EtcdSnapshot");
            api.patch(
                &own,
                &PatchParams::default(),
                &Patch::Merge(finalizers(list)),
            )
            .await
            .map_err(|e| SnapshotError::Read(format!("EtcdSnapshot {namespace}/{own}"), e))?;
        }
        return Ok(None);
    }
    if !has_artifact_finalizer(snapshot) {
        return Ok(Some(Action::await_change()));
    }
    let deleted = if snapshot.spec.destination.pvc.is_some() {
        match delete_pvc_artifact(ctx, snapshot).await? {
            Some(outcome) => outcome,
            // The removal Pod is at work.
            None => return Ok(Some(Action::requeue(Duration::from_secs(2)))),
        }
    } else {
        delete_artifact(ctx, snapshot).await
    };
    match deleted {
        Ok(said) => {
            info!(namespace = %namespace, snapshot = %own, "{said}");
            event(ctx, snapshot, "Normal", "ArtifactDeleted", &said).await;
        }
        Err(failure) => {
            let message = format!(
                "cannot delete the stored snapshot: {}; retrying every {} s. To keep the object \
                 and let the EtcdSnapshot go, remove the finalizer {ARTIFACT_FINALIZER}",
                failure.message(),
                ARTIFACT_RETRY.as_secs()
            );
            warn!(namespace = %namespace, snapshot = %own, "{message}");
            event(ctx, snapshot, "Warning", "ArtifactNotDeleted", &message).await;
            return Ok(Some(Action::requeue(ARTIFACT_RETRY)));
        }
    }
    let list: Vec<String> = current
        .into_iter()
        .filter(|f| f != ARTIFACT_FINALIZER)
        .collect();
    ctx.act.count_write("EtcdSnapshot");
    match api
        .patch(
            &own,
            &PatchParams::default(),
            &Patch::Merge(finalizers(list)),
        )
        .await
    {
        Ok(_) => Ok(Some(Action::await_change())),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(Some(Action::await_change())),
        Err(e) => Err(SnapshotError::Read(
            format!("EtcdSnapshot {namespace}/{own}"),
            e,
        )),
    }
}

/// Deletes the stored object of `snapshot` if this snapshot wrote it; says what was done.
pub(super) async fn delete_artifact(
    ctx: &SnapshotContext,
    snapshot: &EtcdSnapshot,
) -> Result<String, Failure> {
    let destination = &snapshot.spec.destination;
    let Ok(target) = store::target(destination, &name(snapshot)) else {
        return Ok("no object-store artifact to delete".to_string());
    };
    let namespace = snapshot.metadata.namespace.clone().unwrap_or_default();
    let uid = snapshot.metadata.uid.clone().unwrap_or_default();
    let uri = target.uri;
    let credentials = credentials(ctx, &namespace, destination).await?;
    let store = store::open(destination, &credentials, &ctx.stores)?;
    let path = target.path;
    match store::existing(&store, &path).await? {
        Existing::Absent => Ok(format!("{uri} is not in the store (nothing to delete)")),
        Existing::Present {
            writer: Some(writer),
        } if writer == uid => {
            store::delete(&store, &path).await?;
            Ok(format!("deleted {uri} (deletionPolicy Delete)"))
        }
        Existing::Present { .. } => Ok(format!(
            "{uri} was written by another EtcdSnapshot: left in the store"
        )),
    }
}
