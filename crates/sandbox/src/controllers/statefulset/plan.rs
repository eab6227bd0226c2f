//! The StatefulSet controller's judgement, pure: from the StatefulSet, the Pods that match its
//! selector and the names of the claims that exist, what one sync does, as
//! kube-controller-manager's `StatefulSetControl` decides it.
//!
//! - Identity: the Pod of ordinal `i` is `<set>-<i>`, with `hostname` = its name, `subdomain`
//!   = `spec.serviceName`, the labels `statefulset.kubernetes.io/pod-name`,
//!   `apps.kubernetes.io/pod-index` and `controller-revision-hash`, and for each
//!   `volumeClaimTemplates` entry a volume of the template's name on the claim
//!   `<template>-<set>-<i>` (created before the Pod, labelled with the template's labels and
//!   the selector's, never deleted with a Pod).
//! - Ownership: Pods matching the selector without a controller and named after the set are
//!   adopted; owned Pods that no longer match are released. A set being deleted does nothing.
//! - `OrderedReady`: ordinal `i` is created only when every lower ordinal is Running and Ready,
//!   and condemned Pods (ordinals past `replicas`) go one at a time, the highest first, only
//!   while every other Pod is Running and Ready. `Parallel`: all at once.
//! - Failed or Succeeded Pods are deleted, to be created again on the same claims.
//! - `RollingUpdate` (default): once every Pod is Running and Ready, the highest-ordinal Pod
//!   at or above `partition` whose revision differs is deleted (and created again from the
//!   new template); `OnDelete` leaves that to the user.
//! - `persistentVolumeClaimRetentionPolicy.whenDeleted: Delete` gives each claim an owner
//!   reference to the set (the garbage collector deletes it with the set).
//!
//! Revisions are a hash of the template; no ControllerRevision objects are kept (so no
//! `kubectl rollout undo`), and `whenScaled: Delete` is not implemented (claims are kept).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, PodTemplateSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::controllers::pods::{controller_uid, is_ready, pod_from_template};
use crate::scheduler::is_terminal;
use crate::scheduler::labels::{labels_of, selector_matches};

/// Label naming the Pod of a StatefulSet (kubernetes `StatefulSetPodNameLabel`).
pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
/// Label carrying the Pod's ordinal (kubernetes `PodIndexLabel`).
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";
/// Label of the revision a Pod was made from (`controller-revision-hash`).
pub const REVISION_LABEL: &str = "controller-revision-hash";

/// What one sync of a StatefulSet does.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StatefulSetPlan {
    /// Orphan Pods to adopt (a controller reference added).
    pub adopt: Vec<String>,
    /// Owned Pods that no longer match the selector (the reference removed).
    pub release: Vec<String>,
    /// Claims to create, before the Pods that mount them.
    pub create_claims: Vec<PersistentVolumeClaim>,
    /// Pods to create.
    pub create_pods: Vec<Pod>,
    /// Pods to delete: condemned, failed, or of an old revision.
    pub delete_pods: Vec<String>,
    pub status: StatefulSetStatus,
}

/// `<set>-<ordinal>` parsed: the ordinal of a Pod named after the set.
pub fn ordinal_of(set: &str, pod: &str) -> Option<i32> {
    let suffix = pod.strip_prefix(set)?.strip_prefix('-')?;
    if suffix.is_empty() || (suffix.len() > 1 && suffix.starts_with('0')) {
        return None;
    }
    suffix.parse().ok().filter(|i: &i32| *i >= 0)
}

/// The claim of template `template` for ordinal `ordinal`: `<template>-<set>-<ordinal>`.
pub fn claim_name(template: &str, set: &str, ordinal: i32) -> String {
    format!("{template}-{set}-{ordinal}")
}

/// The revision name of a template: `<set>-<hash>`.
pub fn revision(set: &str, template: &PodTemplateSpec) -> String {
    format!(
        "{set}-{}",
        crate::controllers::deployment::template_hash(template)
    )
}

fn name_of(meta: &ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

fn running_and_ready(pod: &Pod) -> bool {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        && is_ready(pod)
        && pod.metadata.deletion_timestamp.is_none()
}

/// The Pod of `ordinal` as the set makes it.
pub fn new_pod(set: &StatefulSet, ordinal: i32, revision: &str, owner: OwnerReference) -> Pod {
    let spec = set.spec.clone().unwrap_or_default();
    let set_name = name_of(&set.metadata);
    let name = format!("{set_name}-{ordinal}");
    let mut pod = pod_from_template(&spec.template, &set_name, owner, None);
    pod.metadata.generate_name = None;
    pod.metadata.name = Some(name.clone());
    pod.metadata.namespace = set.metadata.namespace.clone();
    let labels = pod.metadata.labels.get_or_insert_with(BTreeMap::new);
    labels.insert(POD_NAME_LABEL.into(), name.clone());
    labels.insert(POD_INDEX_LABEL.into(), ordinal.to_string());
    labels.insert(REVISION_LABEL.into(), revision.to_string());
    let pod_spec = pod.spec.get_or_insert_with(Default::default);
    pod_spec.hostname = Some(name.clone());
    pod_spec.subdomain = spec.service_name.clone().filter(|s| !s.is_empty());
    let volumes = pod_spec.volumes.get_or_insert_with(Vec::new);
    for template in spec.volume_claim_templates.iter().flatten() {
        let template_name = name_of(&template.metadata);
        let volume = Volume {
            name: template_name.clone(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim_name(&template_name, &set_name, ordinal),
                read_only: None,
            }),
            ..Default::default()
        };
        match volumes.iter_mut().find(|v| v.name == template_name) {
            Some(existing) => *existing = volume,
            None => volumes.push(volume),
        }
    }
    pod
}

/// The claims of `ordinal`, as the set makes them.
pub fn new_claims(set: &StatefulSet, ordinal: i32) -> Vec<PersistentVolumeClaim> {
    let spec = set.spec.clone().unwrap_or_default();
    let set_name = name_of(&set.metadata);
    let delete_with_set = spec
        .persistent_volume_claim_retention_policy
        .as_ref()
        .and_then(|p| p.when_deleted.as_deref())
        == Some("Delete");
    spec.volume_claim_templates
        .iter()
        .flatten()
        .map(|template| {
            let mut claim = template.clone();
            let template_name = name_of(&template.metadata);
            claim.metadata.name = Some(claim_name(&template_name, &set_name, ordinal));
            claim.metadata.namespace = set.metadata.namespace.clone();
            let labels = claim.metadata.labels.get_or_insert_with(BTreeMap::new);
            for (k, v) in spec.selector.match_labels.iter().flatten() {
                labels.insert(k.clone(), v.clone());
            }
            claim.metadata.owner_references = delete_with_set.then(|| {
                vec![OwnerReference {
                    api_version: "apps/v1".into(),
                    kind: "StatefulSet".into(),
                    name: set_name.clone(),
                    uid: set.metadata.uid.clone().unwrap_or_default(),
                    controller: Some(true),
                    block_owner_deletion: Some(true),
                }]
            });
            claim.metadata.uid = None;
            claim.metadata.resource_version = None;
            claim.metadata.creation_timestamp = None;
            claim.status = None;
            claim
        })
        .collect()
}

/// Plans one sync of `set`. `pods` are the namespace's Pods matching the set's selector or
/// controlled by it; `claims` the names of the namespace's claims.
pub fn plan_statefulset(
    set: &StatefulSet,
    pods: &[Pod],
    claims: &BTreeSet<String>,
    owner: &OwnerReference,
) -> StatefulSetPlan {
    let mut plan = StatefulSetPlan::default();
    let spec = set.spec.clone().unwrap_or_default();
    let set_name = name_of(&set.metadata);
    let uid = set.metadata.uid.clone().unwrap_or_default();
    let update_revision = revision(&set_name, &spec.template);
    let deleting = set.metadata.deletion_timestamp.is_some();

    // Ownership: adopt orphans named after the set, release owned Pods that left the selector.
    let mut owned: BTreeMap<i32, &Pod> = BTreeMap::new();
    for pod in pods {
        let name = name_of(&pod.metadata);
        let matches = selector_matches(&spec.selector, labels_of(&pod.metadata));
        let ordinal = ordinal_of(&set_name, &name);
        match controller_uid(&pod.metadata) {
            Some(owner_uid) if owner_uid == uid => {
                if !matches {
                    if !deleting {
                        plan.release.push(name);
                    }
                } else if let Some(i) = ordinal {
                    owned.insert(i, pod);
                }
            }
            None if matches && !deleting && pod.metadata.deletion_timestamp.is_none() => {
                if let Some(i) = ordinal {
                    plan.adopt.push(name);
                    owned.insert(i, pod);
                }
            }
            _ => {}
        }
    }

    let replicas = spec.replicas.unwrap_or(1).max(0);
    let start = spec.ordinals.as_ref().and_then(|o| o.start).unwrap_or(0);
    let wanted = start..start + replicas;
    let parallel = spec.pod_management_policy.as_deref() == Some("Parallel");

    if !deleting {
        // Failed and Succeeded Pods go first; they are made again on the next sync.
        for (i, pod) in &owned {
            if wanted.contains(i) && is_terminal(pod) && pod.metadata.deletion_timestamp.is_none() {
                plan.delete_pods.push(name_of(&pod.metadata));
            }
        }
        // Creation, in ordinal order.
        for i in wanted.clone() {
            match owned.get(&i) {
                Some(pod) if running_and_ready(pod) => continue,
                Some(_) if parallel => continue,
                Some(_) => break,
                None => {
                    for claim in new_claims(set, i) {
                        if !claims.contains(&name_of(&claim.metadata)) {
                            plan.create_claims.push(claim);
                        }
                    }
                    plan.create_pods
                        .push(new_pod(set, i, &update_revision, owner.clone()));
                    if !parallel {
                        break;
                    }
                }
            }
        }
        let all_healthy = wanted
            .clone()
            .all(|i| owned.get(&i).is_some_and(|p| running_and_ready(p)));
        // Condemned Pods, the highest ordinal first.
        let condemned: Vec<&Pod> = owned
            .iter()
            .rev()
            .filter(|(i, _)| !wanted.contains(i))
            .map(|(_, p)| *p)
            .collect();
        if parallel {
            plan.delete_pods.extend(
                condemned
                    .iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                    .map(|p| name_of(&p.metadata)),
            );
        } else if let Some(first) = condemned.first() {
            let others_healthy = owned
                .values()
                .filter(|p| p.metadata.name != first.metadata.name)
                .all(|p| running_and_ready(p));
            if first.metadata.deletion_timestamp.is_none() && others_healthy && all_healthy {
                plan.delete_pods.push(name_of(&first.metadata));
            }
        }
        // Rolling update: one Pod of an old revision at a time, the highest ordinal first.
        let rolling = spec
            .update_strategy
            .as_ref()
            .and_then(|s| s.type_.as_deref())
            .is_none_or(|t| t == "RollingUpdate");
        let partition = spec
            .update_strategy
            .as_ref()
            .and_then(|s| s.rolling_update.as_ref())
            .and_then(|r| r.partition)
            .unwrap_or(0);
        let every_pod_healthy = owned.values().all(|p| running_and_ready(p));
        if rolling && all_healthy && every_pod_healthy && condemned.is_empty() {
            let stale = wanted.clone().rev().filter(|i| *i >= partition).find(|i| {
                owned.get(i).is_some_and(|p| {
                    labels_of(&p.metadata).get(REVISION_LABEL) != Some(&update_revision)
                })
            });
            if let Some(i) = stale {
                plan.delete_pods.push(name_of(&owned[&i].metadata));
            }
        }
    }

    // Status, over the Pods the set controls (adopted ones included).
    let active: Vec<&&Pod> = owned
        .values()
        .filter(|p| !is_terminal(p) && p.metadata.deletion_timestamp.is_none())
        .collect();
    let revision_of = |p: &Pod| labels_of(&p.metadata).get(REVISION_LABEL).cloned();
    let previous = set.status.clone().unwrap_or_default();
    let current_revision = previous
        .current_revision
        .clone()
        .filter(|r| active.iter().any(|p| revision_of(p).as_deref() == Some(r)))
        .unwrap_or_else(|| update_revision.clone());
    let updated = active
        .iter()
        .filter(|p| revision_of(p).as_deref() == Some(update_revision.as_str()))
        .count() as i32;
    let current_revision = if updated as usize == active.len() && active.len() as i32 >= replicas {
        update_revision.clone()
    } else {
        current_revision
    };
    let current = active
        .iter()
        .filter(|p| revision_of(p).as_deref() == Some(current_revision.as_str()))
        .count() as i32;
    let ready = active.iter().filter(|p| is_ready(p)).count() as i32;
    plan.status = StatefulSetStatus {
        observed_generation: set.metadata.generation,
        replicas: active.len() as i32,
        ready_replicas: Some(ready),
        available_replicas: Some(ready),
        current_replicas: Some(current),
        updated_replicas: Some(updated),
        current_revision: Some(current_revision),
        update_revision: Some(update_revision),
        collision_count: previous.collision_count.or(Some(0)),
        conditions: previous.conditions,
    };
    plan
}
