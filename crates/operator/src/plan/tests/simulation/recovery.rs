//! The lost-quorum recoveries, from the survivor and from a snapshot, completing whichever
//! pass and point the operator dies at.

use super::*;

/// Where one pass of the operator dies, for the exhaustive crash matrices of the lost-quorum
/// recoveries. `act` writes the cluster status, then each member status, then performs the
/// step; a death after the step (the crash points `after_pod_delete`, `after_pod_create`,
/// `after_pod_metadata_patch`, `after_member_remove`, `after_pvc_delete`, ...) leaves the
/// world exactly as a pass that went on would, since the planner keeps nothing between passes:
/// the next process plans from what it observes, which is the uncrashed run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CrashAt {
    /// The pass planned and wrote nothing.
    BeforeWrites,
    /// The cluster status (the recovery's record) written, no member status.
    AfterClusterStatus,
    /// The cluster status and the first member status written (`after_phase_write`).
    AfterFirstMemberStatus,
    /// Every status written, the step not performed.
    BeforeStep,
}

const CRASH_POSITIONS: [CrashAt; 4] = [
    CrashAt::BeforeWrites,
    CrashAt::AfterClusterStatus,
    CrashAt::AfterFirstMemberStatus,
    CrashAt::BeforeStep,
];

/// Runs passes from `fx` until `done`, performing each step with `apply`, with the operator
/// dying once at pass `crash` (if any) at `at`. Returns the steps performed, in order.
fn run_crashing(
    fx: &mut Fx,
    apply: &mut dyn FnMut(&mut Fx, &Step),
    done: &dyn Fn(&Fx) -> bool,
    crash: Option<(usize, CrashAt)>,
    limit: usize,
) -> Vec<Step> {
    let mut performed = Vec::new();
    for pass in 0..limit {
        if done(fx) {
            return performed;
        }
        let plan = plan_next_step(&fx.obs, at(200_000 + pass as i64));
        if let Some((when, position)) = crash
            && when == pass
        {
            match position {
                CrashAt::BeforeWrites => {}
                CrashAt::AfterClusterStatus => {
                    if let Some(status) = &plan.cluster_status {
                        fx.obs.cluster.status = Some(status.clone());
                    }
                }
                CrashAt::AfterFirstMemberStatus => {
                    if let Some(status) = &plan.cluster_status {
                        fx.obs.cluster.status = Some(status.clone());
                    }
                    if let Some(write) = plan.member_statuses.first() {
                        fx.member_mut(&write.member).status = Some(write.status.clone());
                    }
                }
                CrashAt::BeforeStep => fx.write_statuses(&plan),
            }
            continue;
        }
        fx.write_statuses(&plan);
        apply(fx, &plan.step);
        performed.push(plan.step);
    }
    panic!(
        "no end after {limit} passes (crash {crash:?}); last steps: {:?}",
        performed
            .iter()
            .rev()
            .take(8)
            .map(Step::kind)
            .collect::<Vec<_>>()
    );
}

fn recovery_record(fx: &Fx) -> Option<etcd_operator_api::cluster::QuorumRecoveryStatus> {
    fx.obs.cluster.status.as_ref()?.quorum_recovery.clone()
}

fn recovery_done(fx: &Fx) -> bool {
    use etcd_operator_api::cluster::{QuorumRecoveryPhase, RECOVER_QUORUM_ANNOTATION};
    recovery_record(fx).and_then(|r| r.phase) == Some(QuorumRecoveryPhase::Completed)
        && fx
            .obs
            .cluster
            .metadata
            .annotations
            .as_ref()
            .is_none_or(|a| !a.contains_key(RECOVER_QUORUM_ANNOTATION))
}

fn forced(step: &Step) -> bool {
    matches!(step, Step::CreatePod(pod) if pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(crate::plan::FORCE_NEW_CLUSTER_ANNOTATION))
        .is_some_and(|v| v == "true"))
}

/// The recovery from a survivor (2 of 3 members wiped), asked for and automatic, with the
/// operator dying once at every pass and at every point of a pass: it always completes, the
/// survivor's Pod is recreated with --force-new-cluster exactly once and never touched after,
/// each lost member is reset exactly once, and the flag ends "false".
#[test]
fn a_recovery_from_the_survivor_completes_whichever_pass_and_point_the_operator_dies_at() {
    use super::super::quorum::{
        apply, automatic, available_false_since, request, two_of_three_wiped,
    };
    for trigger in ["asked", "automatic"] {
        let start = || {
            let mut fx = two_of_three_wiped();
            if trigger == "asked" {
                request(&mut fx, "auto");
            } else {
                automatic(&mut fx, "1s");
                available_false_since(&mut fx, 0);
            }
            fx
        };
        let mut counter = 0;
        let uncrashed = run_crashing(
            &mut start(),
            &mut |fx, step| apply(fx, step, &mut counter),
            &recovery_done,
            None,
            80,
        );
        let mut runs = 0;
        for pass in 0..=uncrashed.len() {
            for position in CRASH_POSITIONS {
                let mut fx = start();
                let mut counter = 0;
                let steps = run_crashing(
                    &mut fx,
                    &mut |fx, step| apply(fx, step, &mut counter),
                    &recovery_done,
                    Some((pass, position)),
                    80,
                );
                runs += 1;
                let context = format!("{trigger}, crash at pass {pass} {position:?}: {steps:?}");
                assert_eq!(steps.iter().filter(|s| forced(s)).count(), 1, "{context}");
                let forced_at = steps.iter().position(forced).unwrap();
                assert!(
                    steps[forced_at..]
                        .iter()
                        .all(|s| !(s.is_destructive() && s.member() == Some("etcd-0"))),
                    "the survivor is not touched once forced: {context}"
                );
                for m in ["etcd-1", "etcd-2"] {
                    let pvc_deletes = steps
                        .iter()
                        .filter(|s| matches!(s, Step::DeletePvc { member, .. } if member == m))
                        .count();
                    assert_eq!(pvc_deletes, 1, "{m} reset once: {context}");
                }
                let survivor = fx.obs.members[0].pod.as_ref().unwrap();
                assert_eq!(
                    survivor
                        .annotations
                        .get(crate::plan::FORCE_NEW_CLUSTER_ANNOTATION)
                        .map(String::as_str),
                    Some("false"),
                    "{context}"
                );
                assert_eq!(fx.obs.etcd.member_list().len(), 1, "{context}");
            }
        }
        assert!(runs >= 4 * 8, "{trigger}: {runs} runs");
    }
}

/// The recovery from a snapshot (every member's data lost), memory-backed and PVC-backed,
/// with the operator dying once at every pass and every point of a pass: it always completes,
/// the seed is restored exactly once, and the restored cluster's ID is latched.
#[test]
fn a_recovery_from_a_snapshot_completes_whichever_pass_and_point_the_operator_dies_at() {
    use super::super::quorum::request;
    use super::super::snapshot_recovery::{NEW_CLUSTER_ID, all_pods_lost, apply, settle, snapshot};
    for memory in [true, false] {
        let start = || {
            let mut fx = if memory {
                all_pods_lost(vec![snapshot("newest", CLUSTER, 900, true)])
            } else {
                let mut fx = Fx::healthy(3);
                for i in 0..3 {
                    fx.observed_member(&name(i)).pvc = None;
                    fx.without_pod(&name(i));
                }
                fx.obs.etcd = crate::etcd::EtcdView::not_observed("no member has a Pod");
                fx.obs.snapshots = Some(Ok(vec![snapshot("newest", CLUSTER, 900, true)]));
                settle(&mut fx);
                fx
            };
            request(&mut fx, "auto");
            fx
        };
        let mut restores = 0;
        let uncrashed = run_crashing(
            &mut start(),
            &mut |fx, step| apply(fx, step, &mut restores),
            &recovery_done,
            None,
            80,
        );
        assert_eq!(restores, 1);
        for pass in 0..=uncrashed.len() {
            for position in CRASH_POSITIONS {
                let mut fx = start();
                let mut restores = 0;
                let steps = run_crashing(
                    &mut fx,
                    &mut |fx, step| apply(fx, step, &mut restores),
                    &recovery_done,
                    Some((pass, position)),
                    80,
                );
                let context =
                    format!("memory={memory}, crash at pass {pass} {position:?}: {steps:?}");
                assert_eq!(restores, 1, "restored exactly once: {context}");
                assert_eq!(
                    fx.obs
                        .cluster
                        .status
                        .as_ref()
                        .unwrap()
                        .cluster_id
                        .as_deref(),
                    Some(crate::etcd::member_id_hex(NEW_CLUSTER_ID).as_str()),
                    "{context}"
                );
            }
        }
    }
}
