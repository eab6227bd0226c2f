//! The status writes of a plan: the cluster's first, then each member's, through the status
//! subresource with the observed resourceVersion, so a write computed from a stale read fails
//! (409) instead of clobbering a newer status.

use etcd_operator_api::{EtcdCluster, EtcdClusterStatus, EtcdMember};
use kube::Api;
use kube::api::PostParams;

use super::{ActContext, ActError, ObjectKind, Written};
use crate::plan::{MemberStatusWrite, Observed};

/// Writes the cluster status; returns what was written.
pub async fn write_cluster_status(
    ctx: &ActContext,
    observed: &Observed,
    status: &EtcdClusterStatus,
) -> Result<Written, ActError> {
    let mut updated = observed.cluster.clone();
    updated.status = Some(status.clone());
    replace_cluster_status(ctx, &updated).await
}

/// Records `status.authEnabled: true` on the cluster as it is now (its status was just
/// written by this pass, so the observed resourceVersion is stale: read, set, replace).
pub async fn latch_auth_enabled(
    ctx: &ActContext,
    observed: &Observed,
) -> Result<Written, ActError> {
    let (api, namespace, name) = cluster_api(ctx, &observed.cluster);
    // GET of the object itself: RBAC grants get on etcdclusters, update on their status.
    let mut current = api
        .get(&name)
        .await
        .map_err(|e| ActError::from_kube(format!("status of EtcdCluster {namespace}/{name}"), e))?;
    current
        .status
        .get_or_insert_with(Default::default)
        .auth_enabled = Some(true);
    replace_cluster_status(ctx, &current).await
}

fn cluster_api(ctx: &ActContext, cluster: &EtcdCluster) -> (Api<EtcdCluster>, String, String) {
    let name = cluster.metadata.name.clone().unwrap_or_default();
    let namespace = cluster.metadata.namespace.clone().unwrap_or_default();
    (
        Api::namespaced(ctx.client.clone(), &namespace),
        namespace,
        name,
    )
}

/// Replaces the status of `cluster` (its resourceVersion guards the write).
async fn replace_cluster_status(
    ctx: &ActContext,
    cluster: &EtcdCluster,
) -> Result<Written, ActError> {
    let (api, namespace, name) = cluster_api(ctx, cluster);
    let what = format!("status of EtcdCluster {namespace}/{name}");
    ctx.count_write("EtcdCluster/status");
    let written = api
        .replace_status(&name, &post_params(), cluster)
        .await
        .map_err(|e| ActError::from_kube(what, e))?;
    Ok(Written::updated(
        ObjectKind::Cluster,
        &namespace,
        &name,
        &written.metadata,
    ))
}

/// Writes one member's status; returns what was written.
pub async fn write_member_status(
    ctx: &ActContext,
    observed: &Observed,
    write: &MemberStatusWrite,
) -> Result<Written, ActError> {
    let namespace = observed
        .cluster
        .metadata
        .namespace
        .clone()
        .unwrap_or_default();
    let what = format!("status of EtcdMember {namespace}/{}", write.member);
    let Some(member) = observed
        .members
        .iter()
        .map(|m| &m.member)
        .find(|m| m.metadata.name.as_deref() == Some(write.member.as_str()))
    else {
        // The planner only writes statuses of members it observed.
        return Err(ActError::NotObserved { what });
    };
    let mut updated = member.clone();
    updated.status = Some(write.status.clone());
    let api: Api<EtcdMember> = Api::namespaced(ctx.client.clone(), &namespace);
    ctx.count_write("EtcdMember/status");
    let written = api
        .replace_status(&write.member, &post_params(), &updated)
        .await
        .map_err(|e| ActError::from_kube(what, e))?;
    Ok(Written::updated(
        ObjectKind::Member,
        &namespace,
        &write.member,
        &written.metadata,
    ))
}

pub fn post_params() -> PostParams {
    PostParams {
        dry_run: false,
        field_manager: Some(crate::build::REPORTING_COMPONENT.to_string()),
    }
}
