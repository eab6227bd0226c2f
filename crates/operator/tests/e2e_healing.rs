//! Self-healing of PVC-backed members, end to end on real etcd in the sandbox, with a client
//! workload writing through the `<cluster>-client` Service the whole time (no acknowledged
//! write may be lost): a member's process killed, its Pod deleted, its process hung and
//! continued, the leader hung past the grace period, one node crashed, and every node shut
//! down gracefully at once and started again (seed 003's incident). After each, the cluster
//! converges with the same member IDs and its data.

use etcd_operator_e2e_support as support;

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use support::cluster::Cluster;
use support::healing::{OperatorDeployment, start_healing_cluster};
use support::workload::{Workload, WorkloadReport};
use support::{cluster_yaml, condition, create_namespace, eventually, get_cluster, members};

const NS: &str = "heal";
const LIMIT: Duration = Duration::from_secs(180);

fn pod_uid(pod: &k8s_openapi::api::core::v1::Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

fn restarts(pod: &k8s_openapi::api::core::v1::Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .map(|c| c.restart_count)
        .unwrap_or(0)
}

/// Runs one scenario under the workload: `fault`, then convergence on 3 members with the
/// member IDs of before; returns the workload's report (already checked for lost writes).
async fn scenario<F, Fut>(cluster: &Cluster, label: &str, fault: F) -> WorkloadReport
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let ids = cluster.recorded_ids(NS, "etcd").await;
    let workload = Workload::start(cluster.network.clone(), NS, "etcd", label);
    // Some writes before the fault, so the data it must keep is not empty.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let started = Instant::now();
    fault().await;
    cluster.wait_converged(NS, "etcd", 3, LIMIT).await;
    let healed = started.elapsed();
    let report = workload.stop().await;
    report.assert_no_loss();
    println!(
        "{label}: converged {:.1} s after the fault",
        healed.as_secs_f64()
    );
    assert_eq!(
        cluster.recorded_ids(NS, "etcd").await,
        ids,
        "{label}: the same members with the same IDs"
    );
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn e2e_healing_member_and_node_faults() {
    let test_started = Instant::now();
    let cluster = start_healing_cluster(3).await;
    cluster
        .deploy_operator_with(&OperatorDeployment::repairing())
        .await;
    let client = cluster.client();
    create_namespace(&client, NS).await;
    cluster.apply(&cluster_yaml("etcd", NS, 3, ""));
    cluster.wait_converged(NS, "etcd", 3, LIMIT).await;

    // A killed etcd is restarted in place by the kubelet, on its data, as the same member.
    let before = cluster.member_pod(NS, "etcd-1").await.unwrap();
    scenario(&cluster, "kill", || async {
        cluster
            .kubelet
            .signal_container(NS, "etcd-1", None, Signal::SIGKILL)
            .unwrap();
        eventually("etcd-1 restarted and Ready", LIMIT, || async {
            let pod = cluster.member_pod(NS, "etcd-1").await.ok_or("no Pod")?;
            (restarts(&pod) > restarts(&before) && support::cluster::pod_ready(&pod))
                .then_some(())
                .ok_or_else(|| format!("{} restarts", restarts(&pod)))
        })
        .await;
    })
    .await;

    // A deleted Pod is created again by the operator on the member's PVC.
    let before = cluster.member_pod(NS, "etcd-2").await.unwrap();
    scenario(&cluster, "delete-pod", || async {
        cluster.delete_member_pod(NS, "etcd-2").await;
        eventually("a new etcd-2 Pod", LIMIT, || async {
            let pod = cluster.member_pod(NS, "etcd-2").await.ok_or("no Pod")?;
            (pod_uid(&pod) != pod_uid(&before))
                .then_some(())
                .ok_or_else(|| "the old Pod".to_string())
        })
        .await;
    })
    .await;

    // A hung etcd (SIGSTOP) turns not ready; continued before the grace period ends, it
    // resumes as it was: the operator does not recreate it.
    let before = cluster.member_pod(NS, "etcd-0").await.unwrap();
    scenario(&cluster, "hang-and-continue", || async {
        cluster
            .kubelet
            .freeze_container(NS, "etcd-0", None)
            .unwrap();
        eventually("etcd-0 not ready", LIMIT, || async {
            let pod = cluster.member_pod(NS, "etcd-0").await.ok_or("no Pod")?;
            (!support::cluster::pod_ready(&pod))
                .then_some(())
                .ok_or_else(|| "still ready".to_string())
        })
        .await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        cluster.kubelet.thaw_container(NS, "etcd-0", None).unwrap();
    })
    .await;
    let after = cluster.member_pod(NS, "etcd-0").await.unwrap();
    assert_eq!(
        pod_uid(&after),
        pod_uid(&before),
        "continued in time: not recreated"
    );

    // The leader hangs past the grace period: etcd elects another leader, the operator
    // recreates the hung member's Pod (level 1) on its data, as the same member.
    let leader = cluster.leader(NS, "etcd").unwrap();
    let before = cluster.member_pod(NS, &leader).await.unwrap();
    scenario(&cluster, "leader-hung", || async {
        cluster.kubelet.freeze_container(NS, &leader, None).unwrap();
        eventually(&format!("{leader} recreated"), LIMIT, || async {
            let pod = cluster.member_pod(NS, &leader).await;
            match pod {
                Some(p) if pod_uid(&p) != pod_uid(&before) => Ok(()),
                _ => Err("the hung Pod is still there".to_string()),
            }
        })
        .await;
    })
    .await;
    let member = members(&client, NS, "etcd")
        .await
        .into_iter()
        .find(|m| m.metadata.name.as_deref() == Some(leader.as_str()))
        .unwrap();
    assert_eq!(
        member.status.and_then(|s| s.recreate_count),
        Some(1),
        "one level-1 recreation, counted"
    );

    // A node crashes: the member on it is reported down, the real node lifecycle controller
    // taints the node and evicts the Pod, and the member comes back on its data as the same
    // member when the node returns. (Its Pod cannot be replaced elsewhere meanwhile: a
    // Pod on an unreachable node stays until the node confirms it stopped, and the operator
    // never force-deletes one, since the node may still be running it on the same data.)
    let node = cluster.node_of(NS, "etcd-1").await.unwrap();
    scenario(&cluster, "node-crash", || async {
        cluster.kubelet.crash_node(&node).await.unwrap();
        let client = cluster.client();
        eventually("the crashed member reported", LIMIT, || async {
            let c = get_cluster(&client, NS, "etcd").await;
            let ready = c.status.as_ref().and_then(|s| s.ready_members);
            (ready < Some(3) && condition(&c, "Degraded").as_deref() == Some("True"))
                .then_some(())
                .ok_or_else(|| format!("ready {ready:?}"))
        })
        .await;
        // The node lifecycle controller (kube-controller-manager's on a real control plane)
        // marks the silent node unreachable: Ready Unknown and the NoExecute taint.
        eventually("the crashed node tainted unreachable", LIMIT, || async {
            let node = kube::Api::<k8s_openapi::api::core::v1::Node>::all(client.clone())
                .get(&node)
                .await
                .map_err(|e| e.to_string())?;
            let unknown = node
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
                .is_some_and(|c| c.status == "Unknown");
            let tainted = node
                .spec
                .as_ref()
                .and_then(|s| s.taints.as_ref())
                .is_some_and(|taints| {
                    taints.iter().any(|t| {
                        t.key == "node.kubernetes.io/unreachable" && t.effect == "NoExecute"
                    })
                });
            (unknown && tainted)
                .then_some(())
                .ok_or_else(|| format!("Ready Unknown: {unknown}, tainted: {tainted}"))
        })
        .await;
        // Past the unreachable toleration (scaled) the controller's taint eviction marks the
        // member's Pod for deletion; it stays (Terminating) until its node confirms it stopped:
        // the operator never force-deletes it. Then the node comes back.
        let pods = kube::Api::<k8s_openapi::api::core::v1::Pod>::namespaced(client.clone(), NS);
        let evicted_at = eventually("the controller to evict etcd-1's Pod", LIMIT, || async {
            let pod = pods.get("etcd-1").await.map_err(|e| e.to_string())?;
            pod.metadata
                .deletion_timestamp
                .map(|t| t.0)
                .ok_or_else(|| "etcd-1's Pod not marked for deletion".to_string())
        })
        .await;
        println!(
            "node-crash: etcd-1's Pod evicted by the node lifecycle controller at {evicted_at}"
        );
        tokio::time::sleep(Duration::from_secs(5)).await;
        let pod = pods
            .get("etcd-1")
            .await
            .expect("the evicted Pod stays until its node is back");
        assert!(
            pod.metadata.deletion_timestamp.is_some(),
            "etcd-1's Pod is still the evicted one"
        );
        cluster.kubelet.start_node(&node).await.unwrap();
    })
    .await;

    // Every node shut down gracefully at once (seed 003): every Pod ends Succeeded or Failed,
    // never restarted by the kubelet. Started again, the operator recreates them all on their
    // data without waiting for a quorum that cannot exist.
    let report = scenario(&cluster, "all-nodes-shutdown", || async {
        let nodes = cluster.kubelet.node_names();
        futures::future::join_all(nodes.iter().map(|n| cluster.kubelet.shutdown_node(n)))
            .await
            .into_iter()
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        tokio::time::sleep(Duration::from_secs(5)).await;
        for n in &nodes {
            cluster.kubelet.start_node(n).await.unwrap();
        }
    })
    .await;
    assert!(report.failed > 0, "the outage was seen by the workload");
    println!(
        "e2e_healing_member_and_node_faults: {:.0} s",
        test_started.elapsed().as_secs_f64()
    );
}
