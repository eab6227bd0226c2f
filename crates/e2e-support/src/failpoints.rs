//! The crash-point end-to-end tests' shared part (`e2e_failpoints*.rs`): the operator with its
//! crash points armed, and one scenario run through its points under the checked workload.

use std::time::{Duration, Instant};

use super::cluster::Cluster;
use super::eventually_explained;
use super::healing::{OperatorDeployment, REPAIR_ARGS};
use super::workload::Workload;

pub const LIMIT: Duration = Duration::from_secs(240);

/// The operator for this test: crash points mounted, short repair settings, and no leader
/// election, so a restarted process acts at once rather than after the dead one's Lease
/// expires (the Lease handover has its own test, e2e_operator_replicas).
pub fn deployment() -> OperatorDeployment {
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
pub async fn crash_through<F, Fut>(
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
    eventually_explained(
        &format!("the crash points {points:?} to fire"),
        LIMIT,
        || async {
            let armed = cluster.armed_failpoints();
            if armed.is_empty() {
                Ok(())
            } else {
                Err(format!("still armed: {armed:?}"))
            }
        },
        || async { format!("operator logs:\n{}", cluster.operator_logs().await) },
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
