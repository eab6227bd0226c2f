//! `kubectl drain` on the real control plane, under the checked client workload: a 3-member
//! memory-backed cluster on five nodes, and the nodes of two of its members drained at once.
//! The drains evict through the Eviction API, which honours the operator's PodDisruptionBudget
//! (minAvailable 2 of 3): one member is evicted and replaced on another node, the other drain
//! waits ("would violate the pod's disruption budget") until the replacement is Ready, then
//! proceeds. Never fewer than two Ready members, both drains succeed, the cluster converges on
//! three members off the drained nodes, and the history checker proves what the clients saw.

use etcd_operator_e2e_support as support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use support::healing::{OperatorDeployment, start_healing_cluster};
use support::workload::Workload;
use support::{cluster_yaml, create_namespace, eventually};

const NS: &str = "drain";
const LIMIT: Duration = Duration::from_secs(300);

/// The Ready member Pods of the cluster (not being deleted), with their nodes.
async fn ready_members(client: &kube::Client) -> Vec<(String, String)> {
    let pods: kube::Api<Pod> = kube::Api::namespaced(client.clone(), NS);
    let Ok(list) = pods.list(&Default::default()).await else {
        return Vec::new();
    };
    list.items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            p.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("etcd-"))
        })
        .filter(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .map(|p| {
            (
                p.metadata.name.unwrap_or_default(),
                p.spec.and_then(|s| s.node_name).unwrap_or_default(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn e2e_two_drains_at_once_honour_the_disruption_budget() {
    let started = Instant::now();
    let cluster = Arc::new(start_healing_cluster(5).await);
    cluster
        .deploy_operator_with(&OperatorDeployment::repairing())
        .await;
    let client = cluster.client();
    create_namespace(&client, NS).await;
    let memory = "  storage:\n    medium: Memory\n    size: 256Mi\n";
    cluster.apply(&cluster_yaml("etcd", NS, 3, memory));
    cluster.wait_converged(NS, "etcd", 3, LIMIT).await;
    let first = cluster.node_of(NS, "etcd-1").await.expect("etcd-1's node");
    let second = cluster.node_of(NS, "etcd-2").await.expect("etcd-2's node");
    assert_ne!(first, second, "the members are spread over the nodes");

    let workload = Workload::start(cluster.network.clone(), NS, "etcd", "two-drains");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let drain = |node: String| {
        let cluster = cluster.clone();
        tokio::task::spawn_blocking(move || {
            let began = Instant::now();
            let (ok, out, err) = support::kubectl(
                &cluster,
                &[
                    "drain",
                    &node,
                    "--ignore-daemonsets",
                    "--delete-emptydir-data",
                    "--timeout=240s",
                ],
            );
            (ok, format!("{out}{err}"), began.elapsed())
        })
    };
    let one = drain(first.clone());
    let two = drain(second.clone());
    // Watched while the drains run: the budget keeps a majority Ready throughout.
    let mut fewest = usize::MAX;
    while !(one.is_finished() && two.is_finished()) {
        fewest = fewest.min(ready_members(&client).await.len());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (ok_one, said_one, took_one) = one.await.unwrap();
    let (ok_two, said_two, took_two) = two.await.unwrap();
    println!("drain {first}: {:.1} s\n{said_one}", took_one.as_secs_f64());
    println!(
        "drain {second}: {:.1} s\n{said_two}",
        took_two.as_secs_f64()
    );
    assert!(ok_one, "drain {first}: {said_one}");
    assert!(ok_two, "drain {second}: {said_two}");
    assert!(
        fewest >= 2,
        "the PodDisruptionBudget keeps two of three members Ready; seen {fewest}"
    );
    let refused = |s: &str| s.contains("disruption budget");
    assert!(
        refused(&said_one) || refused(&said_two),
        "one drain waited for the other's member to be replaced:\n{said_one}\n{said_two}"
    );

    cluster.wait_converged(NS, "etcd", 3, LIMIT).await;
    eventually(
        "three Ready members off the drained nodes",
        LIMIT,
        || async {
            let ready = ready_members(&client).await;
            (ready.len() == 3 && ready.iter().all(|(_, n)| *n != first && *n != second))
                .then_some(())
                .ok_or(format!("{ready:?}"))
        },
    )
    .await;
    workload.stop().await.assert_no_loss();
    for node in [&first, &second] {
        support::kubectl_retrying_blocking(&cluster, &["uncordon", node]);
    }
    println!(
        "e2e_two_drains_at_once: {:.0} s",
        started.elapsed().as_secs_f64()
    );
}
