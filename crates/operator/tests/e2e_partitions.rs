//! Partitions, an operator cut off, and an impaired network, end to end (issue 13, item 6).
//! One sandbox, the operator deployed from `deploy/` with the short repair settings of the
//! healing tests (a Pod not ready for 20 s is recreated: `--not-ready-grace-seconds=20`), four
//! 3-member clusters at once, each under the client workload (writes and read-backs through its
//! client Service), every fault held well past that grace:
//!
//! - `cut` (etcd 3.4.23, namespace `cutoff`): the operator's Pod cut off from every Pod of the
//!   namespace, both ways (the sandbox's `isolate` fault: packets dropped, connections hang),
//!   while the members stay healthy. The status says the operator cannot reach etcd
//!   (`Available`/`Degraded` `Unknown`, reason `EtcdUnreachable`, a Warning Event); after the
//!   cut is healed the cluster is Available again on its own;
//! - `lead` (3.5.1): the leader cut off from both followers (`isolate` with the two follower
//!   Pods): the followers elect another leader; the old one, which still answers the operator,
//!   is reported isolated (`Isolated` on its EtcdMember, `MemberIsolated` on the cluster and in
//!   a Warning Event);
//! - `foll` (3.4.23, no pre-vote): one follower partitioned from both peers (the `partition`
//!   fault): reported isolated the same way;
//! - `imp` (3.5.1): a follower, then the leader, with delayed and lossy links (the `impair`
//!   fault: 150-250 ms and 10 % loss, then 80-120 ms and 5 %); the delay is measured on the
//!   member's answers.
//!
//! In every scenario: no member is removed, replaced or recreated and no Pod deleted or created
//! (no such Event of the operator, the same etcd member IDs, the same Pod UIDs), every cluster
//! converges after the heal, and no acknowledged write is lost. The other clusters are served
//! by the same operator while it is cut off from `cutoff`.

use etcd_operator_e2e_support as support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube_sandbox::kubelet::Peers;
use kube_sandbox::network::Impairment;
use support::cluster::{Cluster, OPERATOR_NAMESPACE};
use support::events::cluster_events;
use support::healing::{OperatorDeployment, start_healing_cluster};
use support::status::cluster_condition;
use support::workload::Workload;
use support::{cluster_yaml, cluster_yaml_on, create_namespace, eventually, members};

const NS: &str = "partitions";
const CUT_NS: &str = "cutoff";
/// How long each partition and cut is held: more than twice the 20 s repair grace.
const HOLD: Duration = Duration::from_secs(45);
const CONVERGE: Duration = Duration::from_secs(180);
/// Operator Event reasons that change a member: none may appear during a partition.
const DESTRUCTIVE: &[&str] = &[
    "MemberPhaseChanged",
    "PodDeleted",
    "PodCreated",
    "MemberRemoved",
    "VolumeDeleted",
    "LearnerAdded",
    "MemberDeleted",
    "LeaderMoved",
    "QuorumRecoveryStarted",
];

/// What must not change: the etcd member IDs (etcd's list and the EtcdMembers') and the Pods.
#[derive(Debug, PartialEq)]
struct Identity {
    listed: Vec<(String, String, bool)>,
    recorded: Vec<(String, String)>,
    pods: BTreeMap<String, String>,
}

async fn identity(cluster: &Cluster, ns: &str, name: &str) -> Identity {
    let listed = eventually(
        &format!("{ns}/{name}: etcd's member list"),
        Duration::from_secs(60),
        || async { tokio::task::block_in_place(|| cluster.etcd_members(ns, name)) },
    )
    .await;
    let mut pods = BTreeMap::new();
    for m in members(&cluster.client(), ns, name).await {
        let member = m.metadata.name.unwrap_or_default();
        let pod = Api::<Pod>::namespaced(cluster.client(), ns)
            .get(&member)
            .await
            .expect("a member's Pod");
        pods.insert(member, pod.metadata.uid.unwrap_or_default());
    }
    Identity {
        listed,
        recorded: cluster.recorded_ids(ns, name).await,
        pods,
    }
}

/// The Events recorded since `seen` was taken.
async fn new_events(
    cluster: &Cluster,
    ns: &str,
    name: &str,
    seen: &[(String, String, String)],
) -> Vec<(String, String)> {
    cluster_events(&cluster.client(), ns, name)
        .await
        .into_iter()
        .filter(|(n, _, _)| !seen.iter().any(|(s, _, _)| s == n))
        .map(|(_, r, m)| (r, m))
        .collect()
}

/// Asserts that nothing destructive happened to `name` since `before` and `seen`.
async fn nothing_destroyed(
    cluster: &Cluster,
    ns: &str,
    name: &str,
    before: &Identity,
    seen: &[(String, String, String)],
) -> Vec<(String, String)> {
    let events = new_events(cluster, ns, name, seen).await;
    let destructive: Vec<&(String, String)> = events
        .iter()
        .filter(|(r, _)| DESTRUCTIVE.contains(&r.as_str()))
        .collect();
    assert!(
        destructive.is_empty(),
        "{ns}/{name}: the operator acted on a member: {destructive:?} (all: {events:?})"
    );
    let after = identity(cluster, ns, name).await;
    assert_eq!(&after, before, "{ns}/{name}: a member or Pod changed");
    events
}

/// The member of `name` whose Ready condition has `reason`, if any: (member, message).
async fn member_with_reason(
    cluster: &Cluster,
    ns: &str,
    name: &str,
    reason: &str,
) -> Option<(String, String)> {
    members(&cluster.client(), ns, name)
        .await
        .into_iter()
        .find_map(|m| {
            let c = m
                .status?
                .conditions?
                .into_iter()
                .find(|c| c.type_ == "Ready" && c.reason == reason)?;
            Some((m.metadata.name.unwrap_or_default(), c.message))
        })
}

async fn operator_pod(cluster: &Cluster) -> String {
    cluster
        .operator_pods()
        .await
        .into_iter()
        .find(|p| p.metadata.deletion_timestamp.is_none())
        .and_then(|p| p.metadata.name)
        .expect("the operator's Pod")
}

/// The operator cut off from every Pod of `cutoff` for [`HOLD`]: it says so, changes nothing,
/// and the cluster is Available again once the cut is healed.
async fn operator_cut_off(cluster: &Cluster) {
    let name = "cut";
    let workload = Workload::start(cluster.network.clone(), CUT_NS, name, "cut");
    let before = identity(cluster, CUT_NS, name).await;
    let seen = cluster_events(&cluster.client(), CUT_NS, name).await;
    let operator = operator_pod(cluster).await;
    let cut_from = cluster
        .kubelet
        .cut_pod_off(OPERATOR_NAMESPACE, &operator, Peers::namespace(CUT_NS))
        .await
        .expect("cutting the operator off");
    assert_eq!(cut_from, 3, "the three members' Pods");
    let cut = Instant::now();
    let (status, reason, message) = eventually(
        "cut: the status says the operator cannot reach etcd",
        Duration::from_secs(90),
        || async {
            match cluster_condition(&cluster.client(), CUT_NS, name, "Available").await {
                Some(c) if c.0 == "Unknown" && c.1 == "EtcdUnreachable" => Ok(c),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    eprintln!(
        "cut: after {:.1} s Available {status}/{reason}: {message}",
        cut.elapsed().as_secs_f64()
    );
    assert!(message.contains("cut-0, cut-1, cut-2"), "{message}");
    let degraded = cluster_condition(&cluster.client(), CUT_NS, name, "Degraded")
        .await
        .unwrap();
    assert_eq!(
        (degraded.0.as_str(), degraded.1.as_str()),
        ("Unknown", "EtcdUnreachable")
    );
    // The members serve their clients all along: written directly, not through the operator.
    cluster.put(CUT_NS, name, "during-cut", "v");
    tokio::time::sleep(HOLD.saturating_sub(cut.elapsed())).await;
    let events = nothing_destroyed(cluster, CUT_NS, name, &before, &seen).await;
    if !events.iter().any(|(r, _)| r == "EtcdUnreachable") {
        panic!(
            "a Warning says it: {events:?}; all Events: {:?}\noperator logs:\n{}",
            cluster_events(&cluster.client(), CUT_NS, name).await,
            cluster.operator_logs().await
        );
    }
    assert!(
        cluster
            .kubelet
            .heal_pod_cut(OPERATOR_NAMESPACE, &operator)
            .await
            .expect("healing the cut"),
        "the operator's Pod was cut off"
    );
    eprintln!("cut: healed after {:.1} s", cut.elapsed().as_secs_f64());
    cluster.wait_converged(CUT_NS, name, 3, CONVERGE).await;
    nothing_destroyed(cluster, CUT_NS, name, &before, &seen).await;
    workload.stop().await.assert_no_loss();
}

/// Member `victim` of `name` cut off from its peers by `cut` for [`HOLD`], then `heal`: it
/// is reported isolated and left alone.
async fn isolated_member(
    cluster: &Cluster,
    name: &str,
    victim: &str,
    cut: impl std::future::Future<Output = ()>,
    heal: impl std::future::Future<Output = ()>,
) {
    let workload = Workload::start(cluster.network.clone(), NS, name, name);
    let before = identity(cluster, NS, name).await;
    let seen = cluster_events(&cluster.client(), NS, name).await;
    cut.await;
    let started = Instant::now();
    let (member, message) = eventually(
        &format!("{name}: {victim} reported isolated"),
        Duration::from_secs(90),
        || async {
            member_with_reason(cluster, NS, name, "Isolated")
                .await
                .ok_or_else(|| "no member Isolated yet".to_string())
        },
    )
    .await;
    assert_eq!(member, victim, "{message}");
    let degraded = eventually(
        &format!("{name}: Degraded MemberIsolated"),
        Duration::from_secs(30),
        || async {
            match cluster_condition(&cluster.client(), NS, name, "Degraded").await {
                Some(c) if c.0 == "True" && c.1 == "MemberIsolated" && c.2.contains(victim) => {
                    Ok(c.2)
                }
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    eprintln!(
        "{name}: {victim} isolated after {:.1} s; Degraded: {degraded}",
        started.elapsed().as_secs_f64()
    );
    tokio::time::sleep(HOLD.saturating_sub(started.elapsed())).await;
    // Past the grace period its Pod is not ready (no leader), and still nothing happened.
    let pod = cluster.member_pod(NS, victim).await.expect("its Pod");
    assert!(
        !support::cluster::pod_ready(&pod),
        "{name}: {victim}'s Pod should be not ready while it is isolated"
    );
    let events = nothing_destroyed(cluster, NS, name, &before, &seen).await;
    let warned = events
        .iter()
        .find(|(r, _)| r == "MemberIsolated")
        .unwrap_or_else(|| panic!("{name}: no MemberIsolated Event: {events:?}"));
    assert!(warned.1.contains(victim), "{warned:?}");
    heal.await;
    eprintln!(
        "{name}: healed after {:.1} s",
        started.elapsed().as_secs_f64()
    );
    cluster.wait_converged(NS, name, 3, CONVERGE).await;
    nothing_destroyed(cluster, NS, name, &before, &seen).await;
    workload.stop().await.assert_no_loss();
}

/// The leader of `lead` cut off from both followers.
async fn leader_cut_off(cluster: &Cluster) {
    let name = "lead";
    let leader = eventually("lead: its leader", Duration::from_secs(60), || async {
        tokio::task::block_in_place(|| cluster.leader(NS, name))
    })
    .await;
    let followers: Vec<String> = (0..3)
        .map(|i| format!("{name}-{i}"))
        .filter(|m| *m != leader)
        .collect();
    let peers: Vec<&str> = followers.iter().map(String::as_str).collect();
    let leader_ref = leader.as_str();
    isolated_member(
        cluster,
        name,
        leader_ref,
        async {
            let n = cluster
                .kubelet
                .cut_pod_off(NS, leader_ref, Peers::pods(NS, &peers))
                .await
                .expect("cutting the leader off");
            assert_eq!(n, 2);
        },
        async {
            cluster
                .kubelet
                .heal_pod_cut(NS, leader_ref)
                .await
                .expect("healing");
        },
    )
    .await;
}

/// A follower of `foll` partitioned from both peers.
async fn follower_partitioned(cluster: &Cluster) {
    let name = "foll";
    let leader = eventually("foll: its leader", Duration::from_secs(60), || async {
        tokio::task::block_in_place(|| cluster.leader(NS, name))
    })
    .await;
    let mut others: Vec<String> = (0..3).map(|i| format!("{name}-{i}")).collect();
    let victim = others
        .iter()
        .position(|m| *m != leader)
        .map(|i| others.remove(i))
        .unwrap();
    let set = |blocked: bool| {
        let (victim, others) = (&victim, &others);
        async move {
            for peer in others {
                cluster
                    .kubelet
                    .set_pods_partitioned(NS, victim, peer, blocked)
                    .await
                    .expect("partitioning");
            }
        }
    };
    isolated_member(cluster, name, &victim, set(true), set(false)).await;
}

/// How long `member` of `imp` takes to answer `endpoint health`.
fn answer_time(cluster: &Cluster, member: &str) -> Result<Duration, String> {
    let started = Instant::now();
    cluster.etcdctl(
        &format!("http://{member}.imp.{NS}.svc:2379"),
        &["--command-timeout=5s", "endpoint", "health"],
    )?;
    Ok(started.elapsed())
}

/// A follower, then the leader, of `imp` with delayed and lossy links.
async fn impaired_links(cluster: &Cluster) {
    let name = "imp";
    let workload = Workload::start(cluster.network.clone(), NS, name, name);
    let before = identity(cluster, NS, name).await;
    let seen = cluster_events(&cluster.client(), NS, name).await;
    let leader = eventually("imp: its leader", Duration::from_secs(60), || async {
        tokio::task::block_in_place(|| cluster.leader(NS, name))
    })
    .await;
    let follower = (0..3)
        .map(|i| format!("{name}-{i}"))
        .find(|m| *m != leader)
        .unwrap();
    let quick = tokio::task::block_in_place(|| answer_time(cluster, &follower))
        .expect("the follower answers");
    for (member, delay, loss, hold) in [
        (&follower, 200, 10.0, Duration::from_secs(30)),
        (&leader, 100, 5.0, Duration::from_secs(25)),
    ] {
        let impairment = Impairment {
            delay: Duration::from_millis(delay),
            jitter: Duration::from_millis(delay / 4),
            loss_percent: loss,
        };
        cluster
            .kubelet
            .impair_pod(NS, member, Some(impairment))
            .await
            .expect("impairing a member's link");
        let slow = eventually(
            &format!("imp: {member} answers through its impaired link"),
            Duration::from_secs(30),
            || async { tokio::task::block_in_place(|| answer_time(cluster, member)) },
        )
        .await;
        eprintln!(
            "imp: {member} with {delay} ms ± {} ms and {loss} % loss: endpoint health in {} ms (unimpaired {} ms)",
            delay / 4,
            slow.as_millis(),
            quick.as_millis()
        );
        assert!(
            slow >= Duration::from_millis(delay * 3 / 4),
            "the delay applies: {slow:?}"
        );
        tokio::time::sleep(hold).await;
        cluster
            .kubelet
            .impair_pod(NS, member, None)
            .await
            .expect("clearing the impairment");
    }
    cluster.wait_converged(NS, name, 3, CONVERGE).await;
    nothing_destroyed(cluster, NS, name, &before, &seen).await;
    workload.stop().await.assert_no_loss();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn e2e_partitions_an_operator_cut_off_and_impaired_links() {
    let started = Instant::now();
    let cluster = start_healing_cluster(3).await;
    cluster
        .deploy_operator_with(&OperatorDeployment::repairing())
        .await;
    let client = cluster.client();
    create_namespace(&client, NS).await;
    create_namespace(&client, CUT_NS).await;
    cluster.apply(&cluster_yaml_on("cut", CUT_NS, 3, "3.4.23", ""));
    cluster.apply(&cluster_yaml("lead", NS, 3, ""));
    cluster.apply(&cluster_yaml_on("foll", NS, 3, "3.4.23", ""));
    cluster.apply(&cluster_yaml("imp", NS, 3, ""));
    for (ns, name) in [(CUT_NS, "cut"), (NS, "lead"), (NS, "foll"), (NS, "imp")] {
        cluster.wait_converged(ns, name, 3, CONVERGE).await;
    }
    eprintln!(
        "four clusters up after {:.1} s",
        started.elapsed().as_secs_f64()
    );
    // `E2E_PARTITIONS_ONLY=cut,lead,foll,imp` runs only those (for working on them).
    let only = std::env::var("E2E_PARTITIONS_ONLY").unwrap_or_default();
    let run = |name: &str| only.is_empty() || only.split(',').any(|o| o == name);
    tokio::join!(
        async {
            if run("cut") {
                operator_cut_off(&cluster).await
            }
        },
        async {
            if run("lead") {
                leader_cut_off(&cluster).await
            }
        },
        async {
            if run("foll") {
                follower_partitioned(&cluster).await
            }
        },
        async {
            if run("imp") {
                impaired_links(&cluster).await
            }
        },
    );
    eprintln!("done after {:.1} s", started.elapsed().as_secs_f64());
}
