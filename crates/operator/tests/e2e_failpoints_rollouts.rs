//! Crash safety, end to end, part two (part one and what the crash points are:
//! `e2e_failpoints.rs`): the replacement of a memory-backed member that lost its Pod, a
//! downgrade 3.7.4 → 3.6.17 through etcd's procedure (the downgrade enabled, the member's
//! version set, its Pod deleted and created again, the leader's leadership moved: the steps of
//! a rolling upgrade and etcd's own), and storage growth of a PVC-backed cluster (each member's
//! storage size set, its PVC expanded), each with the operator dying at every point it passes,
//! under the checked workload.

use etcd_operator_e2e_support as support;

use std::time::Instant;

use support::failpoints::{LIMIT, crash_through, deployment};
use support::healing::start_healing_cluster;
use support::{cluster_yaml, cluster_yaml_on, create_namespace, eventually};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn e2e_failpoint_matrix_rollouts() {
    let test_started = Instant::now();
    let cluster = start_healing_cluster(3).await;
    cluster.deploy_operator_with(&deployment()).await;
    let client = cluster.client();
    // The default StorageClass allows expansion (the storage growth scenario at the end).
    cluster.apply(
        "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: standard\n  annotations:\n    storageclass.kubernetes.io/is-default-class: \"true\"\nprovisioner: kube-sandbox/local\nallowVolumeExpansion: true\n",
    );
    // The three clusters start together and are all converged before the first point is
    // armed: a cluster still starting would pass the points meant for another. Each then
    // goes through its change alone, the others at rest beside it.
    let memory = "  storage:\n    medium: Memory\n    size: 256Mi\n";
    for (namespace, manifest) in [
        ("fpm", cluster_yaml("etcd", "fpm", 3, memory)),
        (
            "fpd",
            cluster_yaml_on("etcd", "fpd", 3, support::NEWEST_37, ""),
        ),
        ("fp", cluster_yaml("etcd", "fp", 3, "")),
    ] {
        create_namespace(&client, namespace).await;
        cluster.apply(&manifest);
    }
    for namespace in ["fpm", "fpd", "fp"] {
        cluster.wait_converged(namespace, "etcd", 3, LIMIT).await;
    }
    // Replacement of a memory-backed member whose Pod is lost: Replacing, MemberRemove,
    // Provisioning, MemberAdd, the new Pod, MemberPromote.
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
    // A downgrade 3.7.4 → 3.6.17 through etcd's procedure: the downgrade enabled, then each
    // member's spec.version, its Pod deleted and created again on its data, the leader's
    // leadership moved before its turn (the steps of an upgrade too, plus etcd's procedure).
    let ids = cluster.recorded_ids("fpd", "etcd").await;
    let target = support::DEFAULT_VERSION;
    crash_through(
        &cluster,
        "fpd",
        3,
        &[
            "after_downgrade_enable",
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
                    "fpd",
                    "patch",
                    "etcdcluster/etcd",
                    "--type=merge",
                    "-p",
                    &format!(r#"{{"spec":{{"version":"{target}"}}}}"#),
                ],
            );
            assert!(ok, "kubectl patch spec.version: {stderr}");
        },
    )
    .await;
    assert_eq!(
        cluster.recorded_ids("fpd", "etcd").await,
        ids,
        "same members"
    );
    support::rollouts::wait_all_on(&cluster, "fpd", 3, target, LIMIT).await;

    // Storage growth 1Gi → 2Gi of a PVC-backed cluster: a member's spec.storage.size set,
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
        "e2e_failpoint_matrix_rollouts: {:.0} s",
        test_started.elapsed().as_secs_f64()
    );
}
