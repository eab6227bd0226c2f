//! The ReplicaSet controller: keeps `spec.replicas` active Pods of the template, replacing Pods
//! that are deleted or finish, and reports replicas, ready and available counts.
//!
//! It manages the Pods that carry its controller reference; orphans matching its selector are
//! not adopted, and finished Pods are left for the Pod garbage collector as in a real cluster.

mod plan;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::controller::Action;
use kube::{Client, ResourceExt};
use tokio_util::sync::CancellationToken;

pub use plan::{ReplicaSetPlan, is_available, plan_replicaset};

use super::informer::run_owning_controller;
use super::pods::{controlled_by, controller_reference, pod_from_template};
use super::{ControllerError, TimeScale, ignore_codes};
use crate::scheduler::labels::selector_query;

struct ReplicaSetContext {
    client: Client,
    scale: TimeScale,
}

/// Runs the ReplicaSet controller until `token` is cancelled.
pub async fn run_replicaset_controller(client: Client, scale: TimeScale, token: CancellationToken) {
    let context = Arc::new(ReplicaSetContext {
        client: client.clone(),
        scale,
    });
    run_owning_controller::<ReplicaSet, Pod, _, _>(client, token, reconcile, context).await;
}

async fn reconcile(
    replica_set: Arc<ReplicaSet>,
    context: Arc<ReplicaSetContext>,
) -> Result<Action, ControllerError> {
    let namespace = replica_set.namespace().unwrap_or_default();
    let replica_sets: Api<ReplicaSet> = Api::namespaced(context.client.clone(), &namespace);
    let pods_api: Api<Pod> = Api::namespaced(context.client.clone(), &namespace);
    let Some(replica_set) = replica_sets.get_opt(&replica_set.name_any()).await? else {
        return Ok(Action::await_change());
    };
    let Some(spec) = replica_set.spec.as_ref() else {
        return Ok(Action::await_change());
    };
    let uid = replica_set.uid().unwrap_or_default();
    let selector = selector_query(&spec.selector);
    let pods: Vec<Pod> = pods_api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items;
    let pods: Vec<Pod> = pods
        .into_iter()
        .filter(|p| controlled_by(&p.metadata, &uid))
        .collect();

    let plan = plan_replicaset(&replica_set, &pods, jiff::Timestamp::now(), context.scale);
    if replica_set.metadata.deletion_timestamp.is_none() {
        let template = spec.template.clone().unwrap_or_default();
        for _ in 0..plan.create {
            let pod = pod_from_template(
                &template,
                &replica_set.name_any(),
                controller_reference(&replica_set),
                None,
            );
            pods_api.create(&PostParams::default(), &pod).await?;
        }
    }
    for name in &plan.delete {
        ignore_codes(
            pods_api
                .delete(name, &DeleteParams::background())
                .await
                .map(drop),
            &[404],
        )?;
    }
    if replica_set.status.as_ref() != Some(&plan.status) {
        let mut updated = replica_set.clone();
        updated.status = Some(plan.status.clone());
        let written = replica_sets
            .replace_status(&replica_set.name_any(), &PostParams::default(), &updated)
            .await;
        ignore_codes(written.map(drop), &[404])?;
    }
    Ok(plan
        .requeue_after
        .map_or_else(Action::await_change, |wait| {
            Action::requeue(wait + Duration::from_millis(10))
        }))
}
