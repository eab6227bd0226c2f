//! Scaling with `kubectl scale` through the /scale subresource, by the operator deployed from
//! `deploy/`: data written before each step is there after it, and etcd's member list agrees
//! with the EtcdMembers at every step. A client workload writes through the client Service
//! the whole time: no acknowledged write may be lost.

use etcd_operator_e2e_support as support;

use std::time::Duration;

use support::cluster::{Cluster, start_cluster};
use support::workload::Workload;
use support::{cluster_yaml, create_namespace, get_cluster, members};

const LIMIT: Duration = Duration::from_secs(180);

/// Writes a key (unless no member runs), scales to `replicas`, waits for convergence, reads
/// back every key so far.
async fn step(cluster: &Cluster, namespace: &str, replicas: i32, written: &mut Vec<String>) {
    let running = members(&cluster.client(), namespace, "etcd")
        .await
        .iter()
        .any(|m| m.spec.dormant != Some(true));
    if running {
        let key = format!("before-{}-to-{replicas}", written.len());
        cluster.put(namespace, "etcd", &key, "v");
        written.push(key);
    }
    cluster.scale(namespace, "etcd", replicas);
    cluster
        .wait_converged(namespace, "etcd", replicas, LIMIT)
        .await;
    if replicas == 0 {
        return;
    }
    for key in written.iter() {
        assert_eq!(
            cluster.get(namespace, "etcd", key).unwrap().as_deref(),
            Some("v"),
            "{key} after scaling to {replicas}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn e2e_scale_three_five_three_one_three() {
    let cluster = start_cluster(3).await;
    cluster.deploy_operator(1).await;
    create_namespace(&cluster.client(), "scale").await;
    cluster.apply(&cluster_yaml("etcd", "scale", 3, ""));
    cluster.wait_converged("scale", "etcd", 3, LIMIT).await;
    let workload = Workload::start(cluster.network.clone(), "scale", "etcd", "scale");
    let mut written = Vec::new();
    for replicas in [5, 3, 1, 3] {
        step(&cluster, "scale", replicas, &mut written).await;
    }
    workload.stop().await.assert_no_loss();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn e2e_scale_to_zero_and_back_keeps_cluster_and_member_ids() {
    let cluster = start_cluster(3).await;
    cluster.deploy_operator(1).await;
    let client = cluster.client();
    create_namespace(&client, "zero").await;
    cluster.apply(&cluster_yaml("etcd", "zero", 3, ""));
    cluster.wait_converged("zero", "etcd", 3, LIMIT).await;
    let cluster_id = get_cluster(&client, "zero", "etcd")
        .await
        .status
        .unwrap()
        .cluster_id;
    let ids = cluster.etcd_members("zero", "etcd").unwrap();
    // Through the scale to zero too: writes fail while no member runs, and every write
    // acknowledged before is there after.
    let workload = Workload::start(cluster.network.clone(), "zero", "etcd", "zero");

    let mut written = Vec::new();
    step(&cluster, "zero", 0, &mut written).await;
    let parked = members(&client, "zero", "etcd").await;
    assert_eq!(parked.len(), 3, "the EtcdMembers are kept");
    assert!(parked.iter().all(|m| m.spec.dormant == Some(true)));
    step(&cluster, "zero", 3, &mut written).await;
    workload.stop().await.assert_no_loss();

    let after = get_cluster(&client, "zero", "etcd")
        .await
        .status
        .unwrap()
        .cluster_id;
    assert_eq!(after, cluster_id, "the same cluster ID");
    assert_eq!(
        cluster.etcd_members("zero", "etcd").unwrap(),
        ids,
        "the same members and IDs"
    );
}
