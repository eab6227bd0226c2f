//! `spec.persistentVolumeClaimRetentionPolicy`: when a member's PVC (its data) is deleted.
//!
//! - A member the operator scales in is first marked ([`SCALE_IN_ANNOTATION`], only when
//!   `whenScaled` is `Delete`), so that once it has left etcd its leave sequence deletes the
//!   PVC. Every other deleted EtcdMember (deleted by hand, with the admission policy's
//!   break-glass annotation) keeps its PVC: before its finalizer goes the PVC is handed to the
//!   EtcdCluster (owner reference replaced), so garbage collection does not take it with the
//!   member. `whenScaled: Retain` treats scale-in the same way.
//! - A retained PVC holds the data of a member etcd has removed: a member started on it under a
//!   new member ID would be refused by its peers (or worse). Its ordinal is therefore skipped
//!   when a new member is created (the ordinal is free again once the PVC is deleted), and the
//!   data stays for a person to inspect.
//! - On cluster deletion, `whenDeleted: Delete` (the default) lets garbage collection take every
//!   PVC (the members' with the members, the retained ones with the cluster); `whenDeleted:
//!   Retain` first releases every PVC of the cluster (no owner references left), one per pass.

use std::collections::BTreeSet;

use etcd_operator_api::cluster::PvcRetention;

use crate::build::{cluster_owner_reference, member_ordinal};
use crate::plan::PvcFacts;
use crate::plan::context::{Context, MemberView};
use crate::plan::decision::Decision;
use crate::plan::step::{Step, WaitReason};
use crate::plan::timing;

/// The EtcdMember annotation the operator sets on a member it is about to delete to scale in
/// (value `"true"`); its PVC then follows `whenScaled` instead of being retained.
pub const SCALE_IN_ANNOTATION: &str = "etcd-operator.cozystack.io/scale-in";

/// The member carries the scale-in mark.
pub fn marked_for_scale_in(m: &MemberView<'_>) -> bool {
    m.observed
        .member
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(SCALE_IN_ANNOTATION))
        .is_some_and(|v| v == "true")
}

/// Scale-in deletes the PVC (`whenScaled: Delete`, the default).
fn scale_in_deletes(ctx: &Context<'_>) -> bool {
    ctx.observed
        .cluster
        .spec
        .pvc_retention_or_default()
        .when_scaled_or_default()
        == PvcRetention::Delete
}

/// Before the operator deletes `victim` to scale in: mark it, when its PVC is to go with it.
pub fn mark_before_scale_in(ctx: &Context<'_>, victim: &MemberView<'_>) -> Option<Decision> {
    (!victim.memory && scale_in_deletes(ctx) && !marked_for_scale_in(victim)).then(|| {
        Decision::act(Step::MarkScaleIn {
            member: victim.name.to_string(),
            marked: true,
        })
    })
}

/// A running member still marked although it is not the one scale-in removes now (the
/// replicas went back up before it was deleted): the mark goes, so a later deletion by hand
/// keeps its data.
pub fn stale_scale_in_mark(ctx: &Context<'_>, victim: Option<&str>) -> Option<Decision> {
    ctx.running()
        .find(|m| marked_for_scale_in(m) && Some(m.name) != victim)
        .map(|m| {
            Decision::act(Step::MarkScaleIn {
                member: m.name.to_string(),
                marked: false,
            })
        })
}

/// The leave sequence's PVC step for `m` (it has left etcd and its Pod is gone): delete the
/// PVC of a member scaled in under `whenScaled: Delete`; hand every other one to the
/// EtcdCluster; `None` when there is nothing left to do (the PVC is retained already).
pub fn leaving_member_pvc(
    ctx: &Context<'_>,
    m: &MemberView<'_>,
    pvc: &PvcFacts,
) -> Option<Decision> {
    if marked_for_scale_in(m) && scale_in_deletes(ctx) {
        return Some(Decision::act(Step::DeletePvc {
            member: m.name.to_string(),
            pvc: pvc.name.clone(),
        }));
    }
    let member_uid = m.observed.member.metadata.uid.as_deref()?;
    if pvc.owner_uid.as_deref() != Some(member_uid) {
        return None;
    }
    Some(match cluster_owner_reference(&ctx.observed.cluster) {
        Ok(owner) => Decision::act(Step::SetPvcOwner {
            member: Some(m.name.to_string()),
            pvc: pvc.name.clone(),
            resource_version: pvc.resource_version.clone(),
            owner: Some(Box::new(owner)),
        }),
        Err(e) => Decision::wait(
            WaitReason::InvalidObject,
            format!("cannot hand PVC {} to the EtcdCluster: {e}", pvc.name),
            timing::BLOCKED_POLL,
        ),
    })
}

/// Cluster deletion under `whenDeleted: Retain`: the first PVC of the cluster that still has
/// an owner is released, before any member or the cluster goes.
pub fn release_for_cluster_deletion(ctx: &Context<'_>) -> Option<Decision> {
    let policy = ctx.observed.cluster.spec.pvc_retention_or_default();
    if policy.when_deleted_or_default() != PvcRetention::Retain {
        return None;
    }
    let owned = |p: &&PvcFacts| !p.deleting && p.owner_uid.is_some();
    let member_pvcs = ctx.members.iter().filter_map(|m| {
        m.observed
            .pvc
            .as_ref()
            .filter(owned)
            .map(|p| (Some(m.name), p))
    });
    let retained = ctx
        .observed
        .retained_pvcs
        .iter()
        .filter(owned)
        .map(|p| (None, p));
    member_pvcs.chain(retained).next().map(|(member, pvc)| {
        Decision::act(Step::SetPvcOwner {
            member: member.map(str::to_string),
            pvc: pvc.name.clone(),
            resource_version: pvc.resource_version.clone(),
            owner: None,
        })
    })
}

/// The ordinals whose PVC is retained (not being deleted): not used for a new member.
pub fn retained_ordinals(ctx: &Context<'_>) -> BTreeSet<u32> {
    ctx.observed
        .retained_pvcs
        .iter()
        .filter(|p| !p.deleting)
        .filter_map(|p| p.name.strip_prefix("data-"))
        .filter_map(|member| member_ordinal(&ctx.cluster_name, member))
        .collect()
}
