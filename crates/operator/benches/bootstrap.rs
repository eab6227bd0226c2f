//! The bootstrap benchmark (prints figures; not a timed test). Needs root, like the e2e tests.
//!
//!   cargo bench -p etcd-operator --bench bootstrap   (BOOTSTRAP_BENCH_RUNS=0: idle part only)
//!
//! In one run: the scripted floor (`benches/floor.sh`: the same etcd binaries joined one at a
//! time as learners, no Kubernetes), then the operator deployed from `deploy/` into a sandbox
//! with nodes: time from `kubectl apply` to Available for 1, 3 and 5 members and from `kubectl
//! scale` 3 → 5 to converged; then, with 30 idle 3-member clusters, the operator's resident
//! memory and CPU and its Kubernetes API writes per minute (the goal is zero).

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use support::cluster::{Cluster, start_cluster};
use support::{cluster_yaml, condition, create_namespace, get_cluster};

/// Clusters for the idle measurement, and how long it watches them.
const IDLE_CLUSTERS: usize = 30;
const IDLE_WINDOW: Duration = Duration::from_secs(60);

/// Polls the cluster's status every 50 ms until it is Available with `replicas` Ready members
/// and no longer Progressing; returns the time since `since`.
async fn time_to_available(
    cluster: &Cluster,
    namespace: &str,
    replicas: i32,
    since: Instant,
) -> f64 {
    let client = cluster.client();
    loop {
        let c = get_cluster(&client, namespace, "etcd").await;
        let ready = c.status.as_ref().and_then(|s| s.ready_members);
        if ready == Some(replicas)
            && condition(&c, "Available").as_deref() == Some("True")
            && condition(&c, "Progressing").as_deref() == Some("False")
        {
            return since.elapsed().as_secs_f64();
        }
        assert!(
            since.elapsed() < Duration::from_secs(300),
            "{namespace} never converged"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Whether `pid` descends from this process: the sandbox's Pods are host processes started by
/// this benchmark, so other runs on the machine (tests, a demo) are not counted.
fn descends_from_this_process(pid: u32) -> bool {
    let me = std::process::id();
    let mut current = pid;
    while current > 1 {
        if current == me {
            return true;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{current}/stat")) else {
            return false;
        };
        // The fields after the command's closing parenthesis: state, then the parent's PID.
        let Some(parent) = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse().ok())
        else {
            return false;
        };
        current = parent;
    }
    false
}

/// The operator's process on this machine (the sandbox runs Pods as host processes).
fn operator_pid() -> u32 {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        if args.first().is_some_and(|a| a.ends_with(b"/etcd-operator"))
            && args.get(1) == Some(&&b"run"[..])
            && descends_from_this_process(pid)
        {
            found.push(pid);
        }
    }
    assert_eq!(found.len(), 1, "exactly one operator process: {found:?}");
    found[0]
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// User plus system CPU time of a process, in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    ticks as f64 / 100.0
}

/// The sum of `etcd_operator_kubernetes_writes_total` from the operator's /metrics.
async fn operator_writes(cluster: &Cluster) -> u64 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let pod = cluster.operator_pods().await.remove(0);
    let ip = pod.status.unwrap().pod_ip.unwrap();
    let mut stream = cluster.network.connect_host(&ip, 8080).await.unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: operator\r\n\r\n")
        .await
        .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).await.unwrap();
    text.lines()
        .filter(|l| l.starts_with("etcd_operator_kubernetes_writes_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// Deletes the EtcdCluster of `namespace` and waits until its Pods are gone, so the next
/// measurement runs on a quiet machine.
async fn tear_down(cluster: &Cluster, namespace: &str) {
    let (ok, _, stderr) = support::kubectl(
        cluster,
        &[
            "-n",
            namespace,
            "delete",
            "etcdcluster",
            "etcd",
            "--wait=true",
        ],
    );
    assert!(ok, "{stderr}");
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(cluster.client(), namespace);
    while !pods
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .is_empty()
    {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Checks (after the clock stopped) that etcd's member list agrees with the EtcdMembers. The
/// client Service that etcdctl goes through routes to Pods the kubelet marked Ready, which can
/// lag etcd's own health by a probe period, so this retries.
async fn agrees(cluster: &Cluster, namespace: &str, replicas: i32) {
    support::eventually("the member lists to agree", Duration::from_secs(60), || {
        cluster.membership_agrees(namespace, "etcd", replicas as usize)
    })
    .await;
}

/// From `kubectl apply` of `replicas` members to Available.
async fn bootstrap(cluster: &Cluster, replicas: i32, run: usize) -> f64 {
    let namespace = format!("bench-{replicas}-{run}");
    create_namespace(&cluster.client(), &namespace).await;
    let since = Instant::now();
    cluster.apply(&cluster_yaml("etcd", &namespace, replicas, ""));
    let seconds = time_to_available(cluster, &namespace, replicas, since).await;
    agrees(cluster, &namespace, replicas).await;
    tear_down(cluster, &namespace).await;
    seconds
}

/// From `kubectl scale` 3 → 5 to converged.
async fn grow(cluster: &Cluster, run: usize) -> f64 {
    let namespace = format!("bench-grow-{run}");
    create_namespace(&cluster.client(), &namespace).await;
    cluster.apply(&cluster_yaml("etcd", &namespace, 3, ""));
    time_to_available(cluster, &namespace, 3, Instant::now()).await;
    let since = Instant::now();
    cluster.scale(&namespace, "etcd", 5);
    let seconds = time_to_available(cluster, &namespace, 5, since).await;
    agrees(cluster, &namespace, 5).await;
    tear_down(cluster, &namespace).await;
    seconds
}

fn median(samples: &[f64]) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}

fn samples(values: &[f64]) -> String {
    values
        .iter()
        .map(|v| format!("{v:.1}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Runs of each scenario (`BOOTSTRAP_BENCH_RUNS`, default 3; 0 measures only the idle
/// clusters); the table shows the median.
fn runs() -> usize {
    std::env::var("BOOTSTRAP_BENCH_RUNS")
        .ok()
        .and_then(|runs| runs.parse().ok())
        .unwrap_or(3)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() {
    // `cargo bench` passes --bench; anything else (e.g. `cargo test --benches`) only lists.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let runs = runs();
    println!("# bootstrap benchmark (etcd 3.5.1, median of {runs} runs)");
    let mut floors: Vec<(String, Vec<f64>)> = Vec::new();
    for _ in 0..runs {
        for args in [&["1"][..], &["3", "5"][..], &["5"][..]] {
            for (what, seconds) in support::floor_script("floor.sh", args) {
                match floors.iter_mut().find(|(w, _)| *w == what) {
                    Some((_, list)) => list.push(seconds),
                    None => floors.push((what, vec![seconds])),
                }
            }
        }
    }
    let floor_of = |what: &str| -> Vec<f64> {
        floors
            .iter()
            .find(|(w, _)| w == what)
            .map(|(_, s)| s.clone())
            .unwrap()
    };

    let cluster = start_cluster(3).await;
    cluster.deploy_operator(1).await;
    let client = cluster.client();
    let mut rows: Vec<(String, Vec<f64>, Vec<f64>)> = Vec::new();
    for replicas in [1, 3, 5].into_iter().filter(|_| runs > 0) {
        let mut ours = Vec::new();
        for run in 0..runs {
            ours.push(bootstrap(&cluster, replicas, run).await);
        }
        let what = format!("bootstrap {replicas}");
        rows.push((what.clone(), ours, floor_of(&what)));
    }
    if runs > 0 {
        let mut ours = Vec::new();
        for run in 0..runs {
            ours.push(grow(&cluster, run).await);
        }
        rows.push(("grow 3 5".to_string(), ours, floor_of("grow 3 5")));
    }

    println!();
    println!(
        "| scenario | operator (s) | scripted floor (s) | ratio | operator runs | floor runs |"
    );
    println!("| --- | ---: | ---: | ---: | --- | --- |");
    for (what, ours, floor) in &rows {
        println!(
            "| {what} | {:.1} | {:.1} | {:.2} | {} | {} |",
            median(ours),
            median(floor),
            median(ours) / median(floor),
            samples(ours),
            samples(floor)
        );
    }

    // 30 idle 3-member clusters.
    let since = Instant::now();
    for i in 0..IDLE_CLUSTERS {
        let namespace = format!("idle-{i}");
        create_namespace(&client, &namespace).await;
        cluster.apply(&cluster_yaml("etcd", &namespace, 3, ""));
    }
    for i in 0..IDLE_CLUSTERS {
        time_to_available(&cluster, &format!("idle-{i}"), 3, since).await;
    }
    let all_ready = since.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_secs(30)).await;
    let pid = operator_pid();
    let (cpu_before, writes_before) = (cpu_seconds(pid), operator_writes(&cluster).await);
    tokio::time::sleep(IDLE_WINDOW).await;
    let (cpu_after, writes_after) = (cpu_seconds(pid), operator_writes(&cluster).await);
    let minutes = IDLE_WINDOW.as_secs_f64() / 60.0;
    println!();
    println!(
        "{IDLE_CLUSTERS} idle 3-member clusters (all Available {all_ready:.0} s after the first apply):"
    );
    println!("| measure | value |");
    println!("| --- | ---: |");
    println!(
        "| operator resident memory | {:.1} MiB |",
        rss_kib(pid) as f64 / 1024.0
    );
    println!(
        "| operator CPU | {:.2} % of one core |",
        100.0 * (cpu_after - cpu_before) / IDLE_WINDOW.as_secs_f64()
    );
    println!(
        "| Kubernetes API writes | {:.1} per minute |",
        (writes_after - writes_before) as f64 / minutes
    );
}
