//! `spec.persistentVolumeClaimRetentionPolicy`: a hand-deleted member's PVC is retained (handed
//! to the EtcdCluster), scale-in follows `whenScaled`, cluster deletion `whenDeleted`, and a
//! retained PVC's ordinal is never used again for a new member.

use etcd_operator_api::MemberPhase;
use etcd_operator_api::cluster::{PvcRetention, PvcRetentionPolicy};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::fixtures::*;
use crate::plan::{PvcFacts, SCALE_IN_ANNOTATION, Step, StepKind};

const CLUSTER_UID: &str = "uid-etcd";

fn policy(fx: &mut Fx, when_deleted: Option<PvcRetention>, when_scaled: Option<PvcRetention>) {
    fx.obs.cluster.spec.persistent_volume_claim_retention_policy = Some(PvcRetentionPolicy {
        when_deleted,
        when_scaled,
    });
}

fn mark(fx: &mut Fx, member: &str) {
    fx.member_mut(member)
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(SCALE_IN_ANNOTATION.into(), "true".into());
}

/// `member` deleted, out of etcd, its Pod going: the leave sequence is at the PVC.
fn left_etcd(fx: &mut Fx, member: &str) {
    fx.member_mut(member).metadata.deletion_timestamp = Some(Time(at(50)));
    fx.set_phase(member, MemberPhase::Terminating, at(60));
    fx.etcd_remove(member);
    fx.pod_mut(member).deleting = true;
}

fn retained(member: &str) -> PvcFacts {
    PvcFacts {
        owner_uid: Some(CLUSTER_UID.into()),
        ..bound_pvc(member)
    }
}

#[test]
fn a_member_deleted_by_hand_hands_its_pvc_to_the_cluster_then_goes() {
    let mut fx = Fx::healthy(3);
    left_etcd(&mut fx, "etcd-1");
    match fx.step() {
        Step::SetPvcOwner {
            member,
            pvc,
            resource_version,
            owner: Some(owner),
        } => {
            assert_eq!(member.as_deref(), Some("etcd-1"));
            assert_eq!(pvc, "data-etcd-1");
            assert_eq!(resource_version.as_deref(), Some("1"));
            assert_eq!(
                (owner.kind.as_str(), owner.uid.as_str()),
                ("EtcdCluster", CLUSTER_UID)
            );
            assert_eq!(owner.controller, Some(true));
        }
        other => panic!("expected the PVC handed to the cluster, got {other:?}"),
    }
    fx.observed_member("etcd-1").pvc.as_mut().unwrap().owner_uid = Some(CLUSTER_UID.into());
    assert_eq!(
        fx.step(),
        Step::RemoveFinalizer {
            member: "etcd-1".into()
        },
        "the PVC is retained; nothing deletes it"
    );
}

#[test]
fn the_leave_sequence_deletes_a_pvc_only_for_a_marked_scale_in_under_when_scaled_delete() {
    // Every combination: whenScaled unset/Retain/Delete × marked or not × the PVC owned by
    // the member, by the cluster, or by nothing.
    for when_scaled in [None, Some(PvcRetention::Retain), Some(PvcRetention::Delete)] {
        for marked in [false, true] {
            for owner in [Some("uid-etcd-2"), Some(CLUSTER_UID), None] {
                let mut fx = Fx::healthy(3);
                policy(&mut fx, None, when_scaled);
                if marked {
                    mark(&mut fx, "etcd-2");
                }
                left_etcd(&mut fx, "etcd-2");
                fx.observed_member("etcd-2").pvc.as_mut().unwrap().owner_uid =
                    owner.map(str::to_string);
                let step = fx.step();
                let deletes = marked && when_scaled != Some(PvcRetention::Retain);
                let case = format!("whenScaled {when_scaled:?}, marked {marked}, owner {owner:?}");
                match step {
                    Step::DeletePvc { ref pvc, .. } => {
                        assert!(deletes, "{case}: deleted");
                        assert_eq!(pvc, "data-etcd-2");
                    }
                    Step::SetPvcOwner {
                        owner: Some(ref o), ..
                    } => {
                        assert!(!deletes && owner == Some("uid-etcd-2"), "{case}: {step:?}");
                        assert_eq!(o.uid, CLUSTER_UID);
                    }
                    Step::RemoveFinalizer { .. } => {
                        assert!(!deletes && owner != Some("uid-etcd-2"), "{case}");
                    }
                    other => panic!("{case}: unexpected {other:?}"),
                }
            }
        }
    }
}

#[test]
fn scale_in_marks_the_victim_only_when_its_pvc_is_to_go() {
    let mut fx = Fx::healthy(3);
    target(&mut fx, 2);
    fx.set_leader("etcd-0");
    assert_eq!(
        fx.step(),
        Step::MarkScaleIn {
            member: "etcd-2".into(),
            marked: true
        }
    );

    policy(&mut fx, None, Some(PvcRetention::Retain));
    assert_eq!(
        fx.step(),
        Step::DeleteMember {
            member: "etcd-2".into()
        },
        "whenScaled: Retain keeps the PVC like a deletion by hand: no mark needed"
    );

    let mut memory = Fx::healthy(3);
    memory.make_memory_backed();
    target(&mut memory, 2);
    assert_eq!(
        memory.step(),
        Step::DeleteMember {
            member: "etcd-2".into()
        },
        "a memory-backed member has no PVC"
    );
}

#[test]
fn a_scale_in_called_off_removes_the_mark() {
    let mut fx = Fx::healthy(3);
    mark(&mut fx, "etcd-2");
    assert_eq!(
        fx.step(),
        Step::MarkScaleIn {
            member: "etcd-2".into(),
            marked: false
        }
    );
    // Scaling 3 → 2 again: the mark on the victim stays, and it is deleted.
    target(&mut fx, 2);
    assert_eq!(
        fx.step(),
        Step::DeleteMember {
            member: "etcd-2".into()
        }
    );
    // A mark on a member that is not the victim goes even while scaling in.
    let mut fx = Fx::healthy(3);
    target(&mut fx, 2);
    mark(&mut fx, "etcd-1");
    assert_eq!(
        fx.step(),
        Step::MarkScaleIn {
            member: "etcd-1".into(),
            marked: false
        }
    );
}

#[test]
fn a_retained_pvc_keeps_its_ordinal_from_new_members() {
    let mut fx = Fx::healthy(2);
    target(&mut fx, 3);
    fx.obs.retained_pvcs = vec![retained("etcd-2")];
    match fx.step() {
        Step::CreateMember(m) => assert_eq!(m.metadata.name.as_deref(), Some("etcd-3")),
        other => panic!("expected a new member, got {other:?}"),
    }

    // Ordinal 0 retained, 1 and 2 running: the new member is etcd-3, never etcd-0.
    let mut fx = Fx::healthy(3);
    fx.obs.members.remove(0);
    fx.etcd_remove("etcd-0");
    fx.set_leader("etcd-1");
    fx.obs.retained_pvcs = vec![retained("etcd-0")];
    match fx.step() {
        Step::CreateMember(m) => assert_eq!(m.metadata.name.as_deref(), Some("etcd-3")),
        other => panic!("expected a new member, got {other:?}"),
    }

    // A PVC on its way out frees its ordinal (the new member waits for it to go).
    let mut fx = Fx::healthy(2);
    target(&mut fx, 3);
    fx.obs.retained_pvcs = vec![PvcFacts {
        deleting: true,
        ..retained("etcd-2")
    }];
    match fx.step() {
        Step::CreateMember(m) => assert_eq!(m.metadata.name.as_deref(), Some("etcd-2")),
        other => panic!("expected a new member, got {other:?}"),
    }

    // Other clusters' names and foreign names do not count.
    let mut fx = Fx::healthy(2);
    target(&mut fx, 3);
    fx.obs.retained_pvcs = vec![retained("other-2"), retained("etcd-x7k2p")];
    match fx.step() {
        Step::CreateMember(m) => assert_eq!(m.metadata.name.as_deref(), Some("etcd-2")),
        other => panic!("expected a new member, got {other:?}"),
    }
}

#[test]
fn cluster_deletion_under_when_deleted_retain_releases_every_pvc_first() {
    let mut fx = Fx::healthy(2);
    fx.obs.cluster.metadata.deletion_timestamp = Some(Time(at(50)));
    fx.obs.retained_pvcs = vec![retained("etcd-5")];
    assert_eq!(
        fx.step(),
        Step::DeleteMember {
            member: "etcd-0".into()
        },
        "whenDeleted: Delete (the default): garbage collection takes the PVCs"
    );

    policy(&mut fx, Some(PvcRetention::Retain), None);
    let mut released = Vec::new();
    loop {
        match fx.step() {
            Step::SetPvcOwner {
                member,
                pvc,
                owner: None,
                ..
            } => {
                released.push(pvc.clone());
                match member {
                    Some(m) => fx.observed_member(&m).pvc.as_mut().unwrap().owner_uid = None,
                    None => fx
                        .obs
                        .retained_pvcs
                        .iter_mut()
                        .for_each(|p| p.owner_uid = None),
                }
            }
            other => {
                assert_eq!(other.kind(), StepKind::DeleteMember);
                break;
            }
        }
        assert!(released.len() <= 3, "released again: {released:?}");
    }
    assert_eq!(released, ["data-etcd-0", "data-etcd-1", "data-etcd-5"]);

    // With every member gone, nothing is left to release: the planner waits for the
    // finalizer to go (the reconciler removes it when the step does not mutate).
    fx.obs.members.clear();
    assert!(!fx.step().mutates());
}
