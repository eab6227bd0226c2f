//! Bootstrap from a snapshot (`spec.bootstrap.restore`): the seed carries the source, a failing
//! restore stops the pass with its reason, the status records the source and revision once.

use etcd_operator_api::cluster::BootstrapSpec;
use etcd_operator_api::shared::{RestoreSpec, S3SnapshotLocation, SnapshotLocation};

use super::fixtures::*;
use crate::plan::step::{Step, WaitReason};

fn s3_restore() -> RestoreSpec {
    RestoreSpec {
        source: SnapshotLocation {
            s3: Some(S3SnapshotLocation {
                endpoint: "http://s3.local:9000".into(),
                bucket: "backups".into(),
                key: Some("prod/before.db".into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        age_identity_secret_ref: None,
    }
}

fn restoring(fx: &mut Fx) {
    fx.obs.cluster.spec.bootstrap = Some(BootstrapSpec {
        restore: Some(s3_restore()),
    });
}

#[test]
fn an_s3_restore_bootstraps_a_seed_that_carries_the_source() {
    let mut fx = Fx::empty(3);
    restoring(&mut fx);
    match fx.step() {
        Step::CreateMember(member) => {
            assert_eq!(member.spec.bootstrap, Some(true));
            assert_eq!(member.spec.restore, Some(s3_restore()));
        }
        other => panic!("expected the seed, got {other:?}"),
    }
}

#[test]
fn a_pvc_restore_bootstraps_a_seed_that_carries_the_source() {
    let pvc = RestoreSpec {
        source: SnapshotLocation {
            pvc: Some(etcd_operator_api::shared::PvcSnapshotLocation {
                claim_name: "backups".into(),
                sub_path: Some("etcd/nightly.db".into()),
            }),
            ..Default::default()
        },
        age_identity_secret_ref: None,
    };
    let mut fx = Fx::empty(3);
    fx.obs.cluster.spec.bootstrap = Some(BootstrapSpec {
        restore: Some(pvc.clone()),
    });
    match fx.step() {
        Step::CreateMember(member) => {
            assert_eq!(member.spec.bootstrap, Some(true));
            assert_eq!(member.spec.restore, Some(pvc));
        }
        other => panic!("expected the seed, got {other:?}"),
    }
}

#[test]
fn a_restore_source_without_a_location_is_refused() {
    let mut fx = Fx::empty(3);
    fx.obs.cluster.spec.bootstrap = Some(BootstrapSpec {
        restore: Some(RestoreSpec {
            source: SnapshotLocation {
                ..Default::default()
            },
            age_identity_secret_ref: None,
        }),
    });
    match fx.step() {
        Step::Wait { reason, message } => {
            assert_eq!(reason, WaitReason::UnsupportedSpec);
            assert!(message.contains("naming no single store"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    // A local store (admission refuses it): refused here too, never restored from nothing.
    let mut fx = Fx::empty(3);
    fx.obs.cluster.spec.bootstrap = Some(BootstrapSpec {
        restore: Some(RestoreSpec {
            source: SnapshotLocation {
                local: Some(etcd_operator_api::shared::LocalSnapshotLocation {
                    path: "/var/lib/etcd-operator/snapshots/x.db".into(),
                }),
                ..Default::default()
            },
            age_identity_secret_ref: None,
        }),
    });
    match fx.step() {
        Step::Wait { reason, message } => {
            assert_eq!(reason, WaitReason::UnsupportedSpec);
            assert!(
                message.contains("the restoring Pod cannot read"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_failing_restore_stops_the_pass_with_its_reason() {
    let mut fx = Fx::empty(1);
    restoring(&mut fx);
    fx.add_member("etcd-0", etcd_operator_api::MemberPhase::Provisioning);
    fx.member_mut("etcd-0").spec.restore = Some(s3_restore());
    let mut pod = running_pod("etcd-0");
    pod.ready = false;
    pod.restore_failure = Some(
        "RestoreFailed NotASnapshot: s3://backups/prod/before.db (10 bytes) is not an etcd snapshot"
            .into(),
    );
    fx.with_pod("etcd-0", pod);
    let plan = fx.plan();
    match &plan.step {
        Step::Wait { reason, message } => {
            assert_eq!(*reason, WaitReason::RestoreFailed);
            assert!(reason.needs_attention(), "a Warning Event");
            assert!(
                message.contains(
                    "restoring etcd-0 from s3://backups/prod/before.db failed (NotASnapshot)"
                ),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    let conditions = plan
        .cluster_status
        .and_then(|s| s.conditions)
        .unwrap_or_default();
    assert!(
        conditions.iter().any(|c| c.reason == "RestoreFailed"),
        "{conditions:?}"
    );
    // Once the init container succeeds, the failure is gone and the cluster proceeds.
    fx.pod_mut("etcd-0").restore_failure = None;
    assert!(!matches!(
        fx.step(),
        Step::Wait {
            reason: WaitReason::RestoreFailed,
            ..
        }
    ));
}

#[test]
fn the_status_records_the_source_and_revision_once() {
    let mut fx = Fx::healthy(1);
    restoring(&mut fx);
    fx.member_mut("etcd-0").spec.restore = Some(s3_restore());
    let status = fx.plan().cluster_status.expect("a status write");
    let restored = status.restored_from.expect("restoredFrom");
    assert_eq!(restored.uri, "s3://backups/prod/before.db");
    assert_eq!(restored.revision, Some(42));
    // Latched: a later pass keeps the first record.
    let mut latched = restored.clone();
    latched.revision = Some(7);
    fx.status_mut().restored_from = Some(latched.clone());
    let again = fx
        .plan()
        .cluster_status
        .and_then(|s| s.restored_from)
        .unwrap_or(latched.clone());
    assert_eq!(again, latched);
    // A cluster that was not restored records nothing.
    let plain = Fx::healthy(1);
    assert!(
        plain
            .plan()
            .cluster_status
            .and_then(|s| s.restored_from)
            .is_none()
    );
}

#[test]
fn a_long_restore_is_never_disturbed_by_the_repair_ladder() {
    let mut fx = Fx::empty(1);
    restoring(&mut fx);
    fx.add_member("etcd-0", etcd_operator_api::MemberPhase::Provisioning);
    fx.member_mut("etcd-0").spec.restore = Some(s3_restore());
    let mut pod = running_pod("etcd-0");
    pod.ready = false;
    pod.phase = crate::plan::PodPhase::Pending;
    // Started an hour ago: far beyond the not-ready grace period.
    pod.started_at = Some(at(0));
    pod.ready_changed_at = Some(at(0));
    pod.restoring = Some("restore-fetch".into());
    fx.with_pod("etcd-0", pod);
    match fx.step() {
        Step::Wait { reason, message } => {
            assert_eq!(reason, WaitReason::WaitingForMember);
            assert!(message.contains("restore-fetch"), "{message}");
        }
        other => panic!("a restoring seed must be left alone, got {other:?}"),
    }
    // Without the restore, the same Pod is a repair candidate: the guard is what holds it.
    fx.pod_mut("etcd-0").restoring = None;
    assert!(!matches!(
        fx.step(),
        Step::Wait {
            reason: WaitReason::WaitingForMember,
            ref message,
        } if message.contains("restore-fetch")
    ));
}
