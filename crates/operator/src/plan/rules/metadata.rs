//! The `additionalMetadata` rollout: patched in place onto every object the operator made for
//! a cluster, behind the readiness gate, never restarting anything (split out of `rollout`).

use std::collections::BTreeMap;

use crate::plan::context::Context;
use crate::plan::decision::Decision;
use crate::plan::step::{MetadataObject, Step};

/// Behind the readiness gate, after the version and config rollouts: a changed
/// `additionalMetadata` is patched in place onto every object the operator made for the
/// cluster, never restarting anything (the target's keys added or updated, the keys the object
/// was given before and the target lacks removed, the operator's own keys never touched):
///
/// - the Services and the PodDisruptionBudget, whose annotation
///   [`crate::build::ADDITIONAL_METADATA_RECORD`] records what they were given (updated in the
///   same patch; one made by an older operator without it only gains keys);
/// - each member's running Pod, then its PVC, then the EtcdMember object itself, then the
///   member's `spec.additionalMetadata`, which is the record of what the first three were
///   given: a crash in between finds the objects done and the member still to record.
pub fn metadata_rollout(ctx: &Context<'_>) -> Option<Decision> {
    let target = ctx.cluster.status.as_ref()?.observed.as_ref()?;
    let wanted = target.additional_metadata.as_ref();
    let cluster_own = etcd_operator_api::labels::cluster_labels(&ctx.cluster_name);
    let cluster_objects = [
        (
            MetadataObject::Service,
            ctx.observed.headless_service.as_ref().map(|s| &s.metadata),
        ),
        (
            MetadataObject::Service,
            ctx.observed.client_service.as_ref().map(|s| &s.metadata),
        ),
        (
            MetadataObject::Pdb,
            ctx.observed.pdb.as_ref().map(|p| &p.metadata),
        ),
    ];
    for (object, meta) in cluster_objects {
        let Some(meta) = meta.filter(|m| m.deletion_timestamp.is_none()) else {
            continue;
        };
        let (Some(name), labels, annotations) = (
            meta.name.as_ref(),
            meta.labels.clone().unwrap_or_default(),
            meta.annotations.clone().unwrap_or_default(),
        ) else {
            continue;
        };
        let recorded = crate::build::recorded_metadata(Some(&annotations));
        let record = crate::build::metadata_record(wanted);
        let change = metadata_change(
            recorded.as_ref(),
            wanted,
            &cluster_own,
            &labels,
            &annotations,
        );
        let record_differs =
            annotations.get(crate::build::ADDITIONAL_METADATA_RECORD) != record.as_ref();
        if change.is_some() || record_differs {
            let (labels, annotations, remove_labels, remove_annotations) =
                change.unwrap_or_default();
            return Some(Decision::act(Step::PatchMetadata {
                object,
                name: name.clone(),
                member: None,
                labels,
                annotations,
                remove_labels,
                remove_annotations,
                record: Some(record),
            }));
        }
    }
    ctx.running().find_map(|m| {
        let spec = &m.observed.member.spec;
        let own = etcd_operator_api::labels::member_labels(&spec.cluster_name, m.name);
        let recorded = spec.additional_metadata.as_ref();
        if let Some(pod) = m.observed.pod.as_ref().filter(|p| !p.deleting)
            && let Some((labels, annotations, remove_labels, remove_annotations)) =
                metadata_change(recorded, wanted, &own, &pod.labels, &pod.annotations)
        {
            return Some(Decision::act(Step::PatchPodMetadata {
                member: m.name.to_string(),
                pod: pod.name.clone(),
                labels,
                annotations,
                remove_labels,
                remove_annotations,
            }));
        }
        let object = |object: MetadataObject,
                      name: &str,
                      labels: &BTreeMap<String, String>,
                      annotations: &BTreeMap<String, String>| {
            metadata_change(recorded, wanted, &own, labels, annotations).map(
                |(labels, annotations, remove_labels, remove_annotations)| {
                    Decision::act(Step::PatchMetadata {
                        object,
                        name: name.to_string(),
                        member: Some(m.name.to_string()),
                        labels,
                        annotations,
                        remove_labels,
                        remove_annotations,
                        record: None,
                    })
                },
            )
        };
        if let Some(pvc) = m.observed.pvc.as_ref().filter(|p| !p.deleting)
            && let Some(decision) = object(
                MetadataObject::Pvc,
                &pvc.name,
                &pvc.labels,
                &pvc.annotations,
            )
        {
            return Some(decision);
        }
        let meta = &m.observed.member.metadata;
        if meta.deletion_timestamp.is_none()
            && let Some(decision) = object(
                MetadataObject::Member,
                m.name,
                &meta.labels.clone().unwrap_or_default(),
                &meta.annotations.clone().unwrap_or_default(),
            )
        {
            return Some(decision);
        }
        (spec.additional_metadata != target.additional_metadata).then(|| {
            Decision::act(Step::SetMemberMetadata {
                member: m.name.to_string(),
                metadata: target.additional_metadata.clone(),
            })
        })
    })
}

/// Labels and annotations to add or update, and to remove, so that an object given `recorded`
/// carries `wanted` (`None` when it already does): [`crate::build::missing_metadata`] and
/// [`crate::build::removed_metadata`] over the object's current metadata.
type MetadataChange = (
    BTreeMap<String, String>,
    BTreeMap<String, String>,
    Vec<String>,
    Vec<String>,
);

fn metadata_change(
    recorded: Option<&etcd_operator_api::shared::AdditionalMetadata>,
    wanted: Option<&etcd_operator_api::shared::AdditionalMetadata>,
    own: &BTreeMap<String, String>,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
) -> Option<MetadataChange> {
    let (add_labels, add_annotations) =
        crate::build::missing_metadata(wanted, own, labels, annotations);
    let (remove_labels, remove_annotations) =
        crate::build::removed_metadata(recorded, wanted, own, labels, annotations);
    (!add_labels.is_empty()
        || !add_annotations.is_empty()
        || !remove_labels.is_empty()
        || !remove_annotations.is_empty())
    .then_some((
        add_labels,
        add_annotations,
        remove_labels,
        remove_annotations,
    ))
}
