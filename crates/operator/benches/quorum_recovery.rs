//! The lost-quorum recovery and NOSPACE benchmark (prints figures; not a timed test). Needs
//! root, like the e2e tests.
//!
//!   cargo bench -p etcd-operator --bench quorum_recovery
//!
//! Knobs (environment): `QUORUM_BENCH_RUNS` (default 3) rounds of each part;
//! `QUORUM_BENCH_PARTS` (default `quorum,nospace`); `NOSPACE_BENCH_QUOTA_MIB` (default 64) the
//! backend quota, i.e. the database size at which NOSPACE is raised; `QUORUM_BENCH_VERSION`
//! (default the e2e suite's default, the newest 3.6) the etcd version of the clusters and of
//! the floor scripts' binaries (`/usr/local/lib/etcd-<version>/`); `QUORUM_BENCH_TIMELINE=1`
//! prints each recovery round's timeline (Events, member Pods, the operator's log lines down to
//! `TIMELINE_OPERATOR_LOG`, see `crates/e2e-support/src/timeline.rs`).
//!
//! In one run, interleaved round by round so that both see the same load:
//!
//! - **Quorum lost, 2 of 3 members' data gone.** The floor, `benches/quorum_recovery_floor.sh
//!   1` (etcd's own disaster-recovery procedure by a script on loopback: `--force-new-cluster` on
//!   the survivor, the two others added back as learners and promoted); then the operator
//!   deployed from `deploy/` with its production settings into a sandbox with 3 nodes, a fresh
//!   3-member PVC-backed cluster per round with `spec.quorumRecovery: {mode: Automatic,
//!   after: 0s}` (the smallest `after` the CRD allows) and 50 keys, whose members etcd-1 and
//!   etcd-2 lose their data (their PVCs wiped under the running Pods, their etcd killed: etcd
//!   restarts on an empty data directory and refuses to start). Timed from the kill until the
//!   EtcdCluster is Available with 3 ready voters, with the moments the recovery was recorded,
//!   forced, completed; afterwards (untimed) the 50th key is read from every member.
//! - **NOSPACE.** The floor, `benches/nospace_floor.sh QUOTA 1` (compact, defragment each
//!   member, disarm, by hand with etcdctl); then the operator: a 3-member cluster with
//!   `quotaBackendBytes` of the quota, five keys overwritten with 64 KiB values until etcd
//!   refuses a put; timed from that refusal until the alarm is gone and a put is accepted. Under
//!   each operator round, the operator's steps for the round's namespace from its log (steps
//!   and waits that need attention, at info level), at their offset from the refusal.
//!
//! Figures: docs/benchmarks.md.

#[path = "common/mod.rs"]
mod bench_support;
use etcd_operator_e2e_support as support;

use std::time::{Duration, Instant};

use etcd_operator_api::cluster::QuorumRecoveryPhase;
use nix::sys::signal::Signal;

use bench_support::{env_or, median};
use support::cluster::{Cluster, start_cluster};
use support::{create_namespace, get_cluster, kubectl};

const LIMIT: Duration = Duration::from_secs(300);
/// Quiet time before each round: the cluster settled after its bootstrap.
const SETTLE: Duration = Duration::from_secs(4);

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

/// The etcd version of the clusters and of the floor scripts' binaries.
fn version() -> String {
    std::env::var("QUORUM_BENCH_VERSION").unwrap_or_else(|_| support::DEFAULT_VERSION.into())
}

fn yaml(namespace: &str, extra: &str) -> String {
    support::cluster_yaml_on("etcd", namespace, 3, &version(), extra)
}

fn member_url(namespace: &str, member: &str) -> String {
    format!("http://{member}.etcd.{namespace}.svc:2379")
}

fn all_members(namespace: &str) -> String {
    (0..3)
        .map(|i| member_url(namespace, &format!("etcd-{i}")))
        .collect::<Vec<_>>()
        .join(",")
}

/// A new cluster in `namespace`, converged and settled.
async fn fresh(cluster: &Cluster, namespace: &str, extra: &str) {
    create_namespace(&cluster.client(), namespace).await;
    cluster.apply(&yaml(namespace, extra));
    cluster.wait_converged(namespace, "etcd", 3, LIMIT).await;
    tokio::time::sleep(SETTLE).await;
}

fn delete(cluster: &Cluster, namespace: &str) {
    let _ = kubectl(cluster, &["delete", "namespace", namespace, "--wait=false"]);
}

/// What a recovery round measured, in seconds from the loss.
struct Recovery {
    total: f64,
    recorded: Option<f64>,
    forced: Option<f64>,
    completed: Option<f64>,
}

async fn recovery_round(cluster: &Cluster, round: usize) -> Recovery {
    let namespace = format!("quorum-{round}");
    fresh(
        cluster,
        &namespace,
        "  quorumRecovery:\n    mode: Automatic\n    after: 0s\n",
    )
    .await;
    for k in 1..=50 {
        cluster.put(&namespace, "etcd", &format!("k{k}"), &format!("v{k}"));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let watch = support::timeline::OperatorWatch::start(&cluster.client());
    let since = k8s_openapi::jiff::Timestamp::now();
    let started = Instant::now();
    for m in ["etcd-1", "etcd-2"] {
        cluster
            .kubelet
            .wipe_claim(&namespace, &format!("data-{m}"))
            .expect("wiping a claim");
        cluster
            .kubelet
            .signal_container(&namespace, m, None, Signal::SIGKILL)
            .expect("killing etcd");
    }
    let load = load_average();
    let mut measured = Recovery {
        total: 0.0,
        recorded: None,
        forced: None,
        completed: None,
    };
    loop {
        assert!(
            started.elapsed() < LIMIT,
            "{namespace}: not recovered\n{}",
            cluster.operator_logs().await
        );
        let c = get_cluster(&cluster.client(), &namespace, "etcd").await;
        let status = c.status.clone().unwrap_or_default();
        let now = started.elapsed().as_secs_f64();
        let phase = status.quorum_recovery.as_ref().and_then(|r| r.phase);
        if phase.is_some() {
            measured.recorded.get_or_insert(now);
        }
        if matches!(
            phase,
            Some(QuorumRecoveryPhase::Rebuilding | QuorumRecoveryPhase::Completed)
        ) {
            measured.forced.get_or_insert(now);
        }
        if phase == Some(QuorumRecoveryPhase::Completed) {
            measured.completed.get_or_insert(now);
        }
        let voters = status
            .members
            .as_ref()
            .map(|m| m.iter().filter(|m| m.is_learner == Some(false)).count())
            .unwrap_or(0);
        if measured.completed.is_some()
            && status.ready_members == Some(3)
            && voters == 3
            && support::condition(&c, "Available").as_deref() == Some("True")
        {
            measured.total = now;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for i in 0..3 {
        let url = member_url(&namespace, &format!("etcd-{i}"));
        let value = tokio::task::block_in_place(|| {
            cluster.etcdctl(
                &url,
                &["get", "k50", "--print-value-only", "--consistency=s"],
            )
        });
        assert_eq!(
            value.map(|v| v.trim().to_string()),
            Ok("v50".into()),
            "{namespace}: etcd-{i}"
        );
    }
    let at = |t: Option<f64>| t.map_or("-".into(), |t| format!("{t:.2}"));
    println!(
        "  operator round {round}: Available at 3 members {:.2} s after the loss (recorded {}, forced {}, completed {}; load {load})",
        measured.total,
        at(measured.recorded),
        at(measured.forced),
        at(measured.completed)
    );
    if std::env::var("QUORUM_BENCH_TIMELINE").is_ok_and(|v| v == "1") {
        let until = k8s_openapi::jiff::Timestamp::now();
        print!(
            "{}",
            watch
                .timeline(&cluster.client(), &namespace, "etcd", since, until)
                .await
        );
    }
    delete(cluster, &namespace);
    measured
}

/// One NOSPACE round: seconds from the refused put to a put accepted, and the largest backend
/// before and after, in MiB.
async fn nospace_round(cluster: &Cluster, round: usize, quota_mib: usize) -> (f64, f64, f64) {
    let namespace = format!("nospace-{round}");
    let quota = quota_mib << 20;
    fresh(
        cluster,
        &namespace,
        &format!("  options:\n    quotaBackendBytes: {quota}\n"),
    )
    .await;
    let endpoints = all_members(&namespace);
    cluster
        .put_64k_values(&endpoints, "k$((i % 5))", 100_000, true)
        .expect("etcd refuses a put once the quota is reached");
    let started = Instant::now();
    let refused_at = k8s_openapi::jiff::Timestamp::now();
    let load = load_average();
    let mut before = 0.0f64;
    loop {
        assert!(
            started.elapsed() < LIMIT,
            "{namespace}: NOSPACE not remedied\n{}",
            cluster.operator_logs().await
        );
        let remedied = tokio::task::block_in_place(|| {
            let alarms = cluster.etcdctl(&endpoints, &["alarm", "list"])?;
            if alarms.contains("NOSPACE") {
                return Err(alarms);
            }
            cluster.etcdctl(&endpoints, &["put", "after", "v"])
        });
        if remedied.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let took = started.elapsed().as_secs_f64();
    let record = get_cluster(&cluster.client(), &namespace, "etcd")
        .await
        .status
        .and_then(|s| s.no_space_remediation);
    let mut after = 0.0f64;
    for m in record.iter().flat_map(|r| r.members.iter()) {
        before = before.max(m.db_size_before.unwrap_or(0) as f64 / 1048576.0);
        after = after.max(m.db_size_after.unwrap_or(0) as f64 / 1048576.0);
    }
    println!(
        "  operator round {round}: NOSPACE at a {quota_mib} MiB quota remedied in {took:.2} s (largest backend {before:.1} -> {after:.1} MiB; load {load})"
    );
    for line in step_instants(cluster, &namespace, refused_at).await {
        println!("    {line}");
    }
    delete(cluster, &namespace);
    (took, before, after)
}

/// The operator's steps and attention-worthy waits for `namespace` logged from `since` on, each
/// at its offset from `since` (the log's own timestamps, the operator's clock: the same host).
/// The instants the NOSPACE round's seconds go to; "step performed" is logged after the step.
async fn step_instants(
    cluster: &Cluster,
    namespace: &str,
    since: k8s_openapi::jiff::Timestamp,
) -> Vec<String> {
    let mut lines = Vec::new();
    for (_, at, json) in support::timeline::operator_log_lines(&cluster.client(), since).await {
        if json["namespace"].as_str() != Some(namespace) {
            continue;
        }
        let offset = (at.as_millisecond() - since.as_millisecond()) as f64 / 1000.0;
        if offset < -1.0 {
            continue;
        }
        let what = json["step"]
            .as_str()
            .or(json["reason"].as_str())
            .unwrap_or_default();
        lines.push((
            offset,
            format!(
                "{offset:+.3} s  {} {what}: {}",
                json["message"].as_str().unwrap_or_default(),
                json["detail"]
                    .as_str()
                    .unwrap_or_default()
                    .chars()
                    .take(140)
                    .collect::<String>()
            ),
        ));
    }
    lines.sort_by(|a, b| a.0.total_cmp(&b.0));
    lines.into_iter().map(|(_, l)| l).collect()
}

fn floor_values(lines: &[(String, f64)], kind: &str) -> Vec<f64> {
    lines
        .iter()
        .filter(|(k, _)| k == kind)
        .map(|(_, s)| *s)
        .collect()
}

fn main() {
    let runs = env_or("QUORUM_BENCH_RUNS", 3).max(1);
    let quota_mib = env_or("NOSPACE_BENCH_QUOTA_MIB", 64).max(1);
    let parts = std::env::var("QUORUM_BENCH_PARTS").unwrap_or_else(|_| "quorum,nospace".into());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let cluster = start_cluster(3).await;
        cluster.deploy_operator(1).await;

        if parts.contains("quorum") {
            println!(
                "Lost quorum (2 of 3 members' data gone), to Available at 3 members, etcd {}, {runs} rounds:",
                version()
            );
            let (mut floor, mut operator) = (Vec::new(), Vec::new());
            let mut phases: Vec<(f64, f64, f64)> = Vec::new();
            for round in 0..runs {
                let load = load_average();
                let lines = support::floor_script_on(&version(), "quorum_recovery_floor.sh", &["1"]);
                let took = floor_values(&lines, "recover")[0];
                println!("  floor round {round}: {took:.2} s (load {load})");
                floor.push(took);
                let r = recovery_round(&cluster, round).await;
                phases.push((
                    r.recorded.unwrap_or(f64::NAN),
                    r.forced.unwrap_or(f64::NAN),
                    r.completed.unwrap_or(f64::NAN),
                ));
                operator.push(r.total);
            }
            let (f, o) = (median(&floor), median(&operator));
            println!();
            println!("| quorum lost to Available at 3 members (median of {runs}) | seconds | rounds |");
            println!("|---|---:|---|");
            println!("| floor script (etcd's procedure by hand) | {f:.2} | {floor:.2?} |");
            println!("| operator, automatic, after: 0s | {o:.2} | {operator:.2?} |");
            println!(
                "| of which: recorded / forced / completed (median) | {:.2} / {:.2} / {:.2} | |",
                median(&phases.iter().map(|p| p.0).collect::<Vec<f64>>()),
                median(&phases.iter().map(|p| p.1).collect::<Vec<f64>>()),
                median(&phases.iter().map(|p| p.2).collect::<Vec<f64>>())
            );
            println!("| operator / floor | {:.2}x | |", o / f);
            println!();
        }

        if parts.contains("nospace") {
            println!(
                "NOSPACE at a {quota_mib} MiB quota, etcd {}, from the refused put to a put accepted, {runs} rounds:",
                version()
            );
            let (mut floor, mut operator) = (Vec::new(), Vec::new());
            let (mut floor_sizes, mut operator_sizes) = (Vec::new(), Vec::new());
            for round in 0..runs {
                let load = load_average();
                let lines = support::floor_script_on(
                    &version(),
                    "nospace_floor.sh",
                    &[&quota_mib.to_string(), "1"],
                );
                let took = floor_values(&lines, "nospace")[0];
                let sizes = (
                    floor_values(&lines, "dbsize_before")[0],
                    floor_values(&lines, "dbsize_after")[0],
                );
                println!(
                    "  floor round {round}: {took:.2} s (largest backend {:.1} -> {:.1} MiB; load {load})",
                    sizes.0, sizes.1
                );
                floor.push(took);
                floor_sizes.push(sizes);
                let (took, before, after) = nospace_round(&cluster, round, quota_mib).await;
                operator.push(took);
                operator_sizes.push((before, after));
            }
            let (f, o) = (median(&floor), median(&operator));
            println!();
            println!("| NOSPACE at {quota_mib} MiB, refused put to a put accepted (median of {runs}) | seconds | rounds |");
            println!("|---|---:|---|");
            println!("| floor script (compact, defrag x3, disarm by hand) | {f:.2} | {floor:.2?} |");
            println!("| operator | {o:.2} | {operator:.2?} |");
            println!("| operator / floor | {:.2}x | |", o / f);
            println!("backends (MiB, before -> after): floor {floor_sizes:.1?}; operator {operator_sizes:.1?}");
        }
    });
}
