//! The Deployment's status, pure: replica counts summed over its ReplicaSets, and the
//! `Available` and `Progressing` conditions worded as the real controller words them.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::rollout::{available, is_recreate, replicas};
use crate::controllers::TimeScale;

fn condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: String,
    now: Timestamp,
    previous: Option<&DeploymentCondition>,
) -> DeploymentCondition {
    let transition = previous
        .filter(|p| p.status == status)
        .and_then(|p| p.last_transition_time.clone())
        .unwrap_or(Time(now));
    let unchanged = previous.is_some_and(|p| {
        p.status == status
            && p.reason.as_deref() == Some(reason)
            && p.message.as_deref() == Some(&message)
    });
    let update = if unchanged {
        previous.and_then(|p| p.last_update_time.clone())
    } else {
        None
    };
    DeploymentCondition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: Some(reason.to_string()),
        message: Some(message),
        last_transition_time: Some(transition),
        last_update_time: Some(update.unwrap_or(Time(now))),
    }
}

/// What the status is computed from, after this sync's steps.
pub(super) struct Observed<'a> {
    pub deployment: &'a Deployment,
    /// Every ReplicaSet of the Deployment, with the replicas this sync sets.
    pub replica_sets: &'a [ReplicaSet],
    pub new_replica_set: Option<&'a ReplicaSet>,
    /// The new ReplicaSet is created by this sync.
    pub created: bool,
    pub desired: i32,
    pub max_unavailable: i32,
}

/// The Deployment's status, and when to look again for its progress deadline (the earlier of
/// that and `requeue_after`).
pub(super) fn deployment_status(
    observed: &Observed<'_>,
    now: Timestamp,
    scale: TimeScale,
    requeue_after: Option<Duration>,
) -> (DeploymentStatus, Option<Duration>) {
    let Observed {
        deployment,
        replica_sets,
        new_replica_set: new_rs,
        created,
        desired,
        max_unavailable,
    } = *observed;
    let mut requeue_after = requeue_after;
    let sum = |f: fn(&ReplicaSet) -> i32| replica_sets.iter().map(f).sum::<i32>();
    let actual = |rs: &ReplicaSet| rs.status.as_ref().map_or(0, |s| s.replicas);
    let ready = |rs: &ReplicaSet| {
        rs.status
            .as_ref()
            .and_then(|s| s.ready_replicas)
            .unwrap_or(0)
    };
    let previous = deployment.status.clone().unwrap_or_default();
    let find = |type_: &str| {
        previous
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == type_)
    };
    let available_replicas = sum(available);
    let updated = new_rs.map_or(0, actual);
    let total = sum(actual);
    let max_unavailable = if is_recreate(deployment) || desired == 0 {
        0
    } else {
        max_unavailable.min(desired)
    };
    let available_condition = if available_replicas >= desired - max_unavailable {
        condition(
            "Available",
            "True",
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.".into(),
            now,
            find("Available"),
        )
    } else {
        condition(
            "Available",
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.".into(),
            now,
            find("Available"),
        )
    };
    let new_name = new_rs
        .and_then(|rs| rs.metadata.name.clone())
        .unwrap_or_default();
    let complete = updated == desired
        && total == desired
        && available_replicas == desired
        && new_rs.is_some_and(|rs| replicas(rs) == desired);
    let previous_progress = find("Progressing");
    let progressed = updated > previous.updated_replicas.unwrap_or(0)
        || available_replicas > previous.available_replicas.unwrap_or(0)
        || total < previous.replicas.unwrap_or(0);
    let paused = deployment.spec.as_ref().and_then(|s| s.paused) == Some(true);
    let progressing = if paused {
        condition(
            "Progressing",
            "Unknown",
            "DeploymentPaused",
            "Deployment is paused".into(),
            now,
            previous_progress,
        )
    } else if created {
        condition(
            "Progressing",
            "True",
            "NewReplicaSetCreated",
            format!("Created new replica set \"{new_name}\""),
            now,
            previous_progress,
        )
    } else if complete {
        condition(
            "Progressing",
            "True",
            "NewReplicaSetAvailable",
            format!("ReplicaSet \"{new_name}\" has successfully progressed."),
            now,
            previous_progress,
        )
    } else {
        let deadline = deployment
            .spec
            .as_ref()
            .and_then(|s| s.progress_deadline_seconds)
            .unwrap_or(600);
        let mut updating = condition(
            "Progressing",
            "True",
            "ReplicaSetUpdated",
            format!("ReplicaSet \"{new_name}\" is progressing."),
            now,
            previous_progress,
        );
        if progressed {
            updating.last_update_time = Some(Time(now));
        } else if let Some(last) = previous_progress.and_then(|p| p.last_update_time.clone()) {
            updating.last_update_time = Some(last);
        }
        let since = updating.last_update_time.as_ref().map_or(now, |t| t.0);
        let expires = since + scale.span_seconds(i64::from(deadline));
        if now >= expires
            || previous_progress
                .is_some_and(|p| p.reason.as_deref() == Some("ProgressDeadlineExceeded"))
                && !progressed
        {
            condition(
                "Progressing",
                "False",
                "ProgressDeadlineExceeded",
                format!("ReplicaSet \"{new_name}\" has timed out progressing."),
                now,
                previous_progress,
            )
        } else {
            let wait = Duration::try_from(expires.duration_since(now)).unwrap_or_default();
            requeue_after = Some(requeue_after.map_or(wait, |r| r.min(wait)));
            updating
        }
    };
    let status = DeploymentStatus {
        observed_generation: deployment.metadata.generation,
        replicas: Some(total),
        updated_replicas: Some(updated),
        ready_replicas: Some(sum(ready)),
        available_replicas: Some(available_replicas),
        unavailable_replicas: Some((sum(replicas) - available_replicas).max(0)),
        terminating_replicas: None,
        collision_count: previous.collision_count,
        conditions: Some(vec![available_condition, progressing]),
    };
    (status, requeue_after)
}
