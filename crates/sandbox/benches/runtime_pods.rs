//! etcd Pod start latency (create to `/health` answering) and how many concurrent etcd Pods one
//! cluster network holds on this machine. Prints figures; asserts nothing about timing. Root.
//!
//! `cargo bench -p kube-sandbox --bench runtime_pods`
//! (`SANDBOX_BENCH_LATENCY_RUNS`, default 10; `SANDBOX_BENCH_MAX_PODS`, default 100;
//! `SANDBOX_BENCH_BATCH`, default 10).

#[path = "../tests/runtime_support/mod.rs"]
mod runtime_support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use kube_sandbox::runtime::{ContainerState, Volume, VolumeSource};
use runtime_support::{Sandbox, TestPod, etcd};

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

fn claim(name: &str) -> Volume {
    Volume {
        name: "data".into(),
        source: VolumeSource::PersistentVolumeClaim {
            claim_name: name.into(),
            read_only: false,
        },
    }
}

/// Phases of one Pod start.
struct Start {
    network: Duration,
    sandbox: Duration,
    exec: Duration,
    healthy: Duration,
}

async fn start_member(sandbox: &Sandbox, name: &str) -> (TestPod, Start) {
    let begin = Instant::now();
    let network = sandbox.network.attach_pod().await.expect("Pod network");
    let network_done = begin.elapsed();
    let pod = runtime_support::TestPod {
        sandbox: sandbox
            .runtime
            .create_pod(kube_sandbox::runtime::PodSandboxConfig {
                uid: uuid::Uuid::new_v4().to_string(),
                namespace: "default".into(),
                name: name.into(),
                hostname: name.into(),
                network: network.namespace(),
                hosts_file: kube_sandbox::runtime::hosts_file(network.ip(), name, None, &[]),
                resolv_conf: String::new(),
                fs_group: None,
                volumes: vec![claim(&format!("data-{name}"))],
            })
            .expect("Pod sandbox"),
        network,
    };
    let sandbox_done = begin.elapsed();
    pod.start(&etcd(name, pod.ip()));
    let exec_done = begin.elapsed();
    sandbox
        .wait_http(
            SocketAddr::from((pod.ip(), 2379)),
            "/health",
            |body| body.contains("\"health\":\"true\""),
            Duration::from_secs(120),
        )
        .await;
    let start = Start {
        network: network_done,
        sandbox: sandbox_done - network_done,
        exec: exec_done - sandbox_done,
        healthy: begin.elapsed(),
    };
    (pod, start)
}

fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * fraction).round() as usize]
}

fn rss_kib(pid: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("VmRSS:"))
                .and_then(|value| value.trim().trim_end_matches(" kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn available_memory_mib() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|line| line.strip_prefix("MemAvailable:"))
                .and_then(|value| {
                    value
                        .trim()
                        .trim_end_matches(" kB")
                        .trim()
                        .parse::<u64>()
                        .ok()
                })
        })
        .map_or(0, |kib| kib / 1024)
}

async fn latency(runs: usize) {
    let sandbox = Sandbox::new().await;
    let mut totals = Vec::new();
    println!("etcd 3.5.1 Pod start, {runs} runs, one at a time:");
    for run in 0..runs {
        let (pod, start) = start_member(&sandbox, &format!("latency-{run}")).await;
        println!(
            "  run {run:>2}: healthy after {:>7.1?} (network {:>6.1?}, sandbox {:>6.1?}, exec {:>6.1?})",
            start.healthy, start.network, start.sandbox, start.exec
        );
        totals.push(start.healthy);
        drop(pod);
    }
    totals.sort();
    println!(
        "  create to /health: min {:.1?}, median {:.1?}, p90 {:.1?}, max {:.1?}",
        totals[0],
        percentile(&totals, 0.5),
        percentile(&totals, 0.9),
        totals[totals.len() - 1]
    );
}

async fn capacity(max_pods: usize, batch: usize) {
    let sandbox = Sandbox::new().await;
    let mut pods: Vec<TestPod> = Vec::new();
    let began = Instant::now();
    println!(
        "\nconcurrent etcd Pods in one cluster network, {batch} started at a time (stops at {max_pods}, or below 1 GiB available):"
    );
    while pods.len() < max_pods && available_memory_mib() > 1024 {
        let wave = batch.min(max_pods - pods.len());
        let first = pods.len();
        let wave_started = Instant::now();
        let names: Vec<String> = (first..first + wave)
            .map(|index| format!("member-{index}"))
            .collect();
        let started =
            futures::future::join_all(names.iter().map(|name| start_member(&sandbox, name))).await;
        pods.extend(started.into_iter().map(|(pod, _)| pod));
        let rss: u64 = pods
            .iter()
            .flat_map(|pod| pod.sandbox.container_statuses())
            .filter_map(|status| match status.state {
                ContainerState::Running { pid, .. } => Some(rss_kib(pid)),
                ContainerState::Terminated(_) => None,
            })
            .sum();
        println!(
            "  {:>4} Pods healthy (wave of {wave} in {:.1?}); etcd RSS {} MiB total, {} MiB available",
            pods.len(),
            wave_started.elapsed(),
            rss / 1024,
            available_memory_mib()
        );
    }
    // Every member still answers with all of them running.
    let checked = Instant::now();
    let mut answering = 0;
    for pod in &pods {
        let address = SocketAddr::from((pod.ip(), 2379));
        if sandbox
            .http_get(address, "/health", Duration::from_secs(5))
            .await
            .is_some_and(|b| b.contains("true"))
        {
            answering += 1;
        }
    }
    println!(
        "  {answering}/{} answer /health together ({:.1?} to check); {:.1?} in all",
        pods.len(),
        checked.elapsed(),
        began.elapsed()
    );
    let stopping = Instant::now();
    drop(pods);
    println!("  dropped them all in {:.1?}", stopping.elapsed());
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if std::env::args().any(|arg| arg == "--list") {
        return;
    }
    latency(setting("SANDBOX_BENCH_LATENCY_RUNS", 10)).await;
    capacity(
        setting("SANDBOX_BENCH_MAX_PODS", 100),
        setting("SANDBOX_BENCH_BATCH", 10),
    )
    .await;
}
