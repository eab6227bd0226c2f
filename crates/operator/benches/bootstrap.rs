//! The bootstrap benchmark (prints figures; not a timed test). Needs root, like the e2e tests.
//!
//!   cargo bench -p etcd-operator --bench bootstrap
//!   BOOTSTRAP_BENCH_CHURN=30 cargo bench -p etcd-operator --bench bootstrap   (adds the churn loop)
//!   BOOTSTRAP_BENCH_RUNS=0 cargo bench -p etcd-operator --bench bootstrap     (idle part only)
//!
//! The operator is deployed from `deploy/` into a sandbox with 3 nodes, as users deploy it. In
//! one run, in this order:
//!
//! 1. Scenarios, each run `BOOTSTRAP_BENCH_RUNS` times: the time from `kubectl apply` to
//!    Available with every member ready for 1, 3 and 5 members, and from `kubectl scale` 3 → 5
//!    to converged. Beside each, the scripted floor (`benches/floor.sh`: the same etcd binaries
//!    on loopback, joined one at a time as learners, no Kubernetes) for the same member count,
//!    run `BOOTSTRAP_BENCH_FLOOR_RUNS` times, interleaved with the operator's runs (a round is:
//!    floor 1, operator 1, floor 3 → 5, operator 3, operator 3 → 5, floor 5, operator 5) so both
//!    see the same load on a shared machine. Printed: min, median, p90 and max of each.
//! 2. Churn (`BOOTSTRAP_BENCH_CHURN` bootstraps, 0 by default): 3-member clusters bootstrapped
//!    one after another, each in a new namespace, the previous namespace deleted as the next
//!    cluster is applied (issue 17's loop). Printed: every bootstrap time, their distribution,
//!    and how many took longer than `BOOTSTRAP_BENCH_SLOW` × the slowest 3-member floor run
//!    of this benchmark (when only churn runs, the 3-member floor runs before it).
//! 3. Idle (`BOOTSTRAP_BENCH_IDLE` clusters, 30 by default; 0 skips it): that many idle
//!    clusters of `BOOTSTRAP_BENCH_IDLE_MEMBERS` members (3 by default), then, after 30 s of
//!    rest, the operator's resident memory, CPU and Kubernetes API writes per minute over 60 s
//!    (the goal is zero) and the etcd processes' CPU and memory; and the time from one member's
//!    Pod deleted until all members are ready again, on the first cluster before the others
//!    exist and again once they all idle (`BOOTSTRAP_BENCH_IDLE=100` is issue 15's scale run:
//!    300 etcd Pods on 3 nodes; with `BOOTSTRAP_BENCH_IDLE_MEMBERS=1`, issue 29's: 100 Pods).
//!
//! Every run slower than `BOOTSTRAP_BENCH_SLOW` × the slowest floor run of its scenario gets a
//! timeline (`crates/e2e-support/src/timeline.rs`): the cluster's Events, its member Pods' creation,
//! starts and restarts, the operator Pod's readiness transitions and restarts, the leader
//! Lease's holder changes and renewals, the operator's warnings. A cluster that does not
//! converge within 300 s fails the benchmark, with its timeline. Each round and each churn
//! bootstrap prints the machine's load average beside its figures (the machine may be shared).
//!
//! Knobs (environment variables):
//!
//! | variable | default | meaning |
//! | --- | --- | --- |
//! | `BOOTSTRAP_BENCH_RUNS` | 10 | operator runs of each scenario; 0 skips the scenarios |
//! | `BOOTSTRAP_BENCH_FLOOR_RUNS` | the larger of 10 and the runs | floor runs of each scenario |
//! | `BOOTSTRAP_BENCH_CHURN` | 0 | bootstraps of the churn loop; 0 skips it |
//! | `BOOTSTRAP_BENCH_IDLE` | 30 | idle clusters; 0 skips the idle part |
//! | `BOOTSTRAP_BENCH_IDLE_MEMBERS` | 3 | members of each idle cluster (1 makes the most clusters fit a machine) |
//! | `BOOTSTRAP_BENCH_IDLE_LIMIT` | 900 | seconds the idle clusters, applied at once, may take to be all Available |
//! | `BOOTSTRAP_BENCH_ETCD_HEARTBEAT_MS` | 0 | etcd's heartbeat interval in every etcd Pod (election timeout 10 x), through etcd's environment; 0: etcd's defaults |
//! | `BOOTSTRAP_BENCH_SIM` | 0 | 1: every etcd Pod runs the etcd simulator (`crates/etcd-sim`, built here with `cargo build --release`) as a front of one hub in the cluster network, in place of etcd: issue 29's 1,000 3-member clusters (item 6, part b); the idle part only |
//! | `BOOTSTRAP_BENCH_NODES` | 3 | nodes; each takes 80 etcd Pods (their CPU requests fill its 8 CPUs) and at most 110 Pods; 1,000 3-member clusters need 40 |
//! | `BOOTSTRAP_BENCH_OPERATOR_ARGS` | (none) | flags added to the operator's in `deploy/operator/deployment.yaml`, space-separated (e.g. `--etcd-connections-kept=300`); a flag given replaces the manifest's |
//! | `BOOTSTRAP_BENCH_SLOW` | 1.3 | a run slower than this × the slowest floor run is slow; 0 prints every run's timeline |

#[path = "common/mod.rs"]
mod bench_support;
use etcd_operator_e2e_support as support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::jiff::Timestamp;
use kube::Api;

use bench_support::{
    cpu_seconds, env_or, memory_mib, operator_pid, try_cpu_seconds, try_memory_mib,
};
use support::cluster::{Cluster, start_cluster, start_cluster_with_etcd_env};
use support::timeline::OperatorWatch;
use support::{cluster_yaml, condition, create_namespace, get_cluster};

/// How long the idle measurement watches the operator, after 30 s of rest.
const IDLE_WINDOW: Duration = Duration::from_secs(60);
/// A cluster not converged after this long fails the benchmark.
const CONVERGE_LIMIT: Duration = Duration::from_secs(300);

/// The knobs, from the environment (see the header).
struct Knobs {
    runs: usize,
    floor_runs: usize,
    churn: usize,
    idle: usize,
    idle_members: i32,
    slow: f64,
    sim: bool,
    nodes: usize,
    operator_args: Vec<String>,
}

impl Knobs {
    fn from_env() -> Knobs {
        let runs = env_or("BOOTSTRAP_BENCH_RUNS", 10);
        Knobs {
            runs,
            floor_runs: env_or("BOOTSTRAP_BENCH_FLOOR_RUNS", runs.max(10)),
            churn: env_or("BOOTSTRAP_BENCH_CHURN", 0),
            idle: env_or("BOOTSTRAP_BENCH_IDLE", 30),
            idle_members: env_or("BOOTSTRAP_BENCH_IDLE_MEMBERS", 3),
            slow: env_or("BOOTSTRAP_BENCH_SLOW", 1.3),
            sim: env_or("BOOTSTRAP_BENCH_SIM", 0) == 1,
            nodes: env_or("BOOTSTRAP_BENCH_NODES", 3),
            operator_args: std::env::var("BOOTSTRAP_BENCH_OPERATOR_ARGS")
                .unwrap_or_default()
                .split_whitespace()
                .map(str::to_string)
                .collect(),
        }
    }
}

/// One measured run: its time, and its timeline (printed only if it was slow).
struct Run {
    seconds: f64,
    timeline: String,
}

/// The cluster is Available with `replicas` Ready members, not Progressing.
fn converged(c: &etcd_operator_api::EtcdCluster, replicas: i32) -> bool {
    c.status.as_ref().and_then(|s| s.ready_members) == Some(replicas)
        && condition(c, "Available").as_deref() == Some("True")
        && condition(c, "Progressing").as_deref() == Some("False")
}

/// Polls the cluster's status every 50 ms until it is Available with `replicas` Ready members
/// and no longer Progressing; returns the time since `since`, or None after [`CONVERGE_LIMIT`].
async fn time_to_available(
    cluster: &Cluster,
    namespace: &str,
    replicas: i32,
    since: Instant,
) -> Option<f64> {
    let client = cluster.client();
    loop {
        let c = get_cluster(&client, namespace, "etcd").await;
        let ready = c.status.as_ref().and_then(|s| s.ready_members);
        if ready == Some(replicas)
            && condition(&c, "Available").as_deref() == Some("True")
            && condition(&c, "Progressing").as_deref() == Some("False")
        {
            return Some(since.elapsed().as_secs_f64());
        }
        if since.elapsed() > CONVERGE_LIMIT {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The machine's load average over the last minute (the machine may be shared: the figures
/// are printed beside it).
fn load() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// The clock of a run: the monotonic one for the figure, the wall clock for the timeline.
#[derive(Clone, Copy)]
struct Start {
    at: Instant,
    wall: Timestamp,
}

impl Start {
    fn now() -> Start {
        Start {
            at: Instant::now(),
            wall: Timestamp::now(),
        }
    }
}

/// Waits until `namespace/etcd` converged on `replicas`; then checks etcd's member list and
/// takes the run's timeline. Fails loudly, with the timeline, after [`CONVERGE_LIMIT`].
async fn converge(
    cluster: &Cluster,
    watch: &OperatorWatch,
    namespace: &str,
    replicas: i32,
    start: Start,
) -> Run {
    let converged = time_to_available(cluster, namespace, replicas, start.at).await;
    let until = Timestamp::now();
    let timeline = watch
        .timeline(&cluster.client(), namespace, "etcd", start.wall, until)
        .await;
    let Some(seconds) = converged else {
        println!("{timeline}");
        panic!(
            "{namespace}/etcd did not converge on {replicas} members within {CONVERGE_LIMIT:?} \
             (its timeline is above)"
        );
    };
    agrees(cluster, namespace, replicas).await;
    Run { seconds, timeline }
}

/// The operator's Kubernetes API writes and etcd dials so far: the sums of
/// `etcd_operator_kubernetes_writes_total` and `etcd_operator_etcd_dials_total` from its /metrics.
async fn operator_counts(cluster: &Cluster) -> (u64, u64) {
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
    let sum = |metric: &str| -> u64 {
        text.lines()
            .filter(|l| {
                l.strip_prefix(metric)
                    .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    };
    (
        sum("etcd_operator_kubernetes_writes_total"),
        sum("etcd_operator_etcd_dials_total"),
    )
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
async fn bootstrap(cluster: &Cluster, watch: &OperatorWatch, replicas: i32, run: usize) -> Run {
    let namespace = format!("bench-{replicas}-{run}");
    create_namespace(&cluster.client(), &namespace).await;
    let start = Start::now();
    cluster.apply(&cluster_yaml("etcd", &namespace, replicas, ""));
    let measured = converge(cluster, watch, &namespace, replicas, start).await;
    tear_down(cluster, &namespace).await;
    measured
}

/// From `kubectl scale` 3 → 5 to converged.
async fn grow(cluster: &Cluster, watch: &OperatorWatch, run: usize) -> Run {
    let namespace = format!("bench-grow-{run}");
    create_namespace(&cluster.client(), &namespace).await;
    cluster.apply(&cluster_yaml("etcd", &namespace, 3, ""));
    converge(cluster, watch, &namespace, 3, Start::now()).await;
    let start = Start::now();
    cluster.scale(&namespace, "etcd", 5);
    let measured = converge(cluster, watch, &namespace, 5, start).await;
    tear_down(cluster, &namespace).await;
    measured
}

/// Issue 17's loop: `count` 3-member bootstraps one after another, each in a new namespace,
/// the previous namespace deleted right after the next cluster is applied.
async fn churn(cluster: &Cluster, watch: &OperatorWatch, count: usize) -> Vec<Run> {
    let namespaces: Api<Namespace> = Api::all(cluster.client());
    let mut previous: Option<String> = None;
    let mut runs = Vec::new();
    for i in 0..count {
        let namespace = format!("churn-{i}");
        create_namespace(&cluster.client(), &namespace).await;
        let start = Start::now();
        cluster.apply(&cluster_yaml("etcd", &namespace, 3, ""));
        if let Some(old) = previous.replace(namespace.clone()) {
            namespaces
                .delete(&old, &Default::default())
                .await
                .unwrap_or_else(|e| panic!("deleting namespace {old}: {e}"));
        }
        let run = converge(cluster, watch, &namespace, 3, start).await;
        println!(
            "churn {}/{count}: {:.1} s (load average {:.1})",
            i + 1,
            run.seconds,
            load()
        );
        runs.push(run);
    }
    if let Some(last) = previous {
        namespaces
            .delete(&last, &Default::default())
            .await
            .unwrap_or_else(|e| panic!("deleting namespace {last}: {e}"));
    }
    // The next part starts on a quiet machine; a namespace that never goes is a finding.
    let since = Instant::now();
    loop {
        let left: Vec<String> = namespaces
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|n| n.metadata.name)
            .filter(|n| n.starts_with("churn-"))
            .collect();
        if left.is_empty() {
            break;
        }
        if since.elapsed() > CONVERGE_LIMIT {
            println!(
                "WARNING: namespaces still there {CONVERGE_LIMIT:?} after their deletion: {left:?}"
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    runs
}

/// min, median, p90 and max of some runs: the median of an even count is the mean of the two
/// middle runs; p90 is the nearest rank (with 10 runs, the 9th fastest).
struct Distribution {
    min: f64,
    median: f64,
    p90: f64,
    max: f64,
}

fn distribution(samples: &[f64]) -> Distribution {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    assert!(n > 0, "a distribution of no runs");
    let median = if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    };
    let p90 = sorted[((n as f64 * 0.9).ceil() as usize).clamp(1, n) - 1];
    Distribution {
        min: sorted[0],
        median,
        p90,
        max: sorted[n - 1],
    }
}

impl std::fmt::Display for Distribution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:.1} / {:.1} / {:.1} / {:.1}",
            self.min, self.median, self.p90, self.max
        )
    }
}

fn samples(values: &[f64]) -> String {
    values
        .iter()
        .map(|v| format!("{v:.1}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn seconds_of(runs: &[Run]) -> Vec<f64> {
    runs.iter().map(|r| r.seconds).collect()
}

/// The floor's runs, by what its lines name (`bootstrap 3`, `grow 3 5`).
#[derive(Default)]
struct Floors(BTreeMap<String, Vec<f64>>);

impl Floors {
    fn measure(&mut self, args: &[&str]) {
        // The same etcd as the operator's clusters (`cluster_yaml`: the e2e suite's default).
        for (what, seconds) in support::floor_script_on(support::DEFAULT_VERSION, "floor.sh", args)
        {
            self.0.entry(what).or_default().push(seconds);
        }
    }

    fn of(&self, what: &str) -> &[f64] {
        self.0.get(what).map(Vec::as_slice).unwrap_or_default()
    }

    fn slowest(&self, what: &str) -> f64 {
        self.of(what).iter().copied().fold(0.0, f64::max)
    }

    fn last(&self, what: &str) -> f64 {
        self.of(what).last().copied().unwrap_or(f64::NAN)
    }
}

/// A scenario's operator runs.
struct Scenario {
    what: &'static str,
    runs: Vec<Run>,
}

/// Prints the timelines of the runs slower than `limit`.
fn print_slow(what: &str, runs: &[Run], limit: f64) {
    for (i, run) in runs.iter().enumerate() {
        if run.seconds > limit {
            println!();
            println!(
                "{what}, run {}: {:.1} s, over {limit:.1} s (slow):",
                i + 1,
                run.seconds
            );
            print!("{}", run.timeline);
        }
    }
}

fn over(runs: &[Run], limit: f64) -> usize {
    runs.iter().filter(|r| r.seconds > limit).count()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() {
    // `cargo bench` passes --bench; anything else (e.g. `cargo test --benches`) only lists.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let knobs = Knobs::from_env();
    let benchmark_start = Timestamp::now();
    println!(
        "# bootstrap benchmark (etcd {}; {} runs of each scenario, {} floor runs, {} churn \
         bootstraps, {} idle clusters; slow = over {} x the slowest floor run); started {benchmark_start}",
        support::DEFAULT_VERSION,
        knobs.runs,
        knobs.floor_runs,
        knobs.churn,
        knobs.idle,
        knobs.slow
    );

    // BOOTSTRAP_BENCH_ETCD_HEARTBEAT_MS: etcd's heartbeat interval (and 10 x it as the
    // election timeout) for every etcd Pod, through the environment etcd reads; 0 keeps
    // etcd's defaults (100 ms, 1 s). An idle etcd's CPU is mostly its heartbeats: 300 members
    // at the defaults need more than the 2 cores of the machine the scale run was made on.
    let heartbeat_ms: usize = env_or("BOOTSTRAP_BENCH_ETCD_HEARTBEAT_MS", 0);
    let mut hub = None;
    let cluster = if knobs.sim {
        let (cluster, child) = simulated(&knobs).await;
        hub = Some(child);
        cluster
    } else if heartbeat_ms > 0 {
        println!(
            "# etcd Pods run with ETCD_HEARTBEAT_INTERVAL={heartbeat_ms} ETCD_ELECTION_TIMEOUT={}",
            heartbeat_ms * 10
        );
        start_cluster_with_etcd_env(
            knobs.nodes,
            &[
                ("ETCD_HEARTBEAT_INTERVAL", heartbeat_ms.to_string()),
                ("ETCD_ELECTION_TIMEOUT", (heartbeat_ms * 10).to_string()),
            ],
        )
        .await
    } else {
        start_cluster(knobs.nodes).await
    };
    let watch = OperatorWatch::start(&cluster.client());
    if knobs.operator_args.is_empty() {
        cluster.deploy_operator(1).await;
    } else {
        println!("# the operator runs with {}", knobs.operator_args.join(" "));
        cluster
            .deploy_operator_with(&support::healing::OperatorDeployment {
                extra_args: knobs.operator_args.clone(),
                failpoints: false,
            })
            .await;
    }

    // 1. The scenarios, interleaved with the floor.
    let mut floors = Floors::default();
    let mut scenarios: Vec<Scenario> = ["bootstrap 1", "bootstrap 3", "grow 3 5", "bootstrap 5"]
        .into_iter()
        .map(|what| Scenario {
            what,
            runs: Vec::new(),
        })
        .collect();
    let rounds = if knobs.runs > 0 {
        knobs.runs.max(knobs.floor_runs)
    } else {
        0
    };
    for round in 0..rounds {
        let (floor, ours) = (round < knobs.floor_runs, round < knobs.runs);
        let mut line = format!("round {}/{rounds}:", round + 1);
        if floor {
            floors.measure(&["1"]);
        }
        if ours {
            scenarios[0]
                .runs
                .push(bootstrap(&cluster, &watch, 1, round).await);
        }
        if floor {
            floors.measure(&["3", "5"]);
        }
        if ours {
            scenarios[1]
                .runs
                .push(bootstrap(&cluster, &watch, 3, round).await);
            scenarios[2].runs.push(grow(&cluster, &watch, round).await);
        }
        if floor {
            floors.measure(&["5"]);
        }
        if ours {
            scenarios[3]
                .runs
                .push(bootstrap(&cluster, &watch, 5, round).await);
        }
        for scenario in &scenarios {
            let ours = scenario.runs.last().filter(|_| round < knobs.runs);
            line.push_str(&format!(
                " {} {} (floor {});",
                scenario.what,
                ours.map(|r| format!("{:.1}", r.seconds))
                    .unwrap_or_else(|| "-".into()),
                if floor {
                    format!("{:.1}", floors.last(scenario.what))
                } else {
                    "-".into()
                }
            ));
        }
        println!("{line} load average {:.1}", load());
    }
    if rounds > 0 {
        println!();
        println!(
            "| scenario | operator min / median / p90 / max (s) | floor min / median / p90 / max (s) | median ratio | runs over {} x the slowest floor run |",
            knobs.slow
        );
        println!("| --- | --- | --- | ---: | --- |");
        for scenario in &scenarios {
            let ours = seconds_of(&scenario.runs);
            let floor = floors.of(scenario.what);
            let limit = knobs.slow * floors.slowest(scenario.what);
            let (d, f) = (distribution(&ours), distribution(floor));
            println!(
                "| {} | {d} | {f} | {:.2} | {} of {} (over {limit:.1} s) |",
                scenario.what,
                d.median / f.median,
                over(&scenario.runs, limit),
                ours.len()
            );
        }
        println!();
        for scenario in &scenarios {
            println!(
                "{}: operator {}; floor {}",
                scenario.what,
                samples(&seconds_of(&scenario.runs)),
                samples(floors.of(scenario.what))
            );
        }
        for scenario in &scenarios {
            let limit = knobs.slow * floors.slowest(scenario.what);
            print_slow(scenario.what, &scenario.runs, limit);
        }
    }

    // 2. Churn.
    if knobs.churn > 0 {
        if floors.of("bootstrap 3").is_empty() {
            for _ in 0..knobs.floor_runs.max(1) {
                floors.measure(&["3"]);
            }
        }
        println!();
        println!(
            "churn: {} 3-member bootstraps, each in a new namespace, the previous one deleted as \
             the next is applied",
            knobs.churn
        );
        let runs = churn(&cluster, &watch, knobs.churn).await;
        let ours = seconds_of(&runs);
        let floor = floors.of("bootstrap 3");
        let slowest = floors.slowest("bootstrap 3");
        let limit = knobs.slow * slowest;
        println!();
        println!("| churn | min / median / p90 / max (s) | runs |");
        println!("| --- | --- | --- |");
        println!(
            "| operator, {} bootstraps | {} | {} |",
            ours.len(),
            distribution(&ours),
            samples(&ours)
        );
        println!(
            "| floor, bootstrap 3 | {} | {} |",
            distribution(floor),
            samples(floor)
        );
        let slow: Vec<String> = runs
            .iter()
            .enumerate()
            .filter(|(_, r)| r.seconds > limit)
            .map(|(i, r)| format!("{} ({:.1} s)", i + 1, r.seconds))
            .collect();
        println!();
        println!(
            "verdict: {} of {} churn bootstraps took longer than {} x the slowest 3-member floor \
             run ({} x {slowest:.1} s = {limit:.1} s){}",
            slow.len(),
            runs.len(),
            knobs.slow,
            knobs.slow,
            if slow.is_empty() {
                String::new()
            } else {
                format!(": runs {}", slow.join(", "))
            }
        );
        print_slow("churn", &runs, limit);
    }

    // 3. Idle clusters.
    if knobs.idle > 0 {
        let hub_pid = hub.as_ref().and_then(|h| h.id());
        idle(&cluster, knobs.idle, knobs.idle_members, hub_pid).await;
    }

    // What the operator went through over the whole benchmark.
    println!();
    println!("the operator over the whole benchmark (s after {benchmark_start}):");
    for change in watch.changes(benchmark_start) {
        println!("  {change}");
    }
    if let Some((gap, at)) = watch.longest_renewal_gap() {
        println!(
            "  longest time between two renewals of the leader Lease: {gap:.1} s (from {:+.1})",
            at.duration_since(benchmark_start).as_secs_f64()
        );
    }
}

/// Deletes `member`'s Pod at once (grace period 0) after the cluster settled, and returns the
/// seconds until a new Pod of it is Ready and the cluster reports `replicas` ready members,
/// Available:
/// the operator's reaction (the kubelet only restarts a killed process; a deleted Pod is the
/// operator's to make again).
async fn reaction(cluster: &Cluster, namespace: &str, member: &str, replicas: i32) -> f64 {
    // etcd refuses MemberAdd for 5 s after a voter (re)connects; a settled cluster measures
    // the operator, not that.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let api = Api::<k8s_openapi::api::core::v1::Pod>::namespaced(cluster.client(), namespace);
    let old = api
        .get(member)
        .await
        .expect("the member's Pod")
        .metadata
        .uid;
    let started = Instant::now();
    api.delete(member, &kube::api::DeleteParams::default().grace_period(0))
        .await
        .expect("deleting the member's Pod");
    let client = cluster.client();
    loop {
        let pod = api.get_opt(member).await.ok().flatten();
        let back = pod.as_ref().is_some_and(|p| {
            support::cluster::pod_ready(p)
                && p.metadata.deletion_timestamp.is_none()
                && p.metadata.uid != old
        });
        if back {
            let c = get_cluster(&client, namespace, "etcd").await;
            if c.status.as_ref().and_then(|s| s.ready_members) == Some(replicas)
                && condition(&c, "Available").as_deref() == Some("True")
            {
                return started.elapsed().as_secs_f64();
            }
        }
        assert!(
            started.elapsed() < CONVERGE_LIMIT,
            "{namespace}/{member} never came back"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Where the simulator's hub listens: the cluster network's gateway (its namespace holds the
/// hub; every Pod routes to it), on a port no Service uses.
const HUB: &str = "10.244.0.1:2300";

/// BOOTSTRAP_BENCH_SIM=1: builds the etcd simulator, starts a sandbox whose etcd Pods run it
/// as fronts of one hub, and starts the hub inside the cluster network (issue 29 item 6(b)).
async fn simulated(knobs: &Knobs) -> (Cluster, tokio::process::Child) {
    assert!(
        knobs.runs == 0 && knobs.churn == 0,
        "BOOTSTRAP_BENCH_SIM=1 measures the idle part only: set BOOTSTRAP_BENCH_RUNS=0 and \
         BOOTSTRAP_BENCH_CHURN=0 (the scenarios compare real etcd with its floor)"
    );
    // Every Pod's veth, and each connection's peer, takes an entry in the kernel's one
    // neighbour table: past gc_thresh3 (1,024 by default) new entries fail and packets drop.
    let pods = knobs.idle * usize::try_from(knobs.idle_members).unwrap_or(0);
    let thresh: usize = std::fs::read_to_string("/proc/sys/net/ipv4/neigh/default/gc_thresh3")
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0);
    assert!(
        thresh >= 4 * pods,
        "net.ipv4.neigh.default.gc_thresh3 is {thresh}, under 4 entries for each of the {pods} \
         Pods (each Pod's gateway, the operator's and the probes' peers): raise it first, e.g. \
         sysctl -w net.ipv4.neigh.default.gc_thresh1={} net.ipv4.neigh.default.gc_thresh2={} \
         net.ipv4.neigh.default.gc_thresh3={}",
        4 * pods,
        8 * pods,
        16 * pods
    );
    let root = support::repo_root();
    let built = std::process::Command::new(env!("CARGO"))
        .args(["build", "--release", "-p", "etcd-sim"])
        .current_dir(&root)
        .status()
        .expect("running cargo build -p etcd-sim");
    assert!(built.success(), "cargo build --release -p etcd-sim failed");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let sim = target.join("release/etcd-sim");
    println!(
        "# etcd Pods run {} as fronts of the hub at {HUB} (BOOTSTRAP_BENCH_SIM=1: figures from the \
         simulator, not from etcd)",
        sim.display()
    );
    let cluster = support::cluster::start_cluster_with_etcd_sim(knobs.nodes, &sim, HUB).await;
    assert_eq!(
        format!("{}:2300", cluster.network.gateway()),
        HUB,
        "the cluster network's gateway moved; the image map points the fronts at {HUB}"
    );
    let log = std::fs::File::create(cluster.dir.path().join("etcd-sim-hub.log"))
        .expect("the hub's log file");
    let mut command = cluster
        .network
        .command("sh")
        .expect("a command in the cluster network");
    // The hub holds two listeners per member and every connection through the fronts: its
    // descriptor limit goes up to the hard one (raising that needs CAP_SYS_RESOURCE).
    command
        .args([
            "-c",
            "ulimit -n \"$(ulimit -Hn)\" && exec \"$0\" hub --listen \"$1\"",
        ])
        .arg(&sim)
        .arg(HUB)
        .stdout(log.try_clone().expect("the hub's log file"))
        .stderr(log);
    let mut hub = tokio::process::Command::from(command)
        .kill_on_drop(true)
        .spawn()
        .expect("starting the etcd-sim hub");
    let log = cluster.dir.path().join("etcd-sim-hub.log");
    let started = Instant::now();
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("listening on") {
            break;
        }
        let exited = hub.try_wait().expect("the hub's state");
        assert!(
            exited.is_none() && started.elapsed() < Duration::from_secs(10),
            "the etcd-sim hub did not start ({exited:?}): {text}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (cluster, hub)
}

/// The etcd processes of the sandbox's Pods (host processes descending from this one, run as
/// the operator's command line `etcd --name=... --initial-cluster-token=...`; not the control
/// plane's own etcd).
fn etcd_pids() -> Vec<u32> {
    bench_support::descendant_pids(|args| {
        args.first() == Some(&&b"etcd"[..])
            && args
                .iter()
                .any(|a| a.starts_with(b"--initial-cluster-token="))
    })
}

/// `count` idle clusters of `members` members: the operator's memory, CPU and API writes at
/// rest, and its reaction to one member's Pod deleted, alone (the first cluster, before the
/// others exist) and among the others.
async fn idle(cluster: &Cluster, count: usize, members: i32, hub: Option<u32>) {
    let client = cluster.client();
    create_namespace(&client, "idle-0").await;
    cluster.apply(&cluster_yaml("etcd", "idle-0", members, ""));
    if time_to_available(cluster, "idle-0", members, Instant::now())
        .await
        .is_none()
    {
        panic!("idle-0/etcd did not converge within {CONVERGE_LIMIT:?}");
    }
    // The last member: a follower in a 3-member cluster (etcd-0 bootstrapped and leads), the
    // only member of a 1-member one.
    let victim = format!("etcd-{}", members - 1);
    let alone = reaction(cluster, "idle-0", &victim, members).await;
    let since = Instant::now();
    // Made through the API, 8 at a time: one `kubectl apply` per cluster takes longer than the
    // bootstraps once there are hundreds, and would time the applies instead.
    futures::stream::iter(1..count)
        .map(|i| {
            let client = client.clone();
            async move {
                let namespace = format!("idle-{i}");
                create_namespace(&client, &namespace).await;
                let manifest: etcd_operator_api::EtcdCluster =
                    serde_yaml::from_str(&cluster_yaml("etcd", &namespace, members, ""))
                        .expect("the idle cluster's manifest");
                Api::<etcd_operator_api::EtcdCluster>::namespaced(client, &namespace)
                    .create(&Default::default(), &manifest)
                    .await
                    .expect("creating an idle EtcdCluster");
            }
        })
        .buffer_unordered(8)
        .collect::<Vec<()>>()
        .await;
    println!(
        "  the {} other clusters created in {:.0} s",
        count - 1,
        since.elapsed().as_secs_f64()
    );
    // All applied at once: the limit is the idle part's own (BOOTSTRAP_BENCH_IDLE_LIMIT,
    // seconds since the applies), and the progress is printed, so a slow bootstrap of many
    // clusters shows how it went instead of only failing.
    let limit = Duration::from_secs(env_or("BOOTSTRAP_BENCH_IDLE_LIMIT", 900));
    let mut available = vec![None; count];
    let mut reported = 0;
    loop {
        // One LIST per look (a GET per cluster takes longer than the look's period once the
        // API server is busy with hundreds of bootstraps, and would time the look, not them).
        let all = Api::<etcd_operator_api::EtcdCluster>::all(client.clone())
            .list(&Default::default())
            .await
            .expect("listing EtcdClusters");
        let now = since.elapsed().as_secs_f64();
        for c in &all.items {
            let index = c
                .metadata
                .namespace
                .as_deref()
                .and_then(|n| n.strip_prefix("idle-"))
                .and_then(|i| i.parse::<usize>().ok());
            if let Some(at) = index.and_then(|i| available.get_mut(i))
                && at.is_none()
                && converged(c, members)
            {
                *at = Some(now);
            }
        }
        let done = available.iter().filter(|a| a.is_some()).count();
        let elapsed = since.elapsed();
        if done == count {
            break;
        }
        if elapsed.as_secs() / 30 > reported {
            reported = elapsed.as_secs() / 30;
            println!(
                "  {:.0} s after the applies: {done}/{count} Available (load average {:.1})",
                elapsed.as_secs_f64(),
                load()
            );
        }
        if elapsed > limit {
            let late: Vec<usize> = (0..count).filter(|i| available[*i].is_none()).collect();
            panic!(
                "{} clusters not Available {limit:?} after their apply: idle-{late:?}",
                late.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let mut times: Vec<f64> = available.into_iter().flatten().collect();
    times.sort_by(f64::total_cmp);
    println!(
        "  Available after the applies: median {:.0} s, p90 {:.0} s, last {:.0} s",
        times[times.len() / 2],
        times[times.len() * 9 / 10],
        times[times.len() - 1]
    );
    let all_ready = since.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_secs(30)).await;
    let pid = operator_pid();
    let etcds = etcd_pids();
    let etcd_cpu = |pids: &[u32]| -> f64 { pids.iter().filter_map(|p| try_cpu_seconds(*p)).sum() };
    let (cpu_before, (writes_before, dials_before)) =
        (cpu_seconds(pid), operator_counts(cluster).await);
    let etcd_before = etcd_cpu(&etcds);
    let hub_before = hub.and_then(try_cpu_seconds);
    tokio::time::sleep(IDLE_WINDOW).await;
    let (cpu_after, (writes_after, dials_after)) =
        (cpu_seconds(pid), operator_counts(cluster).await);
    let etcd_after = etcd_cpu(&etcds);
    let hub_after = hub.and_then(try_cpu_seconds);
    let etcd_memory: f64 = etcds
        .iter()
        .filter_map(|p| try_memory_mib(*p, "VmRSS"))
        .sum();
    let minutes = IDLE_WINDOW.as_secs_f64() / 60.0;
    println!();
    println!(
        "{count} idle {members}-member clusters (the {} after the first all Available \
         {all_ready:.0} s after their first apply):",
        count - 1
    );
    println!("| measure | value |");
    println!("| --- | ---: |");
    println!(
        "| operator resident memory | {:.1} MiB (peak {:.1} MiB) |",
        memory_mib(pid, "VmRSS"),
        memory_mib(pid, "VmHWM")
    );
    println!(
        "| operator CPU | {:.2} % of one core |",
        100.0 * (cpu_after - cpu_before) / IDLE_WINDOW.as_secs_f64()
    );
    println!(
        "| Kubernetes API writes | {:.1} per minute |",
        (writes_after - writes_before) as f64 / minutes
    );
    println!(
        "| etcd connections dialled | {:.1} per minute |",
        (dials_after - dials_before) as f64 / minutes
    );
    println!(
        "| the {} etcd processes, together | {:.1} % of one core, {etcd_memory:.0} MiB resident |",
        etcds.len(),
        100.0 * (etcd_after - etcd_before) / IDLE_WINDOW.as_secs_f64()
    );
    if let (Some(pid), Some(before), Some(after)) = (hub, hub_before, hub_after) {
        println!(
            "| the simulator's hub, holding every member | {:.1} % of one core, {:.0} MiB resident |",
            100.0 * (after - before) / IDLE_WINDOW.as_secs_f64(),
            try_memory_mib(pid, "VmRSS").unwrap_or(f64::NAN)
        );
    }
    let among = reaction(cluster, "idle-0", &victim, members).await;
    println!("| a member's Pod deleted, until all {members} ready: alone | {alone:.2} s |");
    println!(
        "| the same among {} other idle clusters | {among:.2} s ({:.2}x) |",
        count - 1,
        among / alone
    );
    println!("(the machine's load average at the end: {:.1})", load());
}
