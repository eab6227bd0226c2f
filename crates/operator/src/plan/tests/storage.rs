//! Storage growth (issue 12, item 4): a larger `storage.size` expands each PVC-backed
//! member's PVC in place where its StorageClass allows it, one member at a time; where it does
//! not, nothing changes and the refusal says what to do; memory-backed members roll to the
//! larger tmpfs by replacement (the simulations in `simulation/` run both end to end).

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::fixtures::*;
use crate::plan::{ClassExpansion, Step, WaitReason};

/// A converged cluster of `n` PVC-backed members on 1Gi, with the target at `size`; every PVC's
/// StorageClass answers `expansion`.
fn grow(n: u32, size: &str, expansion: ClassExpansion) -> Fx {
    let mut fx = Fx::healthy(n);
    fx.status_mut().observed.as_mut().unwrap().storage.size = Some(Quantity(size.into()));
    fx.obs.cluster.spec.storage.get_or_insert_default().size = Some(Quantity(size.into()));
    for m in &mut fx.obs.members {
        m.pvc.as_mut().unwrap().expansion = expansion.clone();
    }
    fx
}

fn outdated(fx: &Fx) -> usize {
    crate::plan::outdated_members(&crate::plan::PassFacts::new(&fx.obs, now()))
}

#[test]
fn a_larger_size_sets_the_first_members_storage_then_expands_its_pvc() {
    let mut fx = grow(3, "2Gi", ClassExpansion::Allowed);
    assert_eq!(outdated(&fx), 3);
    assert_eq!(
        fx.step(),
        Step::SetMemberStorage {
            member: name(0),
            size: "2Gi".into()
        }
    );
    fx.member_mut(&name(0)).spec.storage.size = Some(Quantity("2Gi".into()));
    assert_eq!(
        fx.step(),
        Step::ResizePvc {
            member: name(0),
            pvc: format!("data-{}", name(0)),
            size: "2Gi".into()
        }
    );
    // Not a restart: no member leaves Ready, and the Event is Normal.
    let plan = fx.plan();
    assert!(!plan.step.is_destructive());
    assert_eq!(plan.step.event_type(), crate::build::EventType::Normal);
}

#[test]
fn an_expansion_under_way_holds_the_next_member() {
    let mut fx = grow(3, "2Gi", ClassExpansion::Allowed);
    fx.member_mut(&name(0)).spec.storage.size = Some(Quantity("2Gi".into()));
    fx.observed_member(&name(0)).pvc.as_mut().unwrap().requested = Some("2Gi".into());
    match fx.step() {
        Step::Wait {
            reason: WaitReason::VolumeResizing,
            message,
        } => assert!(
            message.contains("from 1Gi to 2Gi") && message.contains(&name(0)),
            "{message}"
        ),
        other => panic!("expected VolumeResizing, got {other:?}"),
    }
    // A waiting expansion is progress, not trouble.
    let plan = fx.plan();
    let (status, reason) = cluster_condition(&fx, &plan, "Progressing");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "VolumeResizing")
    );
    // Once the capacity reached the request, the next member goes.
    fx.observed_member(&name(0)).pvc.as_mut().unwrap().capacity = Some("2Gi".into());
    assert_eq!(outdated(&fx), 2);
    assert_eq!(
        fx.step(),
        Step::SetMemberStorage {
            member: name(1),
            size: "2Gi".into()
        }
    );
}

#[test]
fn a_class_without_expansion_changes_nothing_and_says_what_to_do() {
    let why = "StorageClass slow does not allow volume expansion (allowVolumeExpansion is not true): set allowVolumeExpansion: true";
    let fx = grow(3, "2Gi", ClassExpansion::Refused(why.into()));
    let plan = fx.plan();
    match &plan.step {
        Step::Wait {
            reason: WaitReason::StorageExpansionRefused,
            message,
        } => {
            assert!(message.contains("StorageClass slow"), "{message}");
            assert!(message.contains("allowVolumeExpansion: true"), "{message}");
            assert!(message.contains("Nothing was changed"), "{message}");
        }
        other => panic!("expected StorageExpansionRefused, got {other:?}"),
    }
    let (status, reason) = cluster_condition(&fx, &plan, "Progressing");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "StorageExpansionRefused")
    );
    assert_eq!(plan.step.event_type(), crate::build::EventType::Warning);
    assert!(plan.member_statuses.is_empty() || plan.step.member().is_none());
    // The refusal gives way to the next spec at once.
    assert!(crate::plan::rules::rollout::target_refused(
        &crate::plan::PassFacts::new(&fx.obs, now())
    ));
}

#[test]
fn a_refusal_comes_before_any_member_moves_even_midway() {
    // Member 0 grew while the class allowed it; then the class was changed.
    let mut fx = grow(3, "2Gi", ClassExpansion::Refused("no".into()));
    fx.member_mut(&name(0)).spec.storage.size = Some(Quantity("2Gi".into()));
    let pvc = fx.observed_member(&name(0)).pvc.as_mut().unwrap();
    pvc.requested = Some("2Gi".into());
    pvc.capacity = Some("2Gi".into());
    assert!(matches!(
        fx.step(),
        Step::Wait {
            reason: WaitReason::StorageExpansionRefused,
            ..
        }
    ));
}

#[test]
fn an_unreadable_class_waits_without_moving() {
    let fx = grow(3, "2Gi", ClassExpansion::Unknown);
    assert!(matches!(
        fx.step(),
        Step::Wait {
            reason: WaitReason::VolumeResizing,
            ..
        }
    ));
}

#[test]
fn the_same_or_an_equal_size_in_other_units_changes_nothing() {
    for size in ["1Gi", "1024Mi", "1073741824"] {
        let fx = grow(3, size, ClassExpansion::Refused("never asked".into()));
        assert_eq!(outdated(&fx), 0, "{size}");
        assert_eq!(fx.step(), Step::Idle, "{size}");
    }
}

#[test]
fn a_pvc_smaller_than_its_member_is_expanded_after_a_crash() {
    // The operator died after SetMemberStorage: the member says 2Gi, its PVC 1Gi.
    let mut fx = grow(3, "2Gi", ClassExpansion::Allowed);
    for i in 0..3 {
        fx.member_mut(&name(i)).spec.storage.size = Some(Quantity("2Gi".into()));
    }
    assert_eq!(
        fx.step(),
        Step::ResizePvc {
            member: name(0),
            pvc: format!("data-{}", name(0)),
            size: "2Gi".into()
        }
    );
}

#[test]
fn the_readiness_gate_holds_storage_growth() {
    let mut fx = grow(3, "2Gi", ClassExpansion::Allowed);
    fx.answer(&name(2), Answer::Down);
    assert!(
        !matches!(
            fx.step(),
            Step::SetMemberStorage { .. } | Step::ResizePvc { .. }
        ),
        "{:?}",
        fx.step()
    );
}

#[test]
fn a_memory_backed_member_rolls_to_the_larger_tmpfs_by_replacement() {
    let mut fx = Fx::healthy(3);
    fx.make_memory_backed();
    for i in 0..3 {
        fx.pod_mut(&name(i)).tmpfs_size = Some("1Gi".into());
    }
    fx.status_mut().observed.as_mut().unwrap().storage.size = Some(Quantity("2Gi".into()));
    assert_eq!(outdated(&fx), 3);
    // Followers first: etcd-0 leads.
    assert_eq!(
        fx.step(),
        Step::SetMemberStorage {
            member: name(1),
            size: "2Gi".into()
        }
    );
    fx.member_mut(&name(1)).spec.storage.size = Some(Quantity("2Gi".into()));
    let plan = fx.plan();
    assert!(
        matches!(&plan.step, Step::DeletePod { member, .. } if *member == name(1)),
        "{:?}",
        plan.step
    );
    let status = planned_member_status(&fx, &plan, &name(1));
    let ready = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(ready.reason, "StorageResized");
    assert!(ready.message.contains("2Gi"), "{}", ready.message);
}

#[test]
fn a_memory_backed_member_without_quorum_to_spare_is_not_replaced_for_storage() {
    let mut fx = Fx::healthy(2);
    fx.make_memory_backed();
    for i in 0..2 {
        fx.pod_mut(&name(i)).tmpfs_size = Some("1Gi".into());
        fx.member_mut(&name(i)).spec.storage.size = Some(Quantity("2Gi".into()));
    }
    fx.status_mut().observed.as_mut().unwrap().storage.size = Some(Quantity("2Gi".into()));
    assert!(matches!(
        fx.step(),
        Step::Wait {
            reason: WaitReason::QuorumAtRisk,
            ..
        }
    ));
}

#[test]
fn a_failed_expansion_is_reported_with_kubernetes_words_and_holds_the_rest() {
    let mut fx = grow(3, "8Gi", ClassExpansion::Allowed);
    fx.member_mut(&name(0)).spec.storage.size = Some(Quantity("8Gi".into()));
    let pvc = fx.observed_member(&name(0)).pvc.as_mut().unwrap();
    pvc.requested = Some("8Gi".into());
    pvc.resize_progress = Some("Resizing".into());
    match fx.step() {
        Step::Wait {
            reason: WaitReason::VolumeResizing,
            message,
        } => assert!(message.contains("(Resizing)"), "{message}"),
        other => panic!("expected VolumeResizing, got {other:?}"),
    }
    let pvc = fx.observed_member(&name(0)).pvc.as_mut().unwrap();
    pvc.resize_progress = None;
    pvc.resize_failure = Some(
        "ControllerResizeInfeasible (ControllerResizeError: requested size 8Gi exceeds the maximum volume size 4Gi)"
            .into(),
    );
    let plan = fx.plan();
    match &plan.step {
        Step::Wait {
            reason: WaitReason::StorageExpansionFailed,
            message,
        } => {
            assert!(message.contains("from 1Gi to 8Gi"), "{message}");
            assert!(
                message.contains("exceeds the maximum volume size 4Gi"),
                "{message}"
            );
            assert!(message.contains("Kubernetes retries"), "{message}");
        }
        other => panic!("expected StorageExpansionFailed, got {other:?}"),
    }
    let (status, reason) = cluster_condition(&fx, &plan, "Progressing");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "StorageExpansionFailed")
    );
    assert_eq!(plan.step.event_type(), crate::build::EventType::Warning);
    // Once Kubernetes grew it after all, the next member goes.
    let pvc = fx.observed_member(&name(0)).pvc.as_mut().unwrap();
    pvc.resize_failure = None;
    pvc.capacity = Some("8Gi".into());
    assert_eq!(
        fx.step(),
        Step::SetMemberStorage {
            member: name(1),
            size: "8Gi".into()
        }
    );
}
