//! The EtcdCluster's finalizer, and why there is one.
//!
//! Owner references alone do not clean up: every EtcdMember carries the `member-cleanup`
//! finalizer, which only this operator removes, and once the EtcdCluster object is gone the
//! controller has nothing to reconcile (it is keyed on the cluster). Garbage collection would
//! mark the members deleted and leave them, with their Pods and PVCs, forever. With the
//! `cluster-cleanup` finalizer the EtcdCluster stays, with its deletionTimestamp, until rule 1
//! of the planner has deleted every member and removed their finalizers; then the finalizer
//! goes and garbage collection takes the Services, the PDB, the Pods and the PVCs.

use etcd_operator_api::EtcdCluster;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::act::{ActContext, ActError, ObjectKind, Written};
use crate::build::REPORTING_COMPONENT;

/// The finalizer the operator puts on every EtcdCluster.
pub const CLUSTER_FINALIZER: &str = "etcd-operator.cozystack.io/cluster-cleanup";

pub fn has_finalizer(cluster: &EtcdCluster) -> bool {
    cluster
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == CLUSTER_FINALIZER)
}

/// Adds the finalizer (before anything is created for the cluster).
pub async fn add(ctx: &ActContext, cluster: &EtcdCluster) -> Result<Written, ActError> {
    let mut finalizers = cluster.metadata.finalizers.clone().unwrap_or_default();
    finalizers.push(CLUSTER_FINALIZER.to_string());
    patch_finalizers(ctx, cluster, finalizers).await
}

/// Removes the finalizer (once every member is gone).
pub async fn remove(ctx: &ActContext, cluster: &EtcdCluster) -> Result<Written, ActError> {
    let finalizers = cluster
        .metadata
        .finalizers
        .iter()
        .flatten()
        .filter(|f| *f != CLUSTER_FINALIZER)
        .cloned()
        .collect();
    patch_finalizers(ctx, cluster, finalizers).await
}

/// A merge patch of the whole list, with the observed resourceVersion, so a finalizer another
/// controller added meanwhile is never dropped (the patch fails with 409 instead).
async fn patch_finalizers(
    ctx: &ActContext,
    cluster: &EtcdCluster,
    finalizers: Vec<String>,
) -> Result<Written, ActError> {
    let namespace = cluster.metadata.namespace.clone().unwrap_or_default();
    let name = cluster.metadata.name.clone().unwrap_or_default();
    let api: Api<EtcdCluster> = Api::namespaced(ctx.client.clone(), &namespace);
    let patch = json!({
        "metadata": {
            "resourceVersion": cluster.metadata.resource_version,
            "finalizers": finalizers,
        }
    });
    let params = PatchParams {
        field_manager: Some(REPORTING_COMPONENT.to_string()),
        ..Default::default()
    };
    ctx.count_write("EtcdCluster");
    let patched = api
        .patch(&name, &params, &Patch::Merge(&patch))
        .await
        .map_err(|e| {
            ActError::from_kube(format!("finalizers of EtcdCluster {namespace}/{name}"), e)
        })?;
    Ok(Written::updated(
        ObjectKind::Cluster,
        &namespace,
        &name,
        &patched.metadata,
    ))
}
