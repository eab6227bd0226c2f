//! Through the API and the node agents: etcd Pod start latency (create to Ready, through the
//! scheduler, the kubelet, a claim and the httpGet readiness probe on `/health`), and how many
//! concurrent etcd Pods one sandbox holds on this machine. Prints figures; asserts nothing
//! about timing. Root.
//!
//! `cargo bench -p kube-sandbox --bench node_pods`
//! (`NODE_BENCH_LATENCY_RUNS`, default 10; `NODE_BENCH_MAX_PODS`, default 120;
//! `NODE_BENCH_BATCH`, default 20; `NODE_BENCH_NODES`, default 3: each node holds 110 Pods, as
//! its capacity says, so more Pods need more nodes).

#[path = "../tests/kubelet_support/mod.rs"]
mod kubelet_support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, ListParams};
use kubelet_support::{Cluster, ETCD_35, etcd_pod, is_ready, require_binary};
use serde_json::json;

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

fn quantiles(mut samples: Vec<Duration>) -> String {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    format!(
        "min {} ms, median {} ms, p90 {} ms, max {} ms ({} runs)",
        at(0.0).as_millis(),
        at(0.5).as_millis(),
        at(0.9).as_millis(),
        at(1.0).as_millis(),
        samples.len()
    )
}

async fn create_member(cluster: &Cluster, name: &str) {
    cluster
        .create::<PersistentVolumeClaim>("default", json!({
            "metadata": {"name": format!("data-{name}")},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        }))
        .await;
    cluster
        .create::<Pod>(
            "default",
            etcd_pod(
                name,
                json!({"persistentVolumeClaim": {"claimName": format!("data-{name}")}}),
            ),
        )
        .await;
}

async fn ready_count(cluster: &Cluster) -> usize {
    let pods = cluster
        .pods("default")
        .list(&ListParams::default().labels("app=etcd"))
        .await
        .unwrap();
    pods.items.iter().filter(|pod| is_ready(pod)).count()
}

/// Resident memory of this process (the whole sandbox) in MiB, and of every process, in MiB.
fn memory() -> (u64, u64) {
    let own = std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|line| {
            line.strip_prefix("VmRSS:")
                .map(|v| v.trim().trim_end_matches(" kB").parse::<u64>().unwrap_or(0))
        })
        .unwrap_or(0);
    let info = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let field = |name: &str| {
        info.lines()
            .find_map(|line| {
                line.strip_prefix(name)
                    .map(|v| v.trim().trim_end_matches(" kB").parse::<u64>().unwrap_or(0))
            })
            .unwrap_or(0)
    };
    (
        own / 1024,
        (field("MemTotal:") - field("MemAvailable:")) / 1024,
    )
}

fn main() {
    require_binary(ETCD_35);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let nodes = setting("NODE_BENCH_NODES", 3);
        let cluster = kubelet_support::start_with(kubelet_support::ClusterOptions {
            nodes,
            ..Default::default()
        })
        .await;
        let runs = setting("NODE_BENCH_LATENCY_RUNS", 10);
        let mut latencies = Vec::new();
        for run in 0..runs {
            let name = format!("latency-{run}");
            let begin = Instant::now();
            create_member(&cluster, &name).await;
            cluster.wait_ready("default", &name, Duration::from_secs(60)).await;
            latencies.push(begin.elapsed());
            cluster.pods("default").delete(&name, &DeleteParams::default().grace_period(0)).await.unwrap();
            cluster.wait_gone("default", &name, Duration::from_secs(60)).await;
            let claims: Api<PersistentVolumeClaim> = Api::namespaced(cluster.client(), "default");
            claims.delete(&format!("data-{name}"), &DeleteParams::default()).await.unwrap();
        }
        println!("etcd Pod create to Ready (scheduler, kubelet, claim, httpGet /health): {}", quantiles(latencies));

        let max = setting("NODE_BENCH_MAX_PODS", 120);
        let batch = setting("NODE_BENCH_BATCH", 20);
        let mut created = 0;
        let mut held = 0;
        while created < max {
            let begin = Instant::now();
            for _ in 0..batch.min(max - created) {
                create_member(&cluster, &format!("etcd-{created}")).await;
                created += 1;
            }
            let deadline = Instant::now() + Duration::from_secs(120);
            let mut ready = ready_count(&cluster).await;
            while ready < created && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(250)).await;
                ready = ready_count(&cluster).await;
            }
            let (own, used) = memory();
            println!(
                "{created} etcd Pods created, {ready} Ready after {} ms; sandbox RSS {own} MiB, machine memory in use {used} MiB",
                begin.elapsed().as_millis()
            );
            if ready < created {
                println!("stopping: not every Pod became Ready within 120 s ({nodes} nodes of 110 Pods each)");
                break;
            }
            held = ready;
        }
        println!("concurrent etcd Pods held by one sandbox (all Ready): {held} (limit of this run: {max})");
    });
}
