//! The Deployment controller's judgement, pure: which ReplicaSet the template needs, how far to
//! scale each ReplicaSet in this step of a rollout (RollingUpdate within maxSurge and
//! maxUnavailable, or Recreate), which old ReplicaSets history no longer keeps, and the status.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus, ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::status::{Observed, deployment_status};
use crate::controllers::TimeScale;
use crate::controllers::pods::controller_reference;

pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";
pub const REVISION: &str = "deployment.kubernetes.io/revision";
const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";

/// One change to the ReplicaSets.
#[derive(Debug, Clone, PartialEq)]
pub enum RolloutStep {
    Create(Box<ReplicaSet>),
    /// Set `spec.replicas` (and the replica annotations) of a ReplicaSet.
    Scale {
        name: String,
        replicas: i32,
    },
    /// Delete an old, empty ReplicaSet beyond `revisionHistoryLimit`.
    Delete(String),
    /// Give an old ReplicaSet that matches the template again (a rollback) the next revision.
    Revise {
        name: String,
        revision: i64,
    },
}

/// What one sync of a Deployment does.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DeploymentPlan {
    pub steps: Vec<RolloutStep>,
    /// The revision the Deployment's annotation should carry.
    pub revision: String,
    pub status: DeploymentStatus,
    pub requeue_after: Option<Duration>,
}

/// FNV-1a over the template's JSON, spelled with the alphabet the real controller uses for
/// `pod-template-hash` (no vowels, so no words).
pub fn template_hash(template: &PodTemplateSpec) -> String {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in serde_json::to_vec(template).unwrap_or_default() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    hash.to_string()
        .bytes()
        .map(|b| ALPHABET[usize::from(b) % ALPHABET.len()] as char)
        .collect()
}

/// The template without the hash label (and without an empty label map), for comparing a
/// ReplicaSet's template with the Deployment's.
fn without_hash(template: &PodTemplateSpec) -> PodTemplateSpec {
    let mut template = template.clone();
    if let Some(labels) = template.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        labels.remove(POD_TEMPLATE_HASH);
    }
    normalized(template)
}

/// The template with an empty label map dropped, so `labels: {}` and no labels compare equal.
fn normalized(mut template: PodTemplateSpec) -> PodTemplateSpec {
    if let Some(metadata) = template.metadata.as_mut()
        && metadata.labels.as_ref().is_some_and(BTreeMap::is_empty)
    {
        metadata.labels = None;
    }
    template
}

pub(super) fn replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0)
}

pub(super) fn available(rs: &ReplicaSet) -> i32 {
    rs.status
        .as_ref()
        .and_then(|s| s.available_replicas)
        .unwrap_or(0)
}

fn revision_of(rs: &ReplicaSet) -> i64 {
    rs.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(REVISION))
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

/// `25%` of `total`, rounded up for surge and down for unavailability, or a plain number.
fn resolve(value: Option<&IntOrString>, total: i32, round_up: bool, default_percent: i32) -> i32 {
    let percent = |p: i32| {
        let scaled = i64::from(p) * i64::from(total);
        (if round_up {
            (scaled + 99) / 100
        } else {
            scaled / 100
        }) as i32
    };
    match value {
        Some(IntOrString::Int(n)) => *n,
        Some(IntOrString::String(text)) => text.trim_end_matches('%').parse().map_or(0, percent),
        None => percent(default_percent),
    }
}

/// (maxSurge, maxUnavailable) for a RollingUpdate, never both zero.
fn fenceposts(deployment: &Deployment, desired: i32) -> (i32, i32) {
    let rolling = deployment
        .spec
        .as_ref()
        .and_then(|s| s.strategy.as_ref())
        .and_then(|s| s.rolling_update.as_ref());
    let surge = resolve(
        rolling.and_then(|r| r.max_surge.as_ref()),
        desired,
        true,
        25,
    );
    let unavailable = resolve(
        rolling.and_then(|r| r.max_unavailable.as_ref()),
        desired,
        false,
        25,
    );
    if surge == 0 && unavailable == 0 {
        (0, 1)
    } else {
        (surge, unavailable)
    }
}

pub(super) fn is_recreate(deployment: &Deployment) -> bool {
    deployment
        .spec
        .as_ref()
        .and_then(|s| s.strategy.as_ref())
        .and_then(|s| s.type_.as_deref())
        == Some("Recreate")
}

/// The ReplicaSet for the Deployment's current template.
fn new_replica_set(deployment: &Deployment, replicas: i32, revision: i64) -> ReplicaSet {
    let spec = deployment.spec.clone().unwrap_or_default();
    let hash = template_hash(&spec.template);
    let mut template = spec.template.clone();
    let template_meta = template.metadata.get_or_insert_with(ObjectMeta::default);
    template_meta
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(POD_TEMPLATE_HASH.to_string(), hash.clone());
    let mut selector = spec.selector.clone();
    selector
        .match_labels
        .get_or_insert_with(BTreeMap::new)
        .insert(POD_TEMPLATE_HASH.to_string(), hash.clone());
    let name = format!(
        "{}-{hash}",
        deployment.metadata.name.as_deref().unwrap_or_default()
    );
    let (surge, _) = fenceposts(deployment, spec.replicas.unwrap_or(1));
    ReplicaSet {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: deployment.metadata.namespace.clone(),
            labels: template_meta.labels.clone(),
            annotations: Some(replica_annotations(deployment, revision, surge)),
            owner_references: Some(vec![controller_reference(deployment)]),
            ..ObjectMeta::default()
        },
        spec: Some(ReplicaSetSpec {
            replicas: Some(replicas),
            min_ready_seconds: spec.min_ready_seconds,
            selector,
            template: Some(template),
        }),
        status: None,
    }
}

/// The annotations the real controller puts on its ReplicaSets.
pub fn replica_annotations(
    deployment: &Deployment,
    revision: i64,
    surge: i32,
) -> BTreeMap<String, String> {
    let desired = deployment
        .spec
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or(1);
    BTreeMap::from([
        (REVISION.to_string(), revision.to_string()),
        (DESIRED_REPLICAS.to_string(), desired.to_string()),
        (MAX_REPLICAS.to_string(), (desired + surge).to_string()),
    ])
}

/// Plans one sync of `deployment` given the ReplicaSets it controls.
pub fn plan_deployment(
    deployment: &Deployment,
    owned: &[ReplicaSet],
    now: Timestamp,
    scale: TimeScale,
) -> DeploymentPlan {
    let spec = deployment.spec.clone().unwrap_or_default();
    let desired = spec.replicas.unwrap_or(1).max(0);
    let wanted_template = normalized(spec.template.clone());
    let mut replica_sets: Vec<ReplicaSet> = owned.to_vec();
    replica_sets.sort_by(|a, b| {
        a.metadata
            .creation_timestamp
            .cmp(&b.metadata.creation_timestamp)
            .then(a.metadata.name.cmp(&b.metadata.name))
    });
    let new_index = replica_sets.iter().position(|rs| {
        rs.spec
            .as_ref()
            .and_then(|s| s.template.as_ref())
            .map(without_hash)
            .as_ref()
            == Some(&wanted_template)
    });
    let max_revision = replica_sets.iter().map(revision_of).max().unwrap_or(0);
    let mut plan = DeploymentPlan::default();
    let paused = spec.paused == Some(true);
    let (surge, unavailable) = fenceposts(deployment, desired);

    let mut created = false;
    let new_index = match new_index {
        Some(index) => Some(index),
        None if paused => None,
        None => {
            let total: i32 = replica_sets.iter().map(replicas).sum();
            let start = if is_recreate(deployment) {
                0
            } else {
                (desired + surge - total).clamp(0, desired)
            };
            let replica_set = new_replica_set(deployment, start, max_revision + 1);
            plan.steps
                .push(RolloutStep::Create(Box::new(replica_set.clone())));
            replica_sets.push(replica_set);
            created = true;
            Some(replica_sets.len() - 1)
        }
    };
    if let Some(index) = new_index
        && revision_of(&replica_sets[index]) < max_revision
    {
        let rs = &mut replica_sets[index];
        rs.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(REVISION.to_string(), (max_revision + 1).to_string());
        plan.steps.push(RolloutStep::Revise {
            name: rs.metadata.name.clone().unwrap_or_default(),
            revision: max_revision + 1,
        });
    }
    plan.revision = new_index
        .map_or(max_revision, |i| revision_of(&replica_sets[i]))
        .to_string();

    if !paused && let Some(new_index) = new_index {
        let scale_to = |replica_sets: &mut Vec<ReplicaSet>,
                        index: usize,
                        count: i32,
                        steps: &mut Vec<RolloutStep>| {
            let rs = &mut replica_sets[index];
            if replicas(rs) != count {
                rs.spec.get_or_insert_with(Default::default).replicas = Some(count);
                steps.push(RolloutStep::Scale {
                    name: rs.metadata.name.clone().unwrap_or_default(),
                    replicas: count,
                });
            }
        };
        let old: Vec<usize> = (0..replica_sets.len())
            .filter(|i| *i != new_index)
            .collect();
        if is_recreate(deployment) {
            for &index in &old {
                scale_to(&mut replica_sets, index, 0, &mut plan.steps);
            }
            let old_pods: i32 = old
                .iter()
                .map(|&i| replica_sets[i].status.as_ref().map_or(0, |s| s.replicas))
                .sum();
            if old_pods == 0 {
                scale_to(&mut replica_sets, new_index, desired, &mut plan.steps);
            }
        } else if !created {
            roll(
                &mut replica_sets,
                new_index,
                &old,
                desired,
                surge,
                unavailable,
                &mut plan.steps,
            );
        }
        let complete = old.iter().all(|&i| replicas(&replica_sets[i]) == 0);
        if complete {
            let limit = spec.revision_history_limit.unwrap_or(10).max(0) as usize;
            let mut history: Vec<&ReplicaSet> = old
                .iter()
                .map(|&i| &replica_sets[i])
                .filter(|rs| replicas(rs) == 0 && rs.status.as_ref().map_or(0, |s| s.replicas) == 0)
                .collect();
            history.sort_by_key(|rs| revision_of(rs));
            let excess = history.len().saturating_sub(limit);
            plan.steps.extend(
                history
                    .iter()
                    .take(excess)
                    .map(|rs| RolloutStep::Delete(rs.metadata.name.clone().unwrap_or_default())),
            );
        }
    }

    let observed = Observed {
        deployment,
        replica_sets: &replica_sets,
        new_replica_set: new_index.map(|i| &replica_sets[i]),
        created,
        desired,
        max_unavailable: unavailable,
    };
    (plan.status, plan.requeue_after) =
        deployment_status(&observed, now, scale, plan.requeue_after);
    plan
}

/// One step of a RollingUpdate, as the real controller takes it: scale the new ReplicaSet up
/// within maxSurge; if it did not move, scale old ones down, unhealthy replicas first, as far as
/// maxUnavailable allows.
fn roll(
    replica_sets: &mut [ReplicaSet],
    new_index: usize,
    old: &[usize],
    desired: i32,
    surge: i32,
    unavailable: i32,
    steps: &mut Vec<RolloutStep>,
) {
    let set = |rs: &mut ReplicaSet, count: i32, steps: &mut Vec<RolloutStep>| {
        rs.spec.get_or_insert_with(Default::default).replicas = Some(count);
        steps.push(RolloutStep::Scale {
            name: rs.metadata.name.clone().unwrap_or_default(),
            replicas: count,
        });
    };
    let new_replicas = replicas(&replica_sets[new_index]);
    if new_replicas > desired {
        set(&mut replica_sets[new_index], desired, steps);
        return;
    }
    if new_replicas < desired {
        let total: i32 = replica_sets.iter().map(replicas).sum();
        let room = desired + surge - total;
        if room > 0 {
            set(
                &mut replica_sets[new_index],
                new_replicas + room.min(desired - new_replicas),
                steps,
            );
            return;
        }
    }
    let old_total: i32 = old.iter().map(|&i| replicas(&replica_sets[i])).sum();
    if old_total == 0 {
        return;
    }
    let all_total: i32 = replica_sets.iter().map(replicas).sum();
    let min_available = desired - unavailable;
    let new_unavailable = replicas(&replica_sets[new_index]) - available(&replica_sets[new_index]);
    let mut max_scale_down = all_total - min_available - new_unavailable;
    if max_scale_down <= 0 {
        return;
    }
    for &index in old {
        let rs = &mut replica_sets[index];
        let unhealthy = (replicas(rs) - available(rs)).max(0);
        let cleanup = unhealthy.min(max_scale_down);
        if cleanup > 0 {
            let count = replicas(rs) - cleanup;
            set(rs, count, steps);
            max_scale_down -= cleanup;
        }
    }
    let available_total: i32 = replica_sets.iter().map(available).sum();
    let mut to_scale_down = (available_total - min_available).min(max_scale_down);
    for &index in old {
        if to_scale_down <= 0 {
            break;
        }
        let rs = &mut replica_sets[index];
        let down = replicas(rs).min(to_scale_down);
        if down > 0 {
            let count = replicas(rs) - down;
            set(rs, count, steps);
            to_scale_down -= down;
        }
    }
}
