//! The ReplicaSet controller's judgement, pure: how many Pods to create, which to delete, and
//! the status, from the ReplicaSet and the Pods it controls.

use std::cmp::Reverse;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetStatus};
use k8s_openapi::api::core::v1::Pod;

use crate::controllers::TimeScale;
use crate::controllers::pods::{is_active, is_ready, ready_since};
use crate::scheduler::labels::labels_of;
use crate::scheduler::node_name_of;

/// What one sync of a ReplicaSet does.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReplicaSetPlan {
    pub create: usize,
    /// Names of Pods to delete, the least valuable first.
    pub delete: Vec<String>,
    pub status: ReplicaSetStatus,
    /// When a Ready Pod becomes available (`minReadySeconds`), in real time.
    pub requeue_after: Option<Duration>,
}

/// Whether a Pod has been Ready for `min_ready` (real time) at `now`.
pub fn is_available(pod: &Pod, min_ready: Duration, now: Timestamp) -> bool {
    ready_since(pod).is_some_and(|since| {
        since + jiff::SignedDuration::try_from(min_ready).unwrap_or_default() <= now
    })
}

/// The order in which surplus Pods go, as the real controller ranks them: unscheduled before
/// scheduled, Pending before Running, not Ready before Ready, Ready for less time first, more
/// restarts first, newer first.
fn deletion_rank(pod: &Pod) -> impl Ord {
    let phase = match pod.status.as_ref().and_then(|s| s.phase.as_deref()) {
        Some("Pending") | None => 0,
        Some("Running") => 2,
        _ => 1,
    };
    let restarts: i32 = pod
        .status
        .iter()
        .flat_map(|s| s.container_statuses.iter().flatten())
        .map(|c| c.restart_count)
        .sum();
    (
        node_name_of(pod).is_some(),
        phase,
        is_ready(pod),
        Reverse(ready_since(pod)),
        Reverse(restarts),
        Reverse(pod.metadata.creation_timestamp.clone()),
    )
}

/// Plans one sync of `replica_set` with the Pods it controls.
pub fn plan_replicaset(
    replica_set: &ReplicaSet,
    pods: &[Pod],
    now: Timestamp,
    scale: TimeScale,
) -> ReplicaSetPlan {
    let spec = replica_set.spec.clone().unwrap_or_default();
    let wanted = spec.replicas.unwrap_or(1).max(0) as usize;
    let min_ready = scale.seconds(i64::from(spec.min_ready_seconds.unwrap_or(0)));
    let mut active: Vec<&Pod> = pods.iter().filter(|p| is_active(p)).collect();
    let mut plan = ReplicaSetPlan::default();
    if active.len() < wanted {
        plan.create = wanted - active.len();
    } else if active.len() > wanted && replica_set.metadata.deletion_timestamp.is_none() {
        active.sort_by_cached_key(|p| deletion_rank(p));
        plan.delete = active
            .iter()
            .take(active.len() - wanted)
            .map(|p| p.metadata.name.clone().unwrap_or_default())
            .collect();
    }

    let template_labels = spec
        .template
        .as_ref()
        .and_then(|t| t.metadata.as_ref())
        .map(labels_of)
        .cloned()
        .unwrap_or_default();
    let fully_labeled = active
        .iter()
        .filter(|p| {
            template_labels
                .iter()
                .all(|(k, v)| labels_of(&p.metadata).get(k) == Some(v))
        })
        .count();
    let ready: Vec<&&Pod> = active.iter().filter(|p| is_ready(p)).collect();
    let available = ready
        .iter()
        .filter(|p| is_available(p, min_ready, now))
        .count();
    let next_available = ready
        .iter()
        .filter(|p| !is_available(p, min_ready, now))
        .filter_map(|p| ready_since(p))
        .min()
        .map(|since| {
            Duration::try_from(
                (since + jiff::SignedDuration::try_from(min_ready).unwrap_or_default())
                    .duration_since(now),
            )
            .unwrap_or_default()
        });
    plan.requeue_after = next_available;
    let previous = replica_set.status.clone().unwrap_or_default();
    plan.status = ReplicaSetStatus {
        replicas: active.len() as i32,
        fully_labeled_replicas: Some(fully_labeled as i32),
        ready_replicas: Some(ready.len() as i32),
        available_replicas: Some(available as i32),
        observed_generation: replica_set.metadata.generation,
        conditions: previous.conditions,
        terminating_replicas: previous.terminating_replicas,
    };
    plan
}
