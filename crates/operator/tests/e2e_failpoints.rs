//! Crash safety, end to end: the operator deployed from `deploy/` with its crash points armed
//! dies (exits, as a crash would) right after an etcd call or a Kubernetes write and before
//! anything records what it did; the kubelet starts a new process, which must pick up from
//! what it observes. Each armed point fires exactly once (the operator removes its file as it
//! fires), in the order the scenario reaches them, so one scenario proves every point it
//! passes. After each scenario the cluster converges with no duplicate, missing or stray
//! member (etcd's member list and the EtcdMembers agree), Available, and the client workload
//! running through it all lost no acknowledged write.
//!
//! Scenarios here: scale-out 3 → 4 and scale-in 4 → 3 (the leader being the member removed)
//! of a PVC-backed cluster. `e2e_failpoints_rollouts.rs` has the replacement of a memory-backed
//! member, a rolling upgrade and storage growth: two binaries, each with its control plane, so
//! that each stays well within the suite's 10-minute limit per test (the whole matrix took
//! 562 s on the real control plane in one CI run, and timed out at 600 s in another).

use etcd_operator_e2e_support as support;

use std::time::Instant;

use support::failpoints::{LIMIT, crash_through, deployment};
use support::healing::start_healing_cluster;
use support::{cluster_yaml, create_namespace};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn e2e_failpoint_matrix() {
    let test_started = Instant::now();
    let cluster = start_healing_cluster(3).await;
    cluster.deploy_operator_with(&deployment()).await;
    let client = cluster.client();
    create_namespace(&client, "fp").await;
    cluster.apply(&cluster_yaml("etcd", "fp", 3, ""));
    cluster.wait_converged("fp", "etcd", 3, LIMIT).await;
    let ids = cluster.recorded_ids("fp", "etcd").await;

    // Scale-out: the new member's EtcdMember, phase, PVC, MemberAdd, Pod, MemberPromote.
    crash_through(
        &cluster,
        "fp",
        4,
        &[
            "after_member_create",
            "after_phase_write",
            "after_pvc_create",
            "after_member_add",
            "after_pod_create",
            "after_member_promote",
        ],
        || async { cluster.scale("fp", "etcd", 4) },
    )
    .await;
    let grown = cluster.recorded_ids("fp", "etcd").await;
    assert_eq!(&grown[..3], &ids[..], "the first three members unchanged");

    // Scale-in of the leader: MoveLeader, the scale-in mark, the EtcdMember's deletion, Terminating, MemberRemove,
    // the Pod's and the PVC's deletion.
    cluster.move_leader_to("fp", "etcd", "etcd-3").await;
    crash_through(
        &cluster,
        "fp",
        3,
        &[
            "after_move_leader",
            "after_scale_in_mark",
            "after_member_delete",
            "after_phase_write",
            "after_member_remove",
            "after_pod_delete",
            "after_pvc_delete",
        ],
        || async { cluster.scale("fp", "etcd", 3) },
    )
    .await;
    assert_eq!(cluster.recorded_ids("fp", "etcd").await, ids);
    println!(
        "e2e_failpoint_matrix (scaling): {:.0} s",
        test_started.elapsed().as_secs_f64()
    );
}
