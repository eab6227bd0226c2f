//! The recovery benchmark (prints figures; not a timed test). Needs root, like the e2e tests.
//!
//!   cargo bench -p etcd-operator --bench recovery
//!
//! In one run: the floor (`benches/recovery_floor.sh`: the same etcd binaries on loopback, a
//! member killed and started again on its own data directory until healthy, and a member
//! replaced by a script as fast as etcd allows), then the operator deployed from `deploy/`
//! (its production settings) into a sandbox with nodes, with 3-member clusters: the time from
//! killing one member until all 3 are ready again (the member's Pod Ready and the EtcdCluster
//! reporting 3 ready members), for a PVC-backed member whose etcd process is killed, a
//! PVC-backed member whose Pod is deleted, and a memory-backed member whose Pod is deleted
//! (its data is gone: it is replaced). For each, the longest window in which the client
//! workload, writing through the `<cluster>-client` Service, got no answer.
//!
//! Figures: docs/benchmarks.md (etcd 3.5.1 until 2026-11-29; since 2026-12-06 the floor and the
//! clusters run the tests' default version, 3.6.17).
//!
//! A killed process comes back in 1.04 s when it was a follower and 2.04 s when it led (etcd
//! elects a new leader first, which is also the workload's 1.2 s window); the kubelet's probes
//! run once a second, so Ready lands on the next whole second after etcd is back.
//!
//! A round slower than 3 s prints its timeline (the cluster's Events, the member Pods'
//! creation, starts and readiness, the operator's warnings), to show where the time went.

#[path = "common/mod.rs"]
mod bench_support;
use etcd_operator_e2e_support as support;

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use bench_support::median;
use support::cluster::{Cluster, pod_ready, start_cluster};
use support::timeline::OperatorWatch;
use support::workload::Workload;
use support::{cluster_yaml, create_namespace, get_cluster};

const ROUNDS: usize = 3;
const LIMIT: Duration = Duration::from_secs(300);
/// A round slower than this prints its timeline (`crates/e2e-support/src/timeline.rs`).
const SLOW: f64 = 3.0;
/// Quiet time before each round (see `measure`).
const SETTLE: Duration = Duration::from_secs(4);

/// How a member is killed.
#[derive(Clone, Copy, Debug)]
enum Kill {
    /// SIGKILL to its etcd process: the kubelet restarts it in the same Pod.
    Process,
    /// Its Pod deleted at once (grace period 0): the operator makes the next one.
    Pod,
}

/// Polls every 20 ms until `member`'s Pod is Ready (a different Pod than `uid` when the Pod
/// was deleted) and the cluster reports 3 ready members, Available.
async fn until_all_ready(cluster: &Cluster, namespace: &str, member: &str, old_uid: Option<&str>) {
    let client = cluster.client();
    let started = Instant::now();
    loop {
        let pod = cluster.member_pod(namespace, member).await;
        let pod_back = pod.as_ref().is_some_and(|p| {
            pod_ready(p)
                && p.metadata.deletion_timestamp.is_none()
                && p.metadata.uid.as_deref() != old_uid
        });
        if pod_back {
            let c = get_cluster(&client, namespace, "etcd").await;
            if c.status.as_ref().and_then(|s| s.ready_members) == Some(3)
                && support::condition(&c, "Available").as_deref() == Some("True")
            {
                return;
            }
        }
        assert!(
            started.elapsed() < LIMIT,
            "{namespace}/{member} never came back"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Kills a member of `namespace` as `kill` says, `ROUNDS` times, `etcd-<round>` each time (a
/// member killed twice within 10 minutes waits out the kubelet's restart backoff, 10 s then
/// 20 s, which is the kubelet's and would hide the operator's share); returns the median time
/// to all ready and the median longest unavailability the workload saw.
async fn measure(
    cluster: &Cluster,
    watch: &OperatorWatch,
    namespace: &str,
    kill: Kill,
) -> (f64, f64) {
    let (mut times, mut windows) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        cluster.wait_converged(namespace, "etcd", 3, LIMIT).await;
        // A settled cluster: etcd refuses MemberAdd for 5 s after a voter (re)connects, so a
        // replacement right after the previous round's would wait for etcd, not the operator.
        tokio::time::sleep(SETTLE).await;
        let label = format!("{namespace}-{kill:?}-{round}");
        let member = format!("etcd-{}", round % 3);
        let member = member.as_str();
        let workload = Workload::start(cluster.network.clone(), namespace, "etcd", &label);
        tokio::time::sleep(Duration::from_secs(2)).await;
        let pod = cluster
            .member_pod(namespace, member)
            .await
            .expect("the member's Pod");
        let started = Instant::now();
        let wall = k8s_openapi::jiff::Timestamp::now();
        let old_uid = match kill {
            Kill::Process => {
                cluster
                    .kubelet
                    .signal_container(namespace, member, None, Signal::SIGKILL)
                    .expect("killing the member");
                // The same Pod comes back: wait for it to turn not ready first.
                tokio::time::sleep(Duration::from_millis(10)).await;
                None
            }
            Kill::Pod => {
                let api = kube::Api::<k8s_openapi::api::core::v1::Pod>::namespaced(
                    cluster.client(),
                    namespace,
                );
                api.delete(member, &kube::api::DeleteParams::default().grace_period(0))
                    .await
                    .expect("deleting the member's Pod");
                pod.metadata.uid.clone()
            }
        };
        if matches!(kill, Kill::Process) {
            // Ready again only counts once the kubelet has seen the process die.
            let deadline = Instant::now() + Duration::from_secs(30);
            while Instant::now() < deadline {
                let p = cluster.member_pod(namespace, member).await;
                let restarted = p
                    .as_ref()
                    .and_then(|p| {
                        p.status
                            .as_ref()?
                            .container_statuses
                            .as_ref()?
                            .first()
                            .map(|c| c.restart_count)
                    })
                    .unwrap_or(0)
                    > pod
                        .status
                        .as_ref()
                        .and_then(|s| {
                            s.container_statuses
                                .as_ref()?
                                .first()
                                .map(|c| c.restart_count)
                        })
                        .unwrap_or(0);
                if restarted {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        until_all_ready(cluster, namespace, member, old_uid.as_deref()).await;
        let took = started.elapsed().as_secs_f64();
        if took > SLOW {
            let until = k8s_openapi::jiff::Timestamp::now();
            println!(
                "{}",
                watch
                    .timeline(&cluster.client(), namespace, "etcd", wall, until)
                    .await
            );
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        let report = workload.stop().await;
        report.assert_no_loss();
        println!(
            "  {namespace} {kill:?} round {round} ({member}): all ready after {took:.2} s; longest unavailability {} ms",
            report.longest_unavailable.as_millis()
        );
        times.push(took);
        windows.push(report.longest_unavailable.as_secs_f64());
    }
    (median(&times), median(&windows))
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        // The floor runs the etcd the operator's clusters run (`cluster_yaml`'s version).
        let floor = support::floor_script_on(
            support::DEFAULT_VERSION,
            "recovery_floor.sh",
            &[&ROUNDS.to_string()],
        );
        let restart = median(&floor.iter().filter(|(k, _)| k == "restart").map(|(_, s)| *s).collect::<Vec<f64>>());
        let replace = median(&floor.iter().filter(|(k, _)| k == "replace").map(|(_, s)| *s).collect::<Vec<f64>>());
        println!("floor (median of {ROUNDS}): etcd restarted on its data until healthy {restart:.2} s; replaced by a script {replace:.2} s");

        let cluster = start_cluster(3).await;
        let watch = OperatorWatch::start(&cluster.client());
        cluster.deploy_operator(1).await;
        let client = cluster.client();
        create_namespace(&client, "pvc").await;
        cluster.apply(&cluster_yaml("etcd", "pvc", 3, ""));
        create_namespace(&client, "mem").await;
        let memory = "  storage:\n    medium: Memory\n    size: 256Mi\n";
        cluster.apply(&cluster_yaml("etcd", "mem", 3, memory));

        let mut rows = Vec::new();
        for (namespace, kill, floor) in [
            ("pvc", Kill::Process, restart),
            ("pvc", Kill::Pod, restart),
            ("mem", Kill::Pod, replace),
        ] {
            let (took, window) = measure(&cluster, &watch, namespace, kill).await;
            rows.push((namespace, kill, took, window, floor));
        }
        println!();
        println!("| member | killed | all 3 ready (s) | floor (s) | over the floor (s) | longest unavailability (s) |");
        println!("|---|---|---|---|---|---|");
        for (namespace, kill, took, window, floor) in rows {
            let storage = if namespace == "mem" { "memory" } else { "PVC" };
            println!(
                "| {storage} | {} | {took:.2} | {floor:.2} | {:+.2} | {window:.2} |",
                match kill {
                    Kill::Process => "etcd process (SIGKILL)",
                    Kill::Pod => "Pod deleted",
                },
                took - floor
            );
        }
    });
}
