//! Start-up of a control plane with three nodes, both kinds side by side in one run: the
//! sandbox's own API server (in this process) and a real one (etcd, kube-apiserver,
//! kube-controller-manager, kube-scheduler of the release `scripts/install-deps.sh` builds).
//! For each: from `Sandbox::start` to every component healthy (the real one's own figure), to
//! `Sandbox::start` returning (every node registered, Ready and untainted), and to the first
//! Pod Ready (scheduled, run by a node agent, its readiness probe passing). Prints figures;
//! asserts nothing about timing. Root.
//!
//! `cargo bench -p kube-sandbox --bench control_plane` (`CONTROL_PLANE_BENCH_RUNS`, default 5)

#[path = "../tests/kubelet_support/mod.rs"]
mod kubelet_support;

use std::time::{Duration, Instant};

use kube_sandbox::ControlPlane;
use kube_sandbox::kubernetes::{KUBERNETES_VERSION, KubernetesOptions};
use kubelet_support::ClusterOptions;

fn median(mut samples: Vec<Duration>) -> String {
    samples.sort();
    let middle = samples[samples.len() / 2];
    format!(
        "median {:>6} ms (min {} ms, max {} ms)",
        middle.as_millis(),
        samples[0].as_millis(),
        samples[samples.len() - 1].as_millis()
    )
}

struct Figures {
    healthy: Vec<Duration>,
    started: Vec<Duration>,
    first_pod: Vec<Duration>,
}

async fn measure(control_plane: ControlPlane, runs: usize) -> Figures {
    let mut figures = Figures {
        healthy: Vec::new(),
        started: Vec::new(),
        first_pod: Vec::new(),
    };
    for _ in 0..runs {
        let began = Instant::now();
        let cluster = kubelet_support::start_with(ClusterOptions {
            nodes: 3,
            time_scale: 1.0,
            control_plane: control_plane.clone(),
            ..Default::default()
        })
        .await;
        let started = began.elapsed();
        figures.started.push(started);
        figures.healthy.push(
            cluster
                .sandbox
                .control_plane_started_in()
                .unwrap_or(started),
        );
        cluster.run_web("default", Duration::from_secs(120)).await;
        figures.first_pod.push(began.elapsed());
    }
    figures
}

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() {
    let runs = std::env::var("CONTROL_PLANE_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let sandbox = measure(ControlPlane::Sandbox, runs).await;
    let real = measure(ControlPlane::Kubernetes(KubernetesOptions::default()), runs).await;
    println!("control plane start-up, 3 nodes, {runs} runs each");
    for (name, figures) in [
        ("kube-sandbox's own API server", sandbox),
        (&*format!("Kubernetes v{KUBERNETES_VERSION}"), real),
    ] {
        println!("  {name}:");
        println!(
            "    every component healthy      {}",
            median(figures.healthy)
        );
        println!(
            "    nodes Ready (start returned) {}",
            median(figures.started)
        );
        println!(
            "    first Pod Ready              {}",
            median(figures.first_pod)
        );
    }
}
