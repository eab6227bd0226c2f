//! Lost-quorum recovery from a snapshot (no member's data survives): which snapshot, the
//! refusals, a whole recovery applied step by step (with a crash before every step), and
//! properties over generated states.

use etcd_operator_api::MemberPhase;
use etcd_operator_api::cluster::{
    QuorumRecoveryMode, QuorumRecoveryPhase, QuorumRecoverySpec, QuorumRecoveryStatus,
    RECOVER_QUORUM_ANNOTATION,
};
use etcd_operator_api::labels::quorum;
use etcd_operator_api::shared::{
    AzureSnapshotLocation, GcsSnapshotLocation, LocalSnapshotLocation, PvcSnapshotLocation,
    S3SnapshotLocation, SnapshotLocation,
};
use k8s_openapi::api::core::v1::LocalObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use proptest::prelude::*;

use super::fixtures::*;
use crate::build::{RESTORE_COMMIT_CONTAINER, RESTORE_CONTAINER, RESTORE_FETCH_CONTAINER};
use crate::etcd::{EtcdView, member_id_hex};
use crate::plan::{Plan, SnapshotFacts, Step, WaitReason, plan_next_step};

pub(super) const NEW_CLUSTER_ID: u64 = 0xbeef;

pub(super) fn snapshot(name: &str, cluster: &str, completed: i64, verified: bool) -> SnapshotFacts {
    SnapshotFacts {
        name: name.into(),
        cluster: cluster.into(),
        complete: true,
        verified,
        revision: Some(completed),
        completed_at: Some(at(completed)),
        uri: Some(format!("s3://backups/{cluster}/{name}.db")),
        destination: SnapshotLocation {
            s3: Some(S3SnapshotLocation {
                endpoint: "http://s3.test:9000".into(),
                bucket: "backups".into(),
                key: Some(cluster.into()),
                credentials_secret_ref: LocalObjectReference {
                    name: "s3-credentials".into(),
                },
                region: Some("us-east-1".into()),
                force_path_style: Some(true),
            }),
            ..Default::default()
        },
        deleting: false,
        encrypted: false,
        identity: None,
    }
}

/// A memory-backed 3-member cluster whose every Pod is gone (etcd not answering), after rule 7
/// has marked the members `Replacing` (DataLost), as it does first thing.
pub(super) fn all_pods_lost(snapshots: Vec<SnapshotFacts>) -> Fx {
    let mut fx = Fx::healthy(3);
    fx.make_memory_backed();
    for i in 0..3 {
        fx.without_pod(&name(i));
    }
    fx.obs.etcd = EtcdView::not_observed("no member has a Pod");
    fx.obs.snapshots = Some(Ok(snapshots));
    settle(&mut fx);
    fx
}

pub(super) fn settle(fx: &mut Fx) {
    for _ in 0..5 {
        let plan = fx.plan();
        if !matches!(plan.step, Step::SetPhase { .. }) {
            return;
        }
        fx.write_statuses(&plan);
    }
}

fn request(fx: &mut Fx, value: &str) {
    fx.obs
        .cluster
        .metadata
        .annotations
        .get_or_insert_default()
        .insert(RECOVER_QUORUM_ANNOTATION.into(), value.into());
}

fn recovery(plan: &Plan) -> Option<QuorumRecoveryStatus> {
    plan.cluster_status.as_ref()?.quorum_recovery.clone()
}

fn recorded(fx: &Fx) -> Option<QuorumRecoveryStatus> {
    fx.obs.cluster.status.as_ref()?.quorum_recovery.clone()
}

fn ours_and_decoys() -> Vec<SnapshotFacts> {
    vec![
        snapshot("old", CLUSTER, 500, true),
        snapshot("newest", CLUSTER, 900, true),
        // Newer, but not usable: unverified, another cluster's, being deleted, not Complete.
        snapshot("unverified", CLUSTER, 950, false),
        snapshot("other-cluster", "other", 990, true),
        SnapshotFacts {
            deleting: true,
            ..snapshot("going", CLUSTER, 960, true)
        },
        SnapshotFacts {
            complete: false,
            ..snapshot("running", CLUSTER, 970, true)
        },
        // Encrypted, with no identity named: the operator could not decrypt it.
        SnapshotFacts {
            encrypted: true,
            ..snapshot("sealed", CLUSTER, 980, true)
        },
    ]
}

#[test]
fn the_request_restores_from_the_newest_verified_snapshot_of_this_cluster() {
    let mut fx = all_pods_lost(ours_and_decoys());
    request(&mut fx, "auto");
    let plan = fx.plan();
    let r = recovery(&plan).expect("recorded in the same pass as the first step");
    assert_eq!(r.phase, Some(QuorumRecoveryPhase::Resetting));
    let snap = r.snapshot.clone().unwrap();
    assert_eq!(snap.name, "newest");
    assert_eq!(snap.revision, Some(900));
    assert_eq!(snap.uri, "s3://backups/etcd/newest.db");
    assert_eq!(
        snap.source.as_ref().unwrap().key.as_deref(),
        Some("etcd/newest.db"),
        "the exact object key, not the destination's prefix"
    );
    assert_eq!(
        snap.previous_cluster_id.as_deref(),
        Some(member_id_hex(CLUSTER_ID).as_str())
    );
    assert_eq!(r.survivor, "etcd-0", "the seed is the lowest ordinal");
    assert_eq!(r.removed, vec!["etcd-0", "etcd-1", "etcd-2"]);
    let lost = r.may_have_lost.unwrap();
    assert!(lost.contains("after revision 900"), "{lost}");
    assert!(r.trigger.starts_with("Manual"));
    let event = plan.recovery_event(&fx.obs, now()).unwrap().unwrap();
    assert_eq!(event.reason.as_deref(), Some("QuorumRecoveryStarted"));
}

/// The plan as the reconciler makes it when `observe` did not read the EtcdSnapshots: planned
/// without them, then, when that plan needs them, again with them read.
fn plan_lazily(fx: &Fx, now: k8s_openapi::jiff::Timestamp) -> Plan {
    let mut obs = fx.obs.clone();
    let snapshots = obs.snapshots.take();
    let plan = plan_next_step(&obs, now);
    if !plan.needs_snapshots {
        return plan;
    }
    obs.snapshots = snapshots;
    plan_next_step(&obs, now)
}

#[test]
fn only_a_plan_that_may_restore_from_a_snapshot_needs_the_list() {
    let mut fx = all_pods_lost(ours_and_decoys());
    request(&mut fx, "auto");
    let mut unread = fx.obs.clone();
    unread.snapshots = None;
    assert!(plan_next_step(&unread, now()).needs_snapshots);
    let lazily = plan_lazily(&fx, now());
    assert!(!lazily.needs_snapshots);
    assert_eq!(
        lazily,
        fx.plan(),
        "read after planning, the plan is the same"
    );
    assert_eq!(
        recovery(&lazily).and_then(|r| r.snapshot).map(|s| s.name),
        Some("newest".to_string())
    );

    // No pass of a new cluster, a healthy one or a recovery from a survivor lists them.
    let mut survivor = super::quorum::two_of_three_wiped();
    super::quorum::request(&mut survivor, "auto");
    for (what, mut other) in [
        ("a new cluster", Fx::empty(3)),
        ("a healthy cluster", Fx::healthy(3)),
        ("a recovery from a survivor", survivor),
    ] {
        other.obs.snapshots = None;
        let plan = other.plan();
        assert!(!plan.needs_snapshots, "{what}: {:?}", plan.step);
    }
}

/// A snapshot of this cluster in GCS: `gs://gbackups/etcd/<name>.db`.
fn gcs_snapshot(name: &str, completed: i64) -> SnapshotFacts {
    SnapshotFacts {
        uri: Some(format!("gs://gbackups/{CLUSTER}/{name}.db")),
        destination: SnapshotLocation {
            gcs: Some(GcsSnapshotLocation {
                bucket: "gbackups".into(),
                key: Some(CLUSTER.into()),
                endpoint: Some("http://gcs.test:4443".into()),
                credentials_secret_ref: LocalObjectReference {
                    name: "gcs-key".into(),
                },
            }),
            ..Default::default()
        },
        ..snapshot(name, CLUSTER, completed, true)
    }
}

#[test]
fn a_gcs_or_azure_snapshot_is_restored_from_its_exact_object() {
    let mut fx = all_pods_lost(vec![
        snapshot("older-s3", CLUSTER, 500, true),
        gcs_snapshot("newest-gcs", 900),
    ]);
    request(&mut fx, "auto");
    let r = recovery(&fx.plan()).expect("recorded");
    let snap = r.snapshot.clone().unwrap();
    assert_eq!(snap.name, "newest-gcs");
    assert_eq!(snap.uri, "gs://gbackups/etcd/newest-gcs.db");
    assert_eq!(snap.source, None, "source holds S3 objects only");
    let gcs = snap.gcs.clone().expect("the GCS object is recorded");
    assert_eq!(gcs.key.as_deref(), Some("etcd/newest-gcs.db"));
    assert_eq!(snap.restore_location().and_then(|l| l.gcs), Some(gcs));

    // Through the whole recovery: the seed's one restoring Pod fetches from GCS.
    let mut fx = all_pods_lost(vec![gcs_snapshot("newest-gcs", 900)]);
    request(&mut fx, "auto");
    let mut fetched = None;
    for pass in 0..40 {
        let plan = plan_next_step(&fx.obs, at(100_000 + pass));
        fx.write_statuses(&plan);
        if let Step::CreatePod(pod) = &plan.step
            && let Some(fetch) = pod
                .spec
                .as_ref()
                .and_then(|s| s.init_containers.as_ref())
                .and_then(|c| c.iter().find(|c| c.name == RESTORE_FETCH_CONTAINER))
        {
            fetched = fetch.args.clone();
            break;
        }
        let mut restores = 0;
        apply(&mut fx, &plan.step, &mut restores);
    }
    let args = fetched.expect("the seed's restoring Pod");
    for arg in [
        "--store=gcs",
        "--bucket=gbackups",
        "--key=etcd/newest-gcs.db",
        "--endpoint=http://gcs.test:4443",
    ] {
        assert!(args.iter().any(|a| a == arg), "{arg} in {args:?}");
    }

    let azure = SnapshotFacts {
        uri: Some("azure://acct/etcd/prod/newest.db".into()),
        destination: SnapshotLocation {
            azure: Some(AzureSnapshotLocation {
                account: "acct".into(),
                container: "etcd".into(),
                key: Some("prod".into()),
                endpoint: None,
                credentials_secret_ref: LocalObjectReference {
                    name: "azure-key".into(),
                },
            }),
            ..Default::default()
        },
        ..snapshot("newest", CLUSTER, 900, true)
    };
    let mut fx = all_pods_lost(vec![azure]);
    request(&mut fx, "auto");
    let snap = recovery(&fx.plan()).unwrap().snapshot.unwrap();
    assert_eq!(snap.azure.unwrap().key.as_deref(), Some("prod/newest.db"));
}

#[test]
fn a_snapshot_in_a_local_directory_or_on_a_claim_is_refused_with_what_to_do() {
    let local = SnapshotFacts {
        uri: Some("file:///var/lib/etcd-operator/snapshots/local.db".into()),
        destination: SnapshotLocation {
            local: Some(LocalSnapshotLocation {
                path: "/var/lib/etcd-operator/snapshots".into(),
            }),
            ..Default::default()
        },
        ..snapshot("local", CLUSTER, 900, true)
    };
    let claim = SnapshotFacts {
        uri: Some("pvc://backups/claim.db".into()),
        destination: SnapshotLocation {
            pvc: Some(PvcSnapshotLocation {
                claim_name: "backups".into(),
                sub_path: None,
            }),
            ..Default::default()
        },
        ..snapshot("claim", CLUSTER, 900, true)
    };
    for (name, why) in [
        ("local", "the restoring Pod cannot read"),
        ("claim", "restores from S3, GCS or Azure only"),
    ] {
        let mut fx = all_pods_lost(vec![local.clone(), claim.clone()]);
        request(&mut fx, &format!("snapshot:{name}"));
        let plan = fx.plan();
        assert_eq!(wait_reason(&plan.step), WaitReason::QuorumRecoveryRefused);
        assert!(plan.step.message().contains(why), "{}", plan.step.message());
        assert!(recovery(&plan).is_none(), "{name}");
    }
}

#[test]
fn a_named_snapshot_is_taken_and_another_clusters_is_refused() {
    let mut fx = all_pods_lost(ours_and_decoys());
    request(&mut fx, "snapshot:old");
    let r = recovery(&fx.plan()).unwrap();
    assert_eq!(r.snapshot.unwrap().name, "old");

    for (name, why) in [
        ("other-cluster", "not of etcd"),
        ("unverified", "not verified"),
        ("going", "being deleted"),
        ("running", "not Complete"),
        ("sealed", "names no identity"),
        ("missing", "no EtcdSnapshot missing"),
    ] {
        let mut fx = all_pods_lost(ours_and_decoys());
        request(&mut fx, &format!("snapshot:{name}"));
        let plan = fx.plan();
        assert_eq!(wait_reason(&plan.step), WaitReason::QuorumRecoveryRefused);
        assert!(plan.step.message().contains(why), "{}", plan.step.message());
        assert!(recovery(&plan).is_none(), "{name}");
    }
}

#[test]
fn without_a_usable_snapshot_it_reports_what_to_do_and_deletes_nothing() {
    for snapshots in [
        Vec::new(),
        vec![snapshot("theirs", "other", 900, true)],
        vec![snapshot("unverified", CLUSTER, 900, false)],
    ] {
        let mut fx = all_pods_lost(snapshots);
        request(&mut fx, "auto");
        let plan = fx.plan();
        assert_eq!(wait_reason(&plan.step), WaitReason::QuorumRecoveryRefused);
        let message = plan.step.message();
        assert!(
            message.contains("no Complete and verified EtcdSnapshot"),
            "{message}"
        );
        assert!(message.contains("nothing was deleted"), "{message}");
        assert!(
            message.contains("snapshot:<EtcdSnapshot name>"),
            "{message}"
        );
        assert!(message.contains("delete the EtcdCluster"), "{message}");
        assert!(recovery(&plan).is_none());
        assert_eq!(cluster_condition(&fx, &plan, "Available").0, "False");
        let event = plan.event(&fx.obs, now()).unwrap().unwrap();
        assert_eq!(event.type_.as_deref(), Some("Warning"));
    }
    // The snapshots could not be listed: the same, with the reason.
    let mut fx = all_pods_lost(Vec::new());
    fx.obs.snapshots = Some(Err(
        "listing the EtcdSnapshots of prod failed: forbidden".into()
    ));
    request(&mut fx, "auto");
    let plan = fx.plan();
    assert_eq!(wait_reason(&plan.step), WaitReason::QuorumRecoveryRefused);
    assert!(plan.step.message().contains("forbidden"));
}

#[test]
fn a_member_name_or_a_snapshot_is_refused_where_it_does_not_fit() {
    // Every member's data is gone: a member cannot be the survivor.
    let mut fx = all_pods_lost(ours_and_decoys());
    request(&mut fx, "etcd-1");
    let plan = fx.plan();
    assert_eq!(wait_reason(&plan.step), WaitReason::QuorumRecoveryRefused);
    assert!(recovery(&plan).is_none());
    // A survivor with data exists: no restore from an older snapshot.
    let mut fx = Fx::healthy(3);
    fx.obs.snapshots = Some(Ok(ours_and_decoys()));
    for m in ["etcd-1", "etcd-2"] {
        fx.observed_member(m).pvc = None;
        fx.without_pod(m);
        fx.answer(m, Answer::Down);
    }
    fx.pod_mut("etcd-0").ready = false;
    fx.answer("etcd-0", Answer::NoQuorum);
    settle(&mut fx);
    request(&mut fx, "snapshot:newest");
    let plan = fx.plan();
    assert_eq!(wait_reason(&plan.step), WaitReason::QuorumRecoveryRefused);
    assert!(plan.step.message().contains("a voter with data survives"));
}

#[test]
fn manual_mode_waits_and_automatic_mode_starts_after_the_delay() {
    let fx = all_pods_lost(ours_and_decoys());
    let plan = fx.plan();
    assert!(recovery(&plan).is_none(), "{:?}", plan.step);
    assert!(!plan.step.is_destructive());

    let mut fx = all_pods_lost(ours_and_decoys());
    fx.obs.cluster.spec.quorum_recovery = Some(QuorumRecoverySpec {
        mode: Some(QuorumRecoveryMode::Automatic),
        after: Some("5m".into()),
    });
    let available_false_since = |fx: &mut Fx, since: i64| {
        fx.status_mut().conditions = Some(vec![Condition {
            type_: "Available".into(),
            status: "False".into(),
            reason: "QuorumLost".into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: Time(at(since)),
        }]);
    };
    available_false_since(&mut fx, 100_000 - 60);
    let plan = fx.plan();
    assert!(recovery(&plan).is_none());
    assert!(
        plan.step.message().contains("newest verified EtcdSnapshot"),
        "{}",
        plan.step.message()
    );
    available_false_since(&mut fx, 100_000 - 301);
    let r = recovery(&fx.plan()).unwrap();
    assert_eq!(r.trigger, "Automatic");
    assert_eq!(r.snapshot.unwrap().name, "newest");
}

/// Applies `step` as the API server, the kubelet and etcd would: the restored seed's Pod
/// comes up alone as a new cluster.
pub(super) fn apply(fx: &mut Fx, step: &Step, restores: &mut u32) {
    match step {
        Step::DeletePod { member, .. } => fx.without_pod(member),
        Step::DeletePvc { member, .. } => fx.observed_member(member).pvc = None,
        Step::CreatePvc(pvc) => {
            let member = pvc
                .metadata
                .name
                .as_deref()
                .unwrap()
                .trim_start_matches("data-")
                .to_string();
            fx.observed_member(&member).pvc = Some(bound_pvc(&member));
        }
        Step::CreatePod(pod) => {
            let member = pod.metadata.name.clone().unwrap();
            let init: Vec<String> = pod
                .spec
                .as_ref()
                .unwrap()
                .init_containers
                .iter()
                .flatten()
                .map(|c| c.name.clone())
                .collect();
            let mut facts = running_pod(&member);
            if init.is_empty() {
                facts.uid = format!("pod-{member}-plain");
                facts.ready = false;
                facts.annotations = pod.metadata.annotations.clone().unwrap_or_default();
                fx.with_pod(&member, facts);
                return;
            }
            assert_eq!(
                init,
                [
                    RESTORE_FETCH_CONTAINER,
                    RESTORE_CONTAINER,
                    RESTORE_COMMIT_CONTAINER
                ],
                "the recovery's only Pod restores"
            );
            *restores += 1;
            facts.uid = format!("pod-{member}-restored-{restores}");
            facts.annotations = pod.metadata.annotations.clone().unwrap_or_default();
            facts.start = crate::build::PodStart::from_annotations(Some(&facts.annotations));
            fx.with_pod(&member, facts);
            fx.obs.etcd.members = Ok(Vec::new());
            fx.obs.etcd.endpoints.clear();
            fx.etcd_add(&member, false, true);
            fx.answer(&member, Answer::Healthy);
            fx.set_leader(&member);
            fx.obs.etcd.cluster_id = Some(NEW_CLUSTER_ID);
        }
        Step::SetPodStart { member, start, .. } => {
            let pod = fx.pod_mut(member);
            pod.annotations.extend(start.annotations());
            pod.start = Some(start.clone());
        }
        Step::RemoveClusterAnnotation { annotation, .. } => {
            if let Some(a) = fx.obs.cluster.metadata.annotations.as_mut() {
                a.remove(annotation);
            }
        }
        Step::Wait { .. } | Step::SetPhase { .. } | Step::Idle => {}
        other => panic!("unexpected step in the recovery: {other:?}"),
    }
}

fn run(mut fx: Fx, crash: bool) -> (Fx, u32) {
    let mut restores = 0;
    for pass in 0..40 {
        let t = at(100_000 + pass);
        let plan = plan_next_step(&fx.obs, t);
        fx.write_statuses(&plan);
        if crash && plan.step.mutates() {
            let again = plan_next_step(&fx.obs, t);
            assert_eq!(
                again.step.kind(),
                plan.step.kind(),
                "a resumed pass does the same step"
            );
        }
        apply(&mut fx, &plan.step, &mut restores);
        let done = recorded(&fx).and_then(|r| r.phase) == Some(QuorumRecoveryPhase::Completed);
        let annotated = fx
            .obs
            .cluster
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(RECOVER_QUORUM_ANNOTATION));
        if done && !annotated {
            return (fx, restores);
        }
    }
    panic!("the recovery did not complete: {:?}", recorded(&fx));
}

#[test]
fn an_encrypted_snapshot_is_restored_with_its_identity() {
    let sealed = SnapshotFacts {
        encrypted: true,
        identity: Some(etcd_operator_api::snapshot::SecretKeyRef {
            name: "backup-age".into(),
            key: Some("key.txt".into()),
        }),
        ..snapshot("sealed", CLUSTER, 900, true)
    };
    let mut fx = all_pods_lost(vec![sealed]);
    request(&mut fx, "auto");
    let mut restores = 0;
    for pass in 0..40 {
        let plan = plan_next_step(&fx.obs, at(100_000 + pass));
        fx.write_statuses(&plan);
        if let Step::CreatePod(pod) = &plan.step
            && let Some(init) = pod.spec.as_ref().and_then(|s| s.init_containers.as_ref())
        {
            let fetch = &init[0];
            assert_eq!(fetch.name, RESTORE_FETCH_CONTAINER);
            let identity = fetch
                .env
                .iter()
                .flatten()
                .find(|e| e.name == "AGE_IDENTITY")
                .expect("the identity reaches restore-fetch");
            assert!(identity.value.is_none(), "by reference only");
            let key = identity
                .value_from
                .as_ref()
                .and_then(|v| v.secret_key_ref.as_ref())
                .unwrap();
            assert_eq!(
                (key.name.as_str(), key.key.as_str()),
                ("backup-age", "key.txt")
            );
            let r = recovery(&plan).or_else(|| recorded(&fx)).unwrap();
            assert_eq!(
                r.snapshot.unwrap().age_identity_secret_ref.unwrap().name,
                "backup-age",
                "recorded, so a resumed recovery has it"
            );
            return;
        }
        apply(&mut fx, &plan.step, &mut restores);
    }
    panic!("the seed's restoring Pod was never created");
}

#[test]
fn a_whole_recovery_resets_every_member_restores_the_seed_once_and_latches_the_new_id() {
    for (memory, crash) in [(true, false), (true, true), (false, true)] {
        let mut fx = all_pods_lost(vec![snapshot("newest", CLUSTER, 900, true)]);
        if !memory {
            // PVC-backed: every PVC wiped (etcd refused to start on its empty data).
            let mut pvc_fx = Fx::healthy(3);
            for i in 0..3 {
                pvc_fx.observed_member(&name(i)).pvc = None;
                pvc_fx.without_pod(&name(i));
            }
            pvc_fx.obs.etcd = EtcdView::not_observed("no member has a Pod");
            pvc_fx.obs.snapshots = Some(Ok(vec![snapshot("newest", CLUSTER, 900, true)]));
            settle(&mut pvc_fx);
            fx = pvc_fx;
        }
        request(&mut fx, "auto");
        let (fx, restores) = run(fx, crash);
        assert_eq!(restores, 1, "memory={memory}: restored exactly once");
        let status = fx.obs.cluster.status.clone().unwrap();
        let r = status.quorum_recovery.clone().unwrap();
        let snap = r.snapshot.clone().unwrap();
        assert_eq!(
            status.cluster_id.as_deref(),
            Some(member_id_hex(NEW_CLUSTER_ID).as_str()),
            "the restored cluster's ID is latched"
        );
        assert_eq!(snap.cluster_id, status.cluster_id);
        assert!(r.completion_time.is_some());
        let seed = fx.obs.members[0].pod.as_ref().unwrap();
        assert_eq!(
            seed.start.as_ref().map(|s| s.kind("etcd-0")),
            Some(crate::build::StartKind::OwnData),
            "a later restart of the seed never bootstraps again"
        );
        for m in ["etcd-1", "etcd-2"] {
            let om = fx
                .obs
                .members
                .iter()
                .find(|o| o.member.metadata.name.as_deref() == Some(m))
                .unwrap();
            let s = om.member.status.as_ref().unwrap();
            assert_eq!(s.phase, Some(MemberPhase::Provisioning), "{m}");
            assert_eq!(s.member_id, None, "{m} forgot its identity");
            assert!(om.pod.is_none() && om.pvc.is_none(), "{m}");
        }
        // Then the usual joins: the next step adds a learner (or readies the seed), and no
        // Pod is ever created with the restore containers again.
        let mut fx = fx;
        for _ in 0..6 {
            let plan = fx.plan();
            fx.write_statuses(&plan);
            match &plan.step {
                Step::CreatePod(pod) => {
                    assert!(pod.spec.as_ref().unwrap().init_containers.is_none());
                    break;
                }
                Step::CreatePvc(pvc) => {
                    assert_eq!(pvc.metadata.name.as_deref(), Some("data-etcd-1"));
                    break;
                }
                Step::AddLearner { member, .. } => {
                    assert_eq!(member, "etcd-1");
                    break;
                }
                Step::LabelPod { .. } | Step::SetPhase { .. } | Step::Wait { .. } => {
                    if let Step::LabelPod { member, pod, .. } = &plan.step {
                        assert_eq!(member, "etcd-0");
                        let _ = pod;
                        fx.pod_mut("etcd-0").voter_label = true;
                    }
                }
                other => panic!("memory={memory}: {other:?}"),
            }
        }
    }
}

#[test]
fn an_answering_etcd_while_resetting_aborts_before_anything_more_is_deleted() {
    let mut fx = all_pods_lost(ours_and_decoys());
    request(&mut fx, "auto");
    let plan = fx.plan();
    fx.write_statuses(&plan);
    fx.answer("etcd-2", Answer::NoQuorum);
    let plan = fx.plan();
    assert_eq!(
        recovery(&plan).unwrap().phase,
        Some(QuorumRecoveryPhase::Aborted)
    );
    assert!(!plan.step.is_destructive(), "{:?}", plan.step);
}

/// A generated member for the properties.
#[derive(Clone, Debug)]
enum Gen {
    Serving,
    NoQuorum,
    PodLost,
    Down,
}

fn gen_member() -> impl Strategy<Value = Gen> {
    prop_oneof![
        2 => Just(Gen::Serving),
        1 => Just(Gen::NoQuorum),
        4 => Just(Gen::PodLost),
        1 => Just(Gen::Down),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// A restore from a snapshot starts only when no voter may still have its data (never while
    /// a majority is reachable, never while any voter answers), only from a usable snapshot of
    /// this cluster, and every pass of the recovery takes at most one destructive step, on a
    /// member it recorded.
    #[test]
    fn restores_only_when_every_voter_lost_its_data_and_only_ours(
        members in prop_oneof![
            proptest::collection::vec(gen_member(), 3),
            proptest::collection::vec(gen_member(), 5),
        ],
        theirs_newer in any::<bool>(),
        ours in any::<bool>(),
        name_theirs in any::<bool>(),
        passes in 1usize..16,
    ) {
        let mut fx = Fx::healthy(members.len() as u32);
        fx.make_memory_backed();
        for (i, g) in members.iter().enumerate() {
            let m = name(i as u32);
            match g {
                Gen::Serving => {}
                Gen::NoQuorum => {
                    fx.pod_mut(&m).ready = false;
                    fx.answer(&m, Answer::NoQuorum);
                }
                Gen::PodLost => {
                    fx.without_pod(&m);
                    fx.etcd_remove(&m);
                }
                Gen::Down => {
                    fx.pod_mut(&m).ready = false;
                    fx.answer(&m, Answer::Down);
                }
            }
        }
        let n = members.len() as u32;
        let serving = members.iter().filter(|g| matches!(g, Gen::Serving)).count() as u32;
        if serving < quorum(n) {
            for (i, g) in members.iter().enumerate() {
                if matches!(g, Gen::Serving) {
                    fx.pod_mut(&name(i as u32)).ready = false;
                    fx.answer(&name(i as u32), Answer::NoQuorum);
                }
            }
        }
        if members.iter().all(|g| matches!(g, Gen::PodLost)) {
            fx.obs.etcd = EtcdView::not_observed("no member has a Pod");
        }
        let mut snaps = Vec::new();
        if ours {
            snaps.push(snapshot("ours", CLUSTER, 500, true));
        }
        if theirs_newer {
            snaps.push(snapshot("theirs", "other", 900, true));
        }
        fx.obs.snapshots = Some(Ok(snaps));
        request(&mut fx, if name_theirs { "snapshot:theirs" } else { "auto" });
        let all_lost = members.iter().all(|g| matches!(g, Gen::PodLost));
        let mut restores = 0;
        for pass in 0..passes {
            let plan = plan_next_step(&fx.obs, at(100_000 + pass as i64));
            prop_assert_eq!(
                &plan_lazily(&fx, at(100_000 + pass as i64)),
                &plan,
                "planned before the EtcdSnapshots are read, then with them"
            );
            if let Some(r) = recovery(&plan).filter(|r| r.snapshot.is_some()) {
                prop_assert!(all_lost, "a restore with data left: {:?} {:?}", members, plan.step);
                prop_assert_eq!(r.snapshot.as_ref().unwrap().name.as_str(), "ours");
                if plan.step.is_destructive() {
                    let target = plan.step.member().unwrap_or_default().to_string();
                    prop_assert!(r.removed.contains(&target), "{:?}", plan.step);
                }
            }
            fx.write_statuses(&plan);
            match &plan.step {
                Step::DeletePod { .. } | Step::DeletePvc { .. } | Step::CreatePvc(_)
                | Step::CreatePod(_) | Step::SetPodStart { .. }
                | Step::RemoveClusterAnnotation { .. } | Step::Wait { .. }
                | Step::SetPhase { .. } | Step::Idle => apply(&mut fx, &plan.step, &mut restores),
                _ => break,
            }
            prop_assert!(restores <= 1);
        }
        if !all_lost {
            prop_assert!(recorded(&fx).and_then(|r| r.snapshot).is_none());
        }
    }
}
