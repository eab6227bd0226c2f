//! The Job controller's judgement, pure: from a Job, its Pods and the time, what to create,
//! delete and write.
//!
//! Pods carry the `batch.kubernetes.io/job-tracking` finalizer until they are counted: a finished
//! Pod's uid goes to `status.uncountedTerminatedPods` first, then its finalizer is removed, then
//! it moves to `succeeded`/`failed`, so no Pod is counted twice or lost, as in the real controller.
//! Terminal conditions wait until no Pod is still terminating: `FailureTarget` then `Failed`,
//! `SuccessCriteriaMet` then `Complete`.

use std::collections::BTreeSet;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus, UncountedTerminatedPods};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::controllers::TimeScale;
use crate::controllers::pods::{finish_time, is_active, is_ready};
use crate::scheduler::is_terminal;

pub const TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";
/// The value of `spec.managedBy` this controller answers to (and an unset one).
pub const JOB_CONTROLLER: &str = "kubernetes.io/job-controller";

/// The first delay after a failed Pod, doubled for each further failure, up to the maximum.
const FAILURE_BACKOFF: Duration = Duration::from_secs(10);
const MAX_FAILURE_BACKOFF: Duration = Duration::from_secs(600);

/// Why a Job fails: the condition's reason and message.
const BACKOFF_LIMIT_EXCEEDED: (&str, &str) = (
    "BackoffLimitExceeded",
    "Job has reached the specified backoff limit",
);
const DEADLINE_EXCEEDED: (&str, &str) = (
    "DeadlineExceeded",
    "Job was active longer than specified deadline",
);
const COMPLETIONS_REACHED: (&str, &str) = (
    "CompletionsReached",
    "Reached expected number of succeeded pods",
);

/// What one sync of a Job does.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct JobPlan {
    /// How many Pods to create from the template.
    pub create: usize,
    /// Names of active Pods to delete (failing, complete, suspended or over parallelism).
    pub delete: Vec<String>,
    /// The status recording newly finished Pods as uncounted, written before any finalizer goes.
    pub status_with_uncounted: JobStatus,
    /// Names of Pods whose tracking finalizer is removed once that status is written.
    pub remove_finalizers: Vec<String>,
    /// The status after the finalizers are gone.
    pub status: JobStatus,
    /// When to look again (a deadline, a backoff, a TTL), in real time.
    pub requeue_after: Option<Duration>,
    /// `ttlSecondsAfterFinished` has passed: delete the Job.
    pub delete_job: bool,
}

fn has_finalizer(pod: &Pod) -> bool {
    pod.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == TRACKING_FINALIZER)
}

fn condition_true<'a>(status: &'a JobStatus, type_: &str) -> Option<&'a JobCondition> {
    status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_ && c.status == "True")
}

/// Sets a condition, keeping its transition time when its status does not change.
fn set_condition(
    status: &mut JobStatus,
    type_: &str,
    value: &str,
    (reason, message): (&str, &str),
    now: Timestamp,
) {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let condition = JobCondition {
        type_: type_.to_string(),
        status: value.to_string(),
        reason: Some(reason.to_string()),
        message: Some(message.to_string()),
        last_probe_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(existing) if existing.status == value => {
            existing.reason = condition.reason;
            existing.message = condition.message;
        }
        Some(existing) => *existing = condition,
        None => conditions.push(condition),
    }
}

/// A Pod the Job counts as failed: Failed, or (unless only failed Pods are replaced) deleted
/// before it succeeded.
fn is_failed(pod: &Pod, only_replace_failed: bool) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    phase == Some("Failed")
        || (!only_replace_failed
            && pod.metadata.deletion_timestamp.is_some()
            && phase != Some("Succeeded"))
}

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

/// Whether `spec.managedBy` leaves this Job to another controller.
pub fn managed_elsewhere(job: &Job) -> bool {
    job.spec
        .as_ref()
        .and_then(|s| s.managed_by.as_deref())
        .is_some_and(|m| m != JOB_CONTROLLER)
}

/// Plans one sync of `job` with its `pods` at `now`.
pub fn plan_job(job: &Job, pods: &[Pod], now: Timestamp, scale: TimeScale) -> JobPlan {
    let spec = job.spec.clone().unwrap_or_default();
    let mut status = job.status.clone().unwrap_or_default();
    let only_replace_failed = spec.pod_replacement_policy.as_deref() == Some("Failed")
        || spec.pod_failure_policy.is_some();
    let finished = condition_true(&status, "Complete").is_some()
        || condition_true(&status, "Failed").is_some();

    // Count: newly finished Pods that still carry the finalizer become uncounted.
    let uncounted = status.uncounted_terminated_pods.clone().unwrap_or_default();
    let mut uncounted_succeeded: BTreeSet<String> =
        uncounted.succeeded.into_iter().flatten().collect();
    let mut uncounted_failed: BTreeSet<String> = uncounted.failed.into_iter().flatten().collect();
    let mut remove_finalizers = Vec::new();
    for pod in pods.iter().filter(|p| has_finalizer(p)) {
        let (id, name) = (uid(pod), pod.metadata.name.clone().unwrap_or_default());
        let succeeded = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded");
        if succeeded {
            uncounted_succeeded.insert(id);
        } else if is_failed(pod, only_replace_failed) {
            uncounted_failed.insert(id);
        } else if !finished {
            continue;
        }
        remove_finalizers.push(name);
    }
    status.uncounted_terminated_pods = Some(UncountedTerminatedPods {
        succeeded: Some(uncounted_succeeded.iter().cloned().collect()),
        failed: Some(uncounted_failed.iter().cloned().collect()),
    });
    let status_with_uncounted = status.clone();
    let succeeded = status.succeeded.unwrap_or(0) + uncounted_succeeded.len() as i32;
    let failed = status.failed.unwrap_or(0) + uncounted_failed.len() as i32;
    status.succeeded = Some(succeeded);
    status.failed = Some(failed);
    status.uncounted_terminated_pods = Some(UncountedTerminatedPods::default());

    let active: Vec<&Pod> = pods.iter().filter(|p| is_active(p)).collect();
    let terminating = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_some() && !is_terminal(p))
        .count();
    let mut plan = JobPlan {
        remove_finalizers,
        status_with_uncounted,
        ..JobPlan::default()
    };

    if finished {
        plan.requeue_after = ttl_wait(&spec, &status, now, scale, &mut plan.delete_job);
        status.active = Some(active.len() as i32);
        status.terminating = Some(terminating as i32);
        plan.status = status;
        return plan;
    }

    // Suspension removes the running Pods and stops the clock.
    let suspended = spec.suspend == Some(true);
    if suspended {
        plan.delete = active
            .iter()
            .map(|p| p.metadata.name.clone().unwrap_or_default())
            .collect();
        set_condition(
            &mut status,
            "Suspended",
            "True",
            ("JobSuspended", "Job suspended"),
            now,
        );
        status.start_time = None;
    } else {
        if status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Suspended" && c.status == "True")
        {
            set_condition(
                &mut status,
                "Suspended",
                "False",
                ("JobResumed", "Job resumed"),
                now,
            );
        }
        status.start_time.get_or_insert(Time(now));
    }
    let start = status.start_time.as_ref().map(|t| t.0);

    let backoff_limit = spec.backoff_limit.unwrap_or(6);
    let failure = if let Some(target) = condition_true(&status, "FailureTarget") {
        Some((
            target.reason.clone().unwrap_or_default(),
            target.message.clone().unwrap_or_default(),
        ))
    } else if failed > backoff_limit || past_backoff_limit_on_failure(&spec, &active, backoff_limit)
    {
        Some(owned(BACKOFF_LIMIT_EXCEEDED))
    } else if let (Some(deadline), Some(start), false) =
        (spec.active_deadline_seconds, start, suspended)
    {
        let expires = start + scale.span_seconds(deadline);
        if now >= expires {
            Some(owned(DEADLINE_EXCEEDED))
        } else {
            plan.requeue_after = Some(wait_until(now, expires));
            None
        }
    } else {
        None
    };

    let completions = spec.completions;
    let complete = match completions {
        Some(wanted) => succeeded >= wanted,
        None => succeeded > 0 && active.is_empty(),
    };
    if let Some((reason, message)) = failure {
        set_condition(
            &mut status,
            "FailureTarget",
            "True",
            (&reason, &message),
            now,
        );
        plan.delete = active
            .iter()
            .map(|p| p.metadata.name.clone().unwrap_or_default())
            .collect();
        if active.is_empty() && terminating == 0 {
            set_condition(&mut status, "Failed", "True", (&reason, &message), now);
            plan.requeue_after = ttl_wait(&spec, &status, now, scale, &mut plan.delete_job);
        }
        status.ready = Some(0);
        status.active = Some(0);
        status.terminating = Some((terminating + plan.delete.len()) as i32);
        plan.status = status;
        return plan;
    }
    if complete {
        set_condition(
            &mut status,
            "SuccessCriteriaMet",
            "True",
            COMPLETIONS_REACHED,
            now,
        );
        plan.delete = active
            .iter()
            .map(|p| p.metadata.name.clone().unwrap_or_default())
            .collect();
        if active.is_empty() && terminating == 0 {
            set_condition(&mut status, "Complete", "True", COMPLETIONS_REACHED, now);
            status.completion_time = Some(Time(now));
            plan.requeue_after = ttl_wait(&spec, &status, now, scale, &mut plan.delete_job);
        }
        status.ready = Some(0);
        status.active = Some(0);
        status.terminating = Some((terminating + plan.delete.len()) as i32);
        plan.status = status;
        return plan;
    }

    // Keep min(parallelism, completions still needed) Pods running.
    let parallelism = spec.parallelism.unwrap_or(1).max(0);
    let wanted = if suspended {
        0
    } else {
        match completions {
            Some(completions) => parallelism.min(completions - succeeded).max(0),
            None if succeeded > 0 => 0,
            None => parallelism,
        }
    } as usize;
    if !suspended && active.len() > wanted {
        let mut excess: Vec<&&Pod> = active.iter().collect();
        excess.sort_by_key(|p| {
            (
                is_ready(p),
                std::cmp::Reverse(p.metadata.creation_timestamp.clone()),
            )
        });
        plan.delete = excess
            .iter()
            .take(active.len() - wanted)
            .map(|p| p.metadata.name.clone().unwrap_or_default())
            .collect();
    }
    let waiting_for_terminating = only_replace_failed && terminating > 0;
    if active.len() < wanted && !waiting_for_terminating {
        match backoff_remaining(pods, failed, now, scale) {
            Some(wait) => {
                plan.requeue_after = Some(plan.requeue_after.map_or(wait, |r| r.min(wait)))
            }
            None => plan.create = wanted - active.len(),
        }
    }
    let kept: Vec<&&Pod> = active
        .iter()
        .filter(|p| {
            !plan
                .delete
                .iter()
                .any(|d| Some(d) == p.metadata.name.as_ref())
        })
        .collect();
    status.active = Some((kept.len() + plan.create) as i32);
    status.ready = Some(kept.iter().filter(|p| is_ready(p)).count() as i32);
    status.terminating = Some((terminating + plan.delete.len()) as i32);
    plan.status = status;
    plan
}

/// When a Pod the Job counts as failed failed: its finish, or its deletion if it never finished.
fn failure_time(pod: &Pod) -> Option<Timestamp> {
    if pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed") {
        finish_time(pod)
    } else if !is_terminal(pod) {
        pod.metadata.deletion_timestamp.as_ref().map(|t| t.0)
    } else {
        None
    }
}

fn owned((reason, message): (&str, &str)) -> (String, String) {
    (reason.to_string(), message.to_string())
}

fn wait_until(now: Timestamp, at: Timestamp) -> Duration {
    Duration::try_from(at.duration_since(now)).unwrap_or(Duration::ZERO)
}

/// With `restartPolicy: OnFailure` containers restart in place, so their restarts count
/// against the backoff limit.
fn past_backoff_limit_on_failure(
    spec: &k8s_openapi::api::batch::v1::JobSpec,
    active: &[&Pod],
    backoff_limit: i32,
) -> bool {
    let restart_policy = spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref());
    if restart_policy != Some("OnFailure") {
        return false;
    }
    let restarts: i32 = active
        .iter()
        .filter_map(|p| p.status.as_ref())
        .flat_map(|s| {
            s.init_container_statuses
                .iter()
                .flatten()
                .chain(s.container_statuses.iter().flatten())
        })
        .map(|c| c.restart_count)
        .sum();
    if backoff_limit == 0 {
        restarts > 0
    } else {
        restarts >= backoff_limit
    }
}

/// How long to wait before replacing failed Pods: 10s doubled per failure (cluster time), from
/// the latest failure, at most 10 minutes.
fn backoff_remaining(
    pods: &[Pod],
    failed: i32,
    now: Timestamp,
    scale: TimeScale,
) -> Option<Duration> {
    if failed <= 0 {
        return None;
    }
    let last_failure = pods.iter().filter_map(failure_time).max()?;
    let exponent = u32::try_from(failed - 1).unwrap_or(0).min(16);
    let delay = FAILURE_BACKOFF
        .saturating_mul(1 << exponent)
        .min(MAX_FAILURE_BACKOFF);
    let ready_at = last_failure + scale.span(delay);
    (ready_at > now).then(|| wait_until(now, ready_at))
}

/// For a finished Job with `ttlSecondsAfterFinished`: how long until it may be deleted, or
/// `delete` set when that time has come.
fn ttl_wait(
    spec: &k8s_openapi::api::batch::v1::JobSpec,
    status: &JobStatus,
    now: Timestamp,
    scale: TimeScale,
    delete: &mut bool,
) -> Option<Duration> {
    let ttl = spec.ttl_seconds_after_finished?;
    let finished =
        condition_true(status, "Complete").or_else(|| condition_true(status, "Failed"))?;
    let at = finished.last_transition_time.as_ref().map_or(now, |t| t.0);
    let expires = at + scale.span_seconds(i64::from(ttl));
    if now >= expires {
        *delete = true;
        None
    } else {
        Some(wait_until(now, expires))
    }
}
