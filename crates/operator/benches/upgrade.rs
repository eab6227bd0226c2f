//! The upgrade benchmark (prints figures; not a timed test). Needs root, like the e2e tests.
//!
//!   cargo bench -p etcd-operator --bench upgrade
//!   UPGRADE_BENCH_FROM=3.4.23 UPGRADE_BENCH_TO=3.5.1 cargo bench -p etcd-operator --bench upgrade
//!
//! The versions: `UPGRADE_BENCH_FROM` (default 3.5.36, the newest 3.5) to `UPGRADE_BENCH_TO`
//! (default the newest 3.6 the tests run), each a version `scripts/install-deps.sh` installs.
//! In one run: the floor (`benches/upgrade_floor.sh`: the same etcd binaries on loopback, 3
//! members upgraded by a script, one at a time, followers first and the leader last after
//! moving its leadership, each stopped and started on the new binary with its data, the next
//! once it is healthy), then the operator deployed from `deploy/` (its production settings)
//! into a sandbox with nodes, upgrading a 3-member PVC-backed cluster (a fresh cluster per
//! round): the time from `kubectl patch` of `spec.version` until every member runs the new
//! version (etcd's answer, the Pod's image) with its Pod Ready and the EtcdCluster
//! reporting 3 ready members. For each, the longest window without an acknowledged write of a
//! client writing the whole time (the floor's: `etcdctl put` in a loop; the operator's: the
//! e2e workload through the `<cluster>-client` Service). Both sides have watches open on the
//! members (the floor's: an `etcdctl watch` on each member; the operator's: the workload's),
//! as a Kubernetes API server's etcd always has: etcd 3.5.36 and 3.6.17, stopped with SIGTERM,
//! wait up to their request timeout (7 s) for open streams before they exit.
//!
//! A round slower than 1.3 × the floor's median prints its timeline (`crates/e2e-support/src/timeline.rs`:
//! the cluster's Events, one per planner step and the kubelet's, and the member Pods' creation,
//! start and readiness), to show where the time went.
//!
//! Figures: docs/benchmarks.md.

#[path = "common/mod.rs"]
mod bench_support;
use etcd_operator_e2e_support as support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;

use bench_support::median;
use support::cluster::{Cluster, pod_ready, start_cluster};
use support::timeline::OperatorWatch;
use support::workload::Workload;
use support::{create_namespace, get_cluster, kubectl};

const ROUNDS: usize = 3;
const LIMIT: Duration = Duration::from_secs(300);
/// Quiet time before each round: the cluster settled after its bootstrap.
const SETTLE: Duration = Duration::from_secs(4);

/// The versions upgraded from and to (see the header).
struct Versions {
    from: String,
    to: String,
}

impl Versions {
    fn from_env() -> Versions {
        let var = |name: &str, default: &str| std::env::var(name).unwrap_or(default.to_string());
        Versions {
            from: var("UPGRADE_BENCH_FROM", "3.5.36"),
            to: var("UPGRADE_BENCH_TO", support::DEFAULT_VERSION),
        }
    }
}

fn yaml(namespace: &str, version: &str) -> String {
    support::cluster_yaml_on("etcd", namespace, 3, version, "")
}

/// Every member on `version` (etcd's answer and the Pod's image), every Pod Ready, the
/// cluster reporting 3 ready members.
async fn all_on(cluster: &Cluster, namespace: &str, version: &str) -> bool {
    let c = get_cluster(&cluster.client(), namespace, "etcd").await;
    let status = c.status.unwrap_or_default();
    let running = status.members.clone().unwrap_or_default();
    if status.ready_members != Some(3)
        || running.len() != 3
        || running
            .iter()
            .any(|m| m.version.as_deref() != Some(version))
    {
        return false;
    }
    let Ok(list) = Api::<Pod>::namespaced(cluster.client(), namespace)
        .list(&ListParams::default().labels(&etcd_operator_api::labels::cluster_selector("etcd")))
        .await
    else {
        return false;
    };
    let image = format!(":v{version}");
    let live: Vec<&Pod> = list
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    live.len() == 3
        && live.iter().all(|p| {
            pod_ready(p)
                && p.spec
                    .as_ref()
                    .and_then(|s| s.containers.first())
                    .and_then(|c| c.image.as_deref())
                    .is_some_and(|i| i.ends_with(&image))
        })
}

/// One round: a new cluster on `versions.from`, upgraded to `versions.to` under the workload.
/// Returns (seconds, longest unavailability in seconds).
async fn round(
    cluster: &Cluster,
    watch: &OperatorWatch,
    versions: &Versions,
    round: usize,
    slow: f64,
) -> (f64, f64) {
    let namespace = format!("upgrade-{round}");
    create_namespace(&cluster.client(), &namespace).await;
    cluster.apply(&yaml(&namespace, &versions.from));
    cluster.wait_converged(&namespace, "etcd", 3, LIMIT).await;
    tokio::time::sleep(SETTLE).await;
    let workload = Workload::start(cluster.network.clone(), &namespace, "etcd", &namespace);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let started = Instant::now();
    let wall = k8s_openapi::jiff::Timestamp::now();
    let (ok, _, stderr) = kubectl(
        cluster,
        &[
            "-n",
            &namespace,
            "patch",
            "etcdcluster/etcd",
            "--type=merge",
            "-p",
            &format!(r#"{{"spec":{{"version":"{}"}}}}"#, versions.to),
        ],
    );
    assert!(ok, "kubectl patch: {stderr}");
    while !all_on(cluster, &namespace, &versions.to).await {
        assert!(
            started.elapsed() < LIMIT,
            "{namespace}: the upgrade did not finish\n{}",
            cluster.operator_logs().await
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let took = started.elapsed().as_secs_f64();
    if took > slow {
        let until = k8s_openapi::jiff::Timestamp::now();
        println!(
            "{}",
            watch
                .timeline(&cluster.client(), &namespace, "etcd", wall, until)
                .await
        );
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let report = workload.stop().await;
    report.assert_no_loss();
    println!(
        "  {namespace}: {} -> {} in {took:.2} s; longest unavailability {} ms",
        versions.from,
        versions.to,
        report.longest_unavailable.as_millis()
    );
    // Out of the way of the next round (2 shared cores).
    let _ = kubectl(
        cluster,
        &[
            "-n",
            &namespace,
            "delete",
            "etcdcluster/etcd",
            "--wait=false",
        ],
    );
    (took, report.longest_unavailable.as_secs_f64())
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let versions = Versions::from_env();
        let (old, new) = (
            support::etcd_binaries(&versions.from),
            support::etcd_binaries(&versions.to),
        );
        let floor = support::floor_script_with(
            "upgrade_floor.sh",
            &[&ROUNDS.to_string()],
            &[
                ("OLD", &format!("{old}/etcd")),
                ("NEW", &format!("{new}/etcd")),
                ("ETCDCTL", &format!("{new}/etcdctl")),
                ("NEW_VERSION", &versions.to),
            ],
        );
        let of = |kind: &str| -> Vec<f64> {
            floor
                .iter()
                .filter(|(k, _)| k == kind)
                .map(|(_, s)| *s)
                .collect()
        };
        for (i, (took, window)) in of("upgrade").iter().zip(of("unavailable")).enumerate() {
            println!(
                "  floor round {i}: {} -> {} in {took:.2} s; longest unavailability {:.0} ms",
                versions.from,
                versions.to,
                window * 1000.0
            );
        }
        let (floor_took, floor_window) = (median(&of("upgrade")), median(&of("unavailable")));

        let cluster = start_cluster(3).await;
        cluster.deploy_operator(1).await;
        let watch = OperatorWatch::start(&cluster.client());
        let (mut times, mut windows) = (Vec::new(), Vec::new());
        for r in 0..ROUNDS {
            let (took, window) = round(&cluster, &watch, &versions, r, 1.3 * floor_took).await;
            times.push(took);
            windows.push(window);
        }
        let (took, window) = (median(&times), median(&windows));
        println!();
        println!(
            "| 3 members {} -> {} (median of {ROUNDS}) | total (s) | longest unavailability (s) |",
            versions.from, versions.to
        );
        println!("|---|---|---|");
        println!("| floor script | {floor_took:.2} | {floor_window:.2} |");
        println!("| operator | {took:.2} | {window:.2} |");
        println!("| operator / floor | {:.2}x | |", took / floor_took);
    });
}
