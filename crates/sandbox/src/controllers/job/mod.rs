//! The Job controller (with the TTL-after-finished controller folded in): Pods from the
//! template until enough succeed, `backoffLimit`, `activeDeadlineSeconds`, suspension,
//! `Complete`/`Failed` conditions, and deletion `ttlSecondsAfterFinished` after the end.
//!
//! `completionMode: Indexed`, `podFailurePolicy` rules and `successPolicy` are not implemented:
//! such a Job gets a Warning event saying so and is left alone.

mod plan;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, PropagationPolicy};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use tokio_util::sync::CancellationToken;

pub use plan::{JOB_CONTROLLER, JobPlan, TRACKING_FINALIZER, managed_elsewhere, plan_job};

use super::informer::run_owning_controller;
use super::pods::{controlled_by, controller_reference, pod_from_template};
use super::{ControllerError, TimeScale, ignore_codes};
use crate::scheduler::labels::selector_query;

struct JobContext {
    client: Client,
    scale: TimeScale,
    recorder: Recorder,
}

/// Runs the Job controller until `token` is cancelled.
pub async fn run_job_controller(client: Client, scale: TimeScale, token: CancellationToken) {
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "job-controller".into(),
            instance: None,
        },
    );
    let context = Arc::new(JobContext {
        client: client.clone(),
        scale,
        recorder,
    });
    run_owning_controller::<Job, Pod, _, _>(client, token, reconcile, context).await;
}

async fn reconcile(job: Arc<Job>, context: Arc<JobContext>) -> Result<Action, ControllerError> {
    let namespace = job.namespace().unwrap_or_default();
    let jobs: Api<Job> = Api::namespaced(context.client.clone(), &namespace);
    let pods_api: Api<Pod> = Api::namespaced(context.client.clone(), &namespace);
    // The cached Job may trail our own status writes; decide on the stored one.
    let Some(job) = jobs.get_opt(&job.name_any()).await? else {
        return Ok(Action::await_change());
    };
    let uid = job.uid().unwrap_or_default();
    let pods: Vec<Pod> = match job.spec.as_ref().and_then(|s| s.selector.as_ref()) {
        Some(selector) => {
            pods_api
                .list(&ListParams::default().labels(&selector_query(selector)))
                .await?
                .items
        }
        None => Vec::new(),
    };
    let pods: Vec<Pod> = pods
        .into_iter()
        .filter(|p| controlled_by(&p.metadata, &uid))
        .collect();

    if job.metadata.deletion_timestamp.is_some() {
        for pod in pods
            .iter()
            .filter(|p| p.finalizers().iter().any(|f| f == TRACKING_FINALIZER))
        {
            remove_tracking_finalizer(&pods_api, pod).await?;
        }
        return Ok(Action::await_change());
    }
    if managed_elsewhere(&job) {
        return Ok(Action::await_change());
    }
    if let Some(unsupported) = unsupported_feature(&job) {
        let note = format!(
            "{unsupported} is not supported by the sandbox's Job controller; the Job is left alone"
        );
        publish(&context, &job, EventType::Warning, "UnsupportedJob", note).await;
        return Ok(Action::await_change());
    }

    let plan = plan_job(&job, &pods, jiff::Timestamp::now(), context.scale);
    let mut current = job.clone();
    if Some(&plan.status_with_uncounted) != job.status.as_ref() {
        current.status = Some(plan.status_with_uncounted.clone());
        current = jobs
            .replace_status(&job.name_any(), &PostParams::default(), &current)
            .await?;
    }
    for name in &plan.remove_finalizers {
        if let Some(pod) = pods.iter().find(|p| p.metadata.name.as_ref() == Some(name)) {
            remove_tracking_finalizer(&pods_api, pod).await?;
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
    let template = job
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    for _ in 0..plan.create {
        let pod = pod_from_template(
            &template,
            &job.name_any(),
            controller_reference(&job),
            Some(vec![TRACKING_FINALIZER.to_string()]),
        );
        let created = pods_api.create(&PostParams::default(), &pod).await?;
        publish(
            &context,
            &job,
            EventType::Normal,
            "SuccessfulCreate",
            format!("Created pod: {}", created.name_any()),
        )
        .await;
    }
    if current.status.as_ref() != Some(&plan.status) {
        let was_finished = finished_reason(&current);
        current.status = Some(plan.status.clone());
        jobs.replace_status(&job.name_any(), &PostParams::default(), &current)
            .await?;
        if was_finished.is_none()
            && let Some((type_, reason)) = finished_reason(&current)
        {
            let event_type = if type_ == "Failed" {
                EventType::Warning
            } else {
                EventType::Normal
            };
            publish(
                &context,
                &job,
                event_type,
                &reason,
                format!("Job {}", type_.to_lowercase()),
            )
            .await;
        }
    }
    if plan.delete_job {
        let params = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Foreground),
            ..DeleteParams::default()
        };
        let preconditions = kube::api::Preconditions {
            uid: job.uid(),
            ..Default::default()
        };
        let deleted = jobs
            .delete(
                &job.name_any(),
                &DeleteParams {
                    preconditions: Some(preconditions),
                    ..params
                },
            )
            .await;
        ignore_codes(deleted.map(drop), &[404, 409])?;
        return Ok(Action::await_change());
    }
    Ok(plan
        .requeue_after
        .map_or_else(Action::await_change, |wait| {
            Action::requeue(wait + Duration::from_millis(10))
        }))
}

/// The Job's terminal condition (type, reason), if it has one.
fn finished_reason(job: &Job) -> Option<(String, String)> {
    let conditions = job.status.as_ref()?.conditions.as_ref()?;
    conditions
        .iter()
        .find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
        .map(|c| (c.type_.clone(), c.reason.clone().unwrap_or_default()))
}

/// A feature of the Job this controller does not implement, named as in the API.
fn unsupported_feature(job: &Job) -> Option<&'static str> {
    let spec = job.spec.as_ref()?;
    if spec.completion_mode.as_deref() == Some("Indexed") {
        Some("completionMode: Indexed")
    } else if spec.pod_failure_policy.is_some() {
        Some("podFailurePolicy")
    } else if spec.success_policy.is_some() {
        Some("successPolicy")
    } else {
        None
    }
}

/// Removes the tracking finalizer, guarded by the Pod's resourceVersion so a concurrent change
/// of its finalizers is not lost.
async fn remove_tracking_finalizer(pods: &Api<Pod>, pod: &Pod) -> Result<(), ControllerError> {
    let remaining: Vec<&String> = pod
        .finalizers()
        .iter()
        .filter(|f| *f != TRACKING_FINALIZER)
        .collect();
    let patch =
        json!({"metadata": {"resourceVersion": pod.resource_version(), "finalizers": remaining}});
    ignore_codes(
        pods.patch(
            &pod.name_any(),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await
        .map(drop),
        &[404],
    )
}

async fn publish(context: &JobContext, job: &Job, type_: EventType, reason: &str, note: String) {
    let event = Event {
        type_,
        reason: reason.to_string(),
        note: Some(note),
        action: "Sync".to_string(),
        secondary: None,
    };
    if let Err(error) = context.recorder.publish(&event, &job.object_ref(&())).await {
        tracing::debug!(%error, "publishing a Job event failed");
    }
}
