//! Two operator replicas from `deploy/` with leader election: exactly one acts (the other
//! reports `etcd_operator_leader 0` and writes nothing); when the leader hangs, the other takes
//! the Lease over once it expires and carries on reconciling; the old leader, resumed, finds
//! the Lease taken and steps down; a leader evicted (the Eviction API, as `kubectl drain` does)
//! in the middle of a scale-in, once a member is leaving, releases the Lease so the standby
//! takes over at once and finishes the step. The checked client workload runs through all of
//! it (`support::history`): no acknowledged write lost, the history linearizable.

use etcd_operator_e2e_support as support;

use std::time::{Duration, Instant};

use etcd_operator_api::MemberPhase;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::EvictParams;
use support::cluster::{Cluster, start_cluster};
use support::workload::Workload;
use support::{cluster_yaml, create_namespace, eventually, members};

const LIMIT: Duration = Duration::from_secs(180);

/// The operator Pod that holds the Lease (identities are `<pod>_<pid>`).
async fn leader_pod(cluster: &Cluster) -> Option<String> {
    let holder = cluster.lease_holder().await?;
    Some(
        holder
            .rsplit_once('_')
            .map(|(pod, _)| pod.to_string())
            .unwrap_or(holder),
    )
}

/// `GET /metrics` of an operator Pod, through the cluster network.
async fn metrics_of(cluster: &Cluster, pod: &Pod) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let ip = pod.status.as_ref()?.pod_ip.clone()?;
    let exchange = async {
        let mut stream = cluster.network.connect_host(&ip, 8080).await.ok()?;
        stream
            .write_all(b"GET /metrics HTTP/1.0\r\nHost: operator\r\n\r\n")
            .await
            .ok()?;
        let mut response = String::new();
        stream.read_to_string(&mut response).await.ok()?;
        Some(response)
    };
    tokio::time::timeout(Duration::from_secs(5), exchange)
        .await
        .ok()
        .flatten()
}

fn restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .map(|c| c.restart_count)
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn e2e_two_operator_replicas_one_acts_and_the_other_takes_over() {
    let cluster = start_cluster(3).await;
    cluster.deploy_operator(2).await;
    let client = cluster.client();
    create_namespace(&client, "ha").await;
    cluster.apply(&cluster_yaml("etcd", "ha", 3, ""));
    cluster.wait_converged("ha", "etcd", 3, LIMIT).await;
    cluster.put("ha", "etcd", "before-failover", "v");
    let workload = Workload::start(cluster.network.clone(), "ha", "etcd", "ha");

    // Exactly one leader; the standby writes nothing.
    let leader = leader_pod(&cluster).await.expect("a Lease holder");
    let pods = cluster.operator_pods().await;
    assert_eq!(pods.len(), 2);
    for pod in &pods {
        let name = pod.metadata.name.clone().unwrap();
        let metrics = metrics_of(&cluster, pod).await.expect("/metrics answers");
        if name == leader {
            assert!(metrics.contains("etcd_operator_leader 1"), "{metrics}");
            assert!(
                metrics.contains("etcd_operator_kubernetes_writes_total"),
                "{metrics}"
            );
        } else {
            assert!(metrics.contains("etcd_operator_leader 0"), "{metrics}");
            assert!(
                !metrics.contains("etcd_operator_kubernetes_writes_total"),
                "{metrics}"
            );
        }
    }

    // The leader hangs: the standby takes over once the Lease expires (15 s) and reconciles.
    cluster
        .kubelet
        .freeze_container("etcd-operator-system", &leader, None)
        .expect("freezing the leader");
    let frozen = Instant::now();
    let successor = eventually(
        "the standby to take the Lease over",
        Duration::from_secs(60),
        || async {
            match leader_pod(&cluster).await {
                Some(pod) if pod != leader => Ok(pod),
                other => Err(format!("holder {other:?}")),
            }
        },
    )
    .await;
    let takeover = frozen.elapsed();
    assert!(
        takeover >= Duration::from_secs(10),
        "took over after {takeover:?}"
    );
    cluster.scale("ha", "etcd", 5);
    cluster.wait_converged("ha", "etcd", 5, LIMIT).await;
    assert_eq!(
        cluster
            .get("ha", "etcd", "before-failover")
            .unwrap()
            .as_deref(),
        Some("v")
    );

    // The old leader resumes, finds the Lease taken, and steps down (exits; restarted).
    let before = cluster
        .operator_pods()
        .await
        .into_iter()
        .find(|p| p.metadata.name.as_deref() == Some(leader.as_str()))
        .map(|p| restarts(&p))
        .unwrap_or(0);
    cluster
        .kubelet
        .thaw_container("etcd-operator-system", &leader, None)
        .expect("thawing the old leader");
    eventually("the old leader to step down and restart", LIMIT, || async {
        let pod = cluster
            .operator_pods()
            .await
            .into_iter()
            .find(|p| p.metadata.name.as_deref() == Some(leader.as_str()))
            .ok_or("the old leader's Pod is gone")?;
        if restarts(&pod) > before {
            Ok(())
        } else {
            Err(format!("restarts {}", restarts(&pod)))
        }
    })
    .await;
    cluster.wait_operator_ready(2).await;
    assert_eq!(
        leader_pod(&cluster).await.as_deref(),
        Some(successor.as_str())
    );

    // Evicted mid-step: the scale-in starts, and once a member is leaving (its removal from
    // etcd, then its Pod and PVC) the leader is evicted. A graceful stop (SIGTERM) releases the
    // Lease: the standby takes over well before it would have expired, and finishes the step.
    cluster.scale("ha", "etcd", 3);
    let leaving = eventually("a member to be leaving", LIMIT, || async {
        members(&client, "ha", "etcd")
            .await
            .into_iter()
            .find(|m| m.status.as_ref().and_then(|s| s.phase) == Some(MemberPhase::Terminating))
            .and_then(|m| m.metadata.name)
            .ok_or_else(|| "no member Terminating yet".to_string())
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "etcd-operator-system");
    pods.evict(&successor, &EvictParams::default())
        .await
        .expect("evicting the leader");
    let evicted = Instant::now();
    println!("evicted the leader {successor} while {leaving} was leaving");
    eventually(
        "the standby to take over the released Lease",
        Duration::from_secs(30),
        || async {
            match leader_pod(&cluster).await {
                Some(pod) if pod != successor => Ok(()),
                other => Err(format!("holder {other:?}")),
            }
        },
    )
    .await;
    assert!(
        evicted.elapsed() < Duration::from_secs(10),
        "took over {:?} after the eviction",
        evicted.elapsed()
    );
    cluster.wait_converged("ha", "etcd", 3, LIMIT).await;
    let report = workload.stop().await;
    report.assert_no_loss();
    println!(
        "ha: two failovers and an eviction mid-scale-in: longest unavailability {} ms",
        report.longest_unavailable.as_millis()
    );
}
