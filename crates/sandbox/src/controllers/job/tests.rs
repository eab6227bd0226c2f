//! The Job plan on plain values.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::{JobPlan, TRACKING_FINALIZER, plan_job};
use crate::controllers::TimeScale;

fn now() -> Timestamp {
    "2025-01-01T12:00:00Z".parse().unwrap()
}

fn ago(seconds: i64) -> String {
    (now() - SignedDuration::from_secs(seconds)).to_string()
}

fn job(spec: Value, status: Value) -> Job {
    let mut full = json!({
        "parallelism": 1, "completions": 1, "backoffLimit": 6,
        "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}},
    });
    for (key, value) in spec.as_object().cloned().unwrap_or_default() {
        full[key] = value;
    }
    serde_json::from_value(json!({"metadata": {"name": "j", "namespace": "default", "uid": "job-uid"}, "spec": full, "status": status})).unwrap()
}

/// A Pod of the Job in `phase`, with the tracking finalizer when `tracked`.
fn job_pod(name: &str, phase: &str, tracked: bool) -> Pod {
    let finalizers: Vec<&str> = if tracked {
        vec![TRACKING_FINALIZER]
    } else {
        vec![]
    };
    serde_json::from_value(json!({
        "metadata": {"name": name, "uid": format!("uid-{name}"), "finalizers": finalizers, "creationTimestamp": ago(30)},
        "spec": {"containers": [{"name": "main", "image": "busybox"}], "nodeName": "node-1"},
        "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": ago(20)}]},
    }))
    .unwrap()
}

fn plan(job: &Job, pods: &[Pod]) -> JobPlan {
    plan_job(job, pods, now(), TimeScale::REAL)
}

fn condition(plan: &JobPlan, type_: &str) -> Option<(String, String)> {
    let condition = plan
        .status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_ && c.status == "True")?;
    Some((
        condition.reason.clone().unwrap_or_default(),
        condition.message.clone().unwrap_or_default(),
    ))
}

#[test]
fn a_new_job_starts_one_pod_and_its_clock() {
    let plan = plan(&job(json!({}), json!({})), &[]);
    assert_eq!(plan.create, 1);
    assert_eq!(plan.status.active, Some(1));
    assert_eq!(plan.status.start_time.as_ref().map(|t| t.0), Some(now()));
    assert!(plan.delete.is_empty() && !plan.delete_job);
}

#[test]
fn finished_pods_are_counted_once_through_uncounted_uids() {
    let running = job(
        json!({"parallelism": 2, "completions": 3}),
        json!({"startTime": ago(60)}),
    );
    let pods = [
        job_pod("a", "Succeeded", true),
        job_pod("b", "Running", true),
    ];
    let first = plan(&running, &pods);
    let uncounted = first
        .status_with_uncounted
        .uncounted_terminated_pods
        .clone()
        .unwrap();
    assert_eq!(uncounted.succeeded, Some(vec!["uid-a".to_string()]));
    assert_eq!(
        first.status_with_uncounted.succeeded, None,
        "counters move only after the finalizers go"
    );
    assert_eq!(first.remove_finalizers, ["a"]);
    assert_eq!(first.status.succeeded, Some(1));
    assert_eq!(
        first
            .status
            .uncounted_terminated_pods
            .as_ref()
            .and_then(|u| u.succeeded.clone()),
        None
    );
    assert_eq!(
        first.create, 1,
        "two more completions needed, parallelism 2, one running"
    );
    // Once counted (finalizer gone), the Pod is not counted again.
    let counted = job(
        json!({"parallelism": 2, "completions": 3}),
        json!({"startTime": ago(60), "succeeded": 1}),
    );
    let again = plan(
        &counted,
        &[
            job_pod("a", "Succeeded", false),
            job_pod("b", "Running", true),
        ],
    );
    assert_eq!(again.status.succeeded, Some(1));
    assert!(again.remove_finalizers.is_empty());
}

#[test]
fn enough_successes_complete_the_job() {
    let job = job(json!({}), json!({"startTime": ago(60)}));
    let plan = plan(&job, &[job_pod("a", "Succeeded", true)]);
    let reached = Some((
        "CompletionsReached".to_string(),
        "Reached expected number of succeeded pods".to_string(),
    ));
    assert_eq!(condition(&plan, "SuccessCriteriaMet"), reached);
    assert_eq!(condition(&plan, "Complete"), reached);
    assert_eq!(
        plan.status.completion_time.as_ref().map(|t| t.0),
        Some(now())
    );
    assert_eq!(
        (plan.create, plan.status.succeeded, plan.status.active),
        (0, Some(1), Some(0))
    );
}

#[test]
fn failures_past_the_backoff_limit_fail_the_job() {
    let job = job(
        json!({"backoffLimit": 1}),
        json!({"startTime": ago(60), "failed": 1}),
    );
    let plan = plan(
        &job,
        &[job_pod("a", "Failed", false), job_pod("b", "Failed", true)],
    );
    let exceeded = Some((
        "BackoffLimitExceeded".to_string(),
        "Job has reached the specified backoff limit".to_string(),
    ));
    assert_eq!(condition(&plan, "FailureTarget"), exceeded);
    assert_eq!(condition(&plan, "Failed"), exceeded);
    assert_eq!((plan.create, plan.status.failed), (0, Some(2)));
}

#[test]
fn a_failing_job_stops_its_pods_before_it_is_failed() {
    let job = job(
        json!({"backoffLimit": 0, "parallelism": 2, "completions": 2}),
        json!({"startTime": ago(60)}),
    );
    let plan = plan(
        &job,
        &[job_pod("a", "Failed", true), job_pod("b", "Running", true)],
    );
    assert!(condition(&plan, "FailureTarget").is_some());
    assert!(condition(&plan, "Failed").is_none(), "b still runs");
    assert_eq!(plan.delete, ["b"]);
    assert_eq!(plan.status.terminating, Some(1));
}

#[test]
fn the_active_deadline_fails_the_job_in_scaled_time() {
    let job = job(
        json!({"activeDeadlineSeconds": 60}),
        json!({"startTime": ago(1)}),
    );
    let running = [job_pod("a", "Running", true)];
    let real = plan(&job, &running);
    assert!(condition(&real, "FailureTarget").is_none());
    assert_eq!(real.requeue_after, Some(Duration::from_secs(59)));
    let fast = plan_job(&job, &running, now(), TimeScale::new(0.01).unwrap());
    let exceeded = Some((
        "DeadlineExceeded".to_string(),
        "Job was active longer than specified deadline".to_string(),
    ));
    assert_eq!(condition(&fast, "FailureTarget"), exceeded);
    assert_eq!(fast.delete, ["a"]);
}

#[test]
fn replacements_wait_out_the_failure_backoff() {
    let job = job(json!({}), json!({"startTime": ago(60), "failed": 1}));
    let mut failed = job_pod("a", "Failed", false);
    failed.status.as_mut().unwrap().conditions.as_mut().unwrap()[0].last_transition_time = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now() - SignedDuration::from_secs(4)),
    );
    let plan = plan(&job, std::slice::from_ref(&failed));
    assert_eq!(plan.create, 0);
    assert_eq!(plan.requeue_after, Some(Duration::from_secs(6)));
    let later = plan_job(
        &job,
        &[failed],
        now() + SignedDuration::from_secs(7),
        TimeScale::REAL,
    );
    assert_eq!(later.create, 1);
}

#[test]
fn finished_jobs_are_deleted_after_their_ttl() {
    let finished = |ttl: i32| {
        job(
            json!({"ttlSecondsAfterFinished": ttl}),
            json!({"startTime": ago(60), "succeeded": 1, "conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": ago(5)}]}),
        )
    };
    assert!(plan(&finished(3), &[]).delete_job);
    let waiting = plan(&finished(10), &[]);
    assert!(!waiting.delete_job);
    assert_eq!(waiting.requeue_after, Some(Duration::from_secs(5)));
    // Pods of a finished Job lose their finalizer without being counted again.
    let leftover = plan(&finished(10), &[job_pod("x", "Running", true)]);
    assert_eq!(leftover.remove_finalizers, ["x"]);
    assert_eq!(leftover.status.succeeded, Some(1));
}

#[test]
fn suspension_stops_pods_and_resumption_restarts_them() {
    let suspended = job(json!({"suspend": true}), json!({"startTime": ago(60)}));
    let stopping = plan(&suspended, &[job_pod("a", "Running", true)]);
    assert_eq!(stopping.delete, ["a"]);
    assert_eq!(
        condition(&stopping, "Suspended").map(|c| c.0),
        Some("JobSuspended".into())
    );
    assert!(stopping.status.start_time.is_none());
    let resumed = job(
        json!({}),
        json!({"conditions": [{"type": "Suspended", "status": "True", "reason": "JobSuspended"}]}),
    );
    let restarting = plan(&resumed, &[]);
    assert_eq!(restarting.create, 1);
    let condition = restarting
        .status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Suspended")
        .unwrap();
    assert_eq!(
        (condition.status.as_str(), condition.reason.as_deref()),
        ("False", Some("JobResumed"))
    );
}

#[test]
fn container_restarts_count_against_the_limit_with_on_failure() {
    let spec = json!({"backoffLimit": 2, "template": {"spec": {"restartPolicy": "OnFailure", "containers": [{"name": "main", "image": "busybox"}]}}});
    let job = job(spec, json!({"startTime": ago(60)}));
    let mut restarting = job_pod("a", "Running", true);
    restarting.status.as_mut().unwrap().container_statuses =
        Some(vec![serde_json::from_value(json!({
        "name": "main", "image": "busybox", "imageID": "", "ready": false, "restartCount": 2,
    }))
    .unwrap()]);
    let plan = plan(&job, &[restarting]);
    assert_eq!(
        condition(&plan, "FailureTarget").map(|c| c.0),
        Some("BackoffLimitExceeded".into())
    );
}

#[test]
fn deleted_pods_count_as_failed_unless_only_failed_pods_are_replaced() {
    let mut deleted = job_pod("a", "Running", true);
    deleted.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()));
    let default_policy = plan(
        &job(json!({}), json!({"startTime": ago(60)})),
        std::slice::from_ref(&deleted),
    );
    assert_eq!(default_policy.status.failed, Some(1));
    assert_eq!(
        default_policy.create, 0,
        "the failure backoff runs from the deletion"
    );
    let failed_only = plan(
        &job(
            json!({"podReplacementPolicy": "Failed"}),
            json!({"startTime": ago(60)}),
        ),
        &[deleted],
    );
    assert_eq!(
        (failed_only.status.failed, failed_only.create),
        (Some(0), 0),
        "waits for the Pod to end"
    );
}
