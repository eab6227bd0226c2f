//! Crash safety, end to end: the operator deployed from `deploy/` with its crash points armed
//! dies (exits, as a crash would) right after an etcd call or a Kubernetes write and before
//! anything records what it did; the kubelet starts a new process, which must pick up from
//! what it observes. Each armed point fires exactly once (the operator removes its file as it
//! fires), in the order the scenario reaches them, so one scenario proves every point it
//! passes. After each scenario the cluster converges with no duplicate, missing or stray
//! member (etcd's member list and the EtcdMembers agree), Available, and the client workload
//! running through it all lost no acknowledged write.
//!
//! Scenarios: scale-out 3 → 4 and scale-in 4 → 3 (the leader being the member removed) of a
//! PVC-backed cluster, the replacement of a memory-backed member that lost its Pod, and a
//! rolling upgrade 3.4.23 → 3.5.1 (the member's version set, its Pod deleted and created
//! again, the leader's leadership moved), and storage growth of the PVC-backed cluster (each
//! member's storage size set, its PVC expanded).

mod support;

use std::time::{Duration, Instant};

use support::cluster::Cluster;
use support::healing::{OperatorDeployment, REPAIR_ARGS, start_healing_cluster};
use support::workload::Workload;
use support::{cluster_yaml, cluster_yaml_on, create_namespace, eventually};

const LIMIT: Duration = Duration::from_secs(240);

/// The operator for this test: crash points mounted, short repair settings, and no leader
/// election, so a restarted process acts at once rather than after the dead one's Lease
/// expires (the Lease handover has its own test, e2e_operator_replicas).
fn deployment() -> OperatorDeployment {
    let mut extra_args: Vec<String> = REPAIR_ARGS.iter().map(|a| a.to_string()).collect();
    extra_args.push("--leader-elect=false".into());
    OperatorDeployment {
        extra_args,
        failpoints: true,
    }
}

/// Arms `points`, runs `change`, and waits until every point has fired, the operator has
/// restarted once per point, and the cluster has converged on `replicas` members; the
/// workload runs throughout and must lose nothing.
async fn crash_through<F, Fut>(
    cluster: &Cluster,
    namespace: &str,
    replicas: i32,
    points: &[&str],
    change: F,
) where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    // A fresh operator Pod: the kubelet's restart backoff starts over.
    cluster.replace_operator_pod().await;
    let restarts_before = cluster.operator_restarts().await;
    let label = format!("{namespace}-{replicas}");
    let workload = Workload::start(cluster.network.clone(), namespace, "etcd", &label);
    tokio::time::sleep(Duration::from_millis(500)).await;
    for point in points {
        cluster.arm_failpoint(point);
    }
    let started = Instant::now();
    change().await;
    eventually(
        &format!("the crash points {points:?} to fire"),
        LIMIT,
        || async {
            let armed = cluster.armed_failpoints();
            if armed.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "still armed: {armed:?}\noperator logs:\n{}",
                    cluster.operator_logs().await
                ))
            }
        },
    )
    .await;
    cluster
        .wait_converged(namespace, "etcd", replicas, LIMIT)
        .await;
    let restarts = cluster.operator_restarts().await - restarts_before;
    assert_eq!(
        restarts,
        points.len() as i32,
        "the operator died once at each point"
    );
    println!(
        "{label}: {} crashes, converged {:.1} s after the change",
        points.len(),
        started.elapsed().as_secs_f64()
    );
    workload.stop().await.assert_no_loss();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn e2e_failpoint_matrix() {
    let test_started = Instant::now();
    let cluster = start_healing_cluster(3).await;
    cluster.deploy_operator_with(&deployment()).await;
    let client = cluster.client();
    create_namespace(&client, "fp").await;
    // The default StorageClass allows expansion (the storage growth scenario at the end).
    cluster.apply(
        "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: standard\n  annotations:\n    storageclass.kubernetes.io/is-default-class: \"true\"\nprovisioner: kube-sandbox/local\nallowVolumeExpansion: true\n",
    );
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

    // Replacement of a memory-backed member whose Pod is lost: Replacing, MemberRemove,
    // Provisioning, MemberAdd, the new Pod, MemberPromote.
    create_namespace(&client, "fpm").await;
    let memory = "  storage:\n    medium: Memory\n    size: 256Mi\n";
    cluster.apply(&cluster_yaml("etcd", "fpm", 3, memory));
    cluster.wait_converged("fpm", "etcd", 3, LIMIT).await;
    let ids = cluster.recorded_ids("fpm", "etcd").await;
    crash_through(
        &cluster,
        "fpm",
        3,
        &[
            "after_phase_write",
            "after_member_remove",
            "after_member_add",
            "after_pod_create",
            "after_member_promote",
        ],
        || async { cluster.delete_member_pod("fpm", "etcd-1").await },
    )
    .await;
    let after = cluster.recorded_ids("fpm", "etcd").await;
    assert_ne!(after[1], ids[1], "etcd-1 is a new member");
    assert_eq!((&after[0], &after[2]), (&ids[0], &ids[2]));
    // A rolling upgrade 3.4.23 → 3.5.1: each member's spec.version, its Pod deleted and created
    // again on its data, the leader's leadership moved before its turn.
    create_namespace(&client, "fpu").await;
    cluster.apply(&cluster_yaml_on("etcd", "fpu", 3, "3.4.23", ""));
    cluster.wait_converged("fpu", "etcd", 3, LIMIT).await;
    let ids = cluster.recorded_ids("fpu", "etcd").await;
    crash_through(
        &cluster,
        "fpu",
        3,
        &[
            "after_member_version_set",
            "after_pod_delete",
            "after_pod_create",
            "after_move_leader",
        ],
        || async {
            let (ok, _, stderr) = support::kubectl(
                &cluster,
                &[
                    "-n",
                    "fpu",
                    "patch",
                    "etcdcluster/etcd",
                    "--type=merge",
                    "-p",
                    r#"{"spec":{"version":"3.5.1"}}"#,
                ],
            );
            assert!(ok, "kubectl patch spec.version: {stderr}");
        },
    )
    .await;
    assert_eq!(
        cluster.recorded_ids("fpu", "etcd").await,
        ids,
        "same members"
    );
    let upgraded = support::get_cluster(&client, "fpu", "etcd").await;
    let versions: Vec<Option<String>> = upgraded
        .status
        .and_then(|s| s.members)
        .unwrap_or_default()
        .into_iter()
        .map(|m| m.version)
        .collect();
    assert_eq!(
        versions,
        vec![Some("3.5.1".to_string()); 3],
        "every member on 3.5.1"
    );

    // Storage growth 1Gi → 2Gi of the PVC-backed cluster: a member's spec.storage.size set,
    // its PVC expanded (each point fires on the first member; the others follow).
    let ids = cluster.recorded_ids("fp", "etcd").await;
    crash_through(
        &cluster,
        "fp",
        3,
        &["after_member_storage_set", "after_pvc_resize"],
        || async {
            let (ok, _, stderr) = support::kubectl(
                &cluster,
                &[
                    "-n",
                    "fp",
                    "patch",
                    "etcdcluster/etcd",
                    "--type=merge",
                    "-p",
                    r#"{"spec":{"storage":{"size":"2Gi"}}}"#,
                ],
            );
            assert!(ok, "kubectl patch spec.storage.size: {stderr}");
        },
    )
    .await;
    assert_eq!(
        cluster.recorded_ids("fp", "etcd").await,
        ids,
        "same members"
    );
    eventually("every PVC of fp at 2Gi", LIMIT, || async {
        let claims = kube::Api::<k8s_openapi::api::core::v1::PersistentVolumeClaim>::namespaced(
            client.clone(),
            "fp",
        )
        .list(&Default::default())
        .await
        .map_err(|e| e.to_string())?;
        let sizes: Vec<(Option<String>, Option<String>)> = claims
            .items
            .iter()
            .map(|c| {
                (
                    c.spec
                        .as_ref()
                        .and_then(|s| s.resources.as_ref()?.requests.as_ref()?.get("storage"))
                        .map(|q| q.0.clone()),
                    c.status
                        .as_ref()
                        .and_then(|s| s.capacity.as_ref()?.get("storage"))
                        .map(|q| q.0.clone()),
                )
            })
            .collect();
        let two = Some("2Gi".to_string());
        if sizes.len() == 3 && sizes.iter().all(|(r, c)| *r == two && *c == two) {
            Ok(())
        } else {
            Err(format!("{sizes:?}"))
        }
    })
    .await;
    println!(
        "e2e_failpoint_matrix: {:.0} s",
        test_started.elapsed().as_secs_f64()
    );
}
