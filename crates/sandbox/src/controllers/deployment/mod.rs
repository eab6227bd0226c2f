//! The Deployment controller: one ReplicaSet per template (named `<deployment>-<pod-template-hash>`),
//! rolled from old to new by the strategy, old ones kept up to `revisionHistoryLimit`, and the
//! status (replicas, updated, ready, available, `Available` and `Progressing` conditions) that
//! `kubectl rollout status` reads. The ReplicaSet controller keeps each ReplicaSet's Pods.
//!
//! Not implemented: proportional scaling of several live ReplicaSets when a rollout is scaled
//! mid-way (the rolling step converges anyway), and rollouts of a paused Deployment (it only
//! reports status until resumed).

mod rollout;
mod status;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use tokio_util::sync::CancellationToken;

pub use rollout::{
    DeploymentPlan, POD_TEMPLATE_HASH, REVISION, RolloutStep, plan_deployment, template_hash,
};

use super::informer::run_owning_controller;
use super::pods::controlled_by;
use super::{ControllerError, TimeScale, ignore_codes};
use crate::scheduler::labels::selector_query;

struct DeploymentContext {
    client: Client,
    scale: TimeScale,
    recorder: Recorder,
}

/// Runs the Deployment controller until `token` is cancelled.
pub async fn run_deployment_controller(client: Client, scale: TimeScale, token: CancellationToken) {
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "deployment-controller".into(),
            instance: None,
        },
    );
    let context = Arc::new(DeploymentContext {
        client: client.clone(),
        scale,
        recorder,
    });
    run_owning_controller::<Deployment, ReplicaSet, _, _>(client, token, reconcile, context).await;
}

async fn reconcile(
    deployment: Arc<Deployment>,
    context: Arc<DeploymentContext>,
) -> Result<Action, ControllerError> {
    let namespace = deployment.namespace().unwrap_or_default();
    let deployments: Api<Deployment> = Api::namespaced(context.client.clone(), &namespace);
    let replica_sets: Api<ReplicaSet> = Api::namespaced(context.client.clone(), &namespace);
    let Some(deployment) = deployments.get_opt(&deployment.name_any()).await? else {
        return Ok(Action::await_change());
    };
    if deployment.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let uid = deployment.uid().unwrap_or_default();
    let selector = deployment
        .spec
        .as_ref()
        .map(|s| selector_query(&s.selector))
        .unwrap_or_default();
    let owned: Vec<ReplicaSet> = replica_sets
        .list(&ListParams::default().labels(&selector))
        .await?
        .items;
    let owned: Vec<ReplicaSet> = owned
        .into_iter()
        .filter(|rs| controlled_by(&rs.metadata, &uid))
        .collect();

    let plan = plan_deployment(&deployment, &owned, jiff::Timestamp::now(), context.scale);
    for step in &plan.steps {
        match step {
            RolloutStep::Create(replica_set) => {
                let created = replica_sets
                    .create(&PostParams::default(), replica_set)
                    .await;
                ignore_codes(created.map(drop), &[409])?;
                let note = format!(
                    "Scaled up replica set {} to {}",
                    replica_set.name_any(),
                    replica_set
                        .spec
                        .as_ref()
                        .and_then(|s| s.replicas)
                        .unwrap_or(0)
                );
                publish(&context, &deployment, "ScalingReplicaSet", note).await;
            }
            RolloutStep::Scale { name, replicas } => {
                let before = owned
                    .iter()
                    .find(|rs| rs.metadata.name.as_ref() == Some(name))
                    .and_then(|rs| rs.spec.as_ref()?.replicas)
                    .unwrap_or(0);
                let desired = deployment
                    .spec
                    .as_ref()
                    .and_then(|s| s.replicas)
                    .unwrap_or(1);
                let patch = json!({
                    "metadata": {"annotations": {"deployment.kubernetes.io/desired-replicas": desired.to_string()}},
                    "spec": {"replicas": replicas},
                });
                ignore_codes(
                    replica_sets
                        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
                        .await
                        .map(drop),
                    &[404],
                )?;
                let direction = if *replicas > before { "up" } else { "down" };
                publish(
                    &context,
                    &deployment,
                    "ScalingReplicaSet",
                    format!("Scaled {direction} replica set {name} from {before} to {replicas}"),
                )
                .await;
            }
            RolloutStep::Revise { name, revision } => {
                let patch = json!({"metadata": {"annotations": {REVISION: revision.to_string()}}});
                ignore_codes(
                    replica_sets
                        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
                        .await
                        .map(drop),
                    &[404],
                )?;
            }
            RolloutStep::Delete(name) => {
                ignore_codes(
                    replica_sets
                        .delete(name, &DeleteParams::background())
                        .await
                        .map(drop),
                    &[404],
                )?;
            }
        }
    }
    let mut current = deployment.clone();
    if deployment.annotations().get(REVISION) != Some(&plan.revision) && plan.revision != "0" {
        let patch = json!({"metadata": {"annotations": {REVISION: plan.revision}}});
        current = deployments
            .patch(
                &deployment.name_any(),
                &PatchParams::default(),
                &Patch::Merge(patch),
            )
            .await?;
    }
    if deployment.status.as_ref() != Some(&plan.status) {
        let mut updated = current;
        updated.status = Some(plan.status.clone());
        let written = deployments
            .replace_status(&deployment.name_any(), &PostParams::default(), &updated)
            .await;
        ignore_codes(written.map(drop), &[404])?;
    }
    Ok(plan
        .requeue_after
        .map_or_else(Action::await_change, |wait| {
            Action::requeue(wait + Duration::from_millis(10))
        }))
}

async fn publish(context: &DeploymentContext, deployment: &Deployment, reason: &str, note: String) {
    let event = Event {
        type_: EventType::Normal,
        reason: reason.to_string(),
        note: Some(note),
        action: "Scale".to_string(),
        secondary: None,
    };
    if let Err(error) = context
        .recorder
        .publish(&event, &deployment.object_ref(&()))
        .await
    {
        tracing::debug!(%error, "publishing a Deployment event failed");
    }
}
