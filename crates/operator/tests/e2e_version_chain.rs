//! etcd's current minors end to end, on one sandbox, by the operator deployed from `deploy/`:
//!
//! 1. `chain`: 3 PVC-backed members created at 3.5.36 (at or above etcd's 3.5 → 3.6 floor,
//!    3.5.32) upgraded to 3.6.17, then to 3.7.4 (above the 3.6 → 3.7 floor, 3.6.11), with the
//!    client workload writing through the client Service the whole time: no acknowledged write
//!    lost, the same member IDs, every member's spec, Pod image and etcd's own answer on the
//!    new version after each step, the leader's Pod restarted last;
//! 2. `floor`: 3 members installed at 3.5.1 (below the floor) asked for 3.6.17: refused with
//!    `Progressing=False UpgradeRefused` and a Warning Event naming 3.5.32, the patch to take
//!    first, and the member still on 3.5.1; no Pod restarted, no member's version changed, and
//!    the cluster still takes writes.
//!
//! 3. `chainm`: the chain of 1. on 3 memory-backed members (each restart a replacement), at the
//!    same time as 1.;
//! 4. `down`: 3 PVC-backed members created at 3.6.17 downgraded to 3.5.36 under the workload
//!    through etcd's procedure (a `DowngradeEnabled` Event), leader last, same member IDs, no
//!    acknowledged write lost.

mod support;

use std::time::{Duration, Instant};

use support::cluster::{Cluster, start_cluster};
use support::rollouts::{leader, pods, restart_order, set_version, wait_all_on, warning_events};
use support::status::wait_condition;
use support::workload::Workload;
use support::{NEWEST_35, NEWEST_37, create_namespace, eventually, kubectl, members};

const LIMIT: Duration = Duration::from_secs(240);

/// Sets `version` and records the order in which members got a new Pod, until every member
/// runs it; returns (order, leader at the start).
async fn roll(cluster: &Cluster, namespace: &str, version: &str) -> (Vec<String>, String) {
    let first_leader = leader(cluster, namespace).await;
    let before = pods(cluster, namespace).await;
    set_version(cluster, namespace, version);
    let order = restart_order(cluster, namespace, &before, version, LIMIT, |order| {
        format!("etcd's logs:\n{}", etcd_logs(cluster, namespace, order))
    })
    .await;
    wait_all_on(cluster, namespace, 3, version, LIMIT).await;
    (order, first_leader)
}

/// The last lines each of `names`' etcd wrote (its previous container's, when it restarted).
fn etcd_logs(cluster: &Cluster, namespace: &str, names: &[String]) -> String {
    names
        .iter()
        .map(|name| {
            let (_, previous, _) = kubectl(
                cluster,
                &["-n", namespace, "logs", name, "--previous", "--tail=15"],
            );
            let (_, current, _) = kubectl(cluster, &["-n", namespace, "logs", name, "--tail=15"]);
            format!("--- {name} (previous)\n{previous}\n--- {name}\n{current}")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The floor refusal on the 3.5.1 cluster: refused, reported, nothing moved, still serving.
async fn floor_refused(cluster: &Cluster) {
    let before = pods(cluster, "floor").await;
    set_version(cluster, "floor", support::DEFAULT_VERSION);
    let message = wait_condition(
        &cluster.client(),
        "floor",
        "etcd",
        "Progressing",
        "False",
        Some("UpgradeRefused"),
        LIMIT,
    )
    .await;
    println!("floor: 3.5.1 -> 3.6.17 refused: {message}");
    for needed in [
        "3.5.32 or later",
        "runs 3.5.1",
        "Set spec.version to 3.5.32",
        "upgrade_3_6",
    ] {
        assert!(message.contains(needed), "{needed:?} in {message}");
    }
    let events = eventually("floor: the UpgradeRefused Event", LIMIT, || async {
        let events = warning_events(cluster, "floor", "UpgradeRefused");
        if events.contains("3.5.32") {
            Ok(events)
        } else {
            Err(events)
        }
    })
    .await;
    println!("floor: Event: {events}");
    // Some passes of the operator later, nothing has moved.
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(pods(cluster, "floor").await, before, "no Pod restarted");
    let specs: Vec<String> = members(&cluster.client(), "floor", "etcd")
        .await
        .into_iter()
        .map(|m| m.spec.version)
        .collect();
    assert_eq!(
        specs,
        vec!["3.5.1".to_string(); 3],
        "no member's version changed"
    );
    tokio::task::block_in_place(|| {
        cluster.put("floor", "etcd", "after-refusal", "written");
        assert_eq!(
            cluster.get("floor", "etcd", "after-refusal"),
            Ok(Some("written".to_string()))
        );
    });
}

/// `namespace`'s cluster 3.5.36 → 3.6.17 → 3.7.4 under the client workload: each rollout leader
/// last, every member on the new version (spec, image, etcd's answer); PVC-backed members keep
/// their etcd IDs (a memory-backed member's restart is a replacement).
async fn chain(cluster: &Cluster, namespace: &str, pvc: bool) {
    wait_all_on(cluster, namespace, 3, NEWEST_35, LIMIT).await;
    let ids = cluster.etcd_members(namespace, "etcd").unwrap();
    let workload = Workload::start(cluster.network.clone(), namespace, "etcd", namespace);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut previous = NEWEST_35;
    for version in [support::DEFAULT_VERSION, NEWEST_37] {
        let started = Instant::now();
        let (order, first_leader) = roll(cluster, namespace, version).await;
        println!(
            "{namespace}: {previous} -> {version} in {:.1} s, order {order:?} (leader at the start {first_leader})",
            started.elapsed().as_secs_f64()
        );
        assert_eq!(
            order.last(),
            Some(&first_leader),
            "{namespace}: the leader's Pod is restarted last"
        );
        if pvc {
            assert_eq!(
                cluster.etcd_members(namespace, "etcd").unwrap(),
                ids,
                "{namespace}: the members keep their etcd identities"
            );
        }
        previous = version;
    }
    let report = workload.stop().await;
    report.assert_no_loss();
    println!(
        "{namespace}: {NEWEST_35} -> 3.6.17 -> {NEWEST_37}: longest unavailability {} ms",
        report.longest_unavailable.as_millis(),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn e2e_3_5_to_3_6_to_3_7_and_the_floor() {
    let test_started = Instant::now();
    let cluster = start_cluster(3).await;
    cluster.deploy_operator(1).await;
    let client = cluster.client();
    for namespace in ["chain", "chainm", "floor", "down"] {
        create_namespace(&client, namespace).await;
    }
    tokio::task::block_in_place(|| {
        cluster.apply(&support::cluster_yaml_on("etcd", "chain", 3, NEWEST_35, ""));
        cluster.apply(&support::cluster_yaml_on(
            "etcd",
            "chainm",
            3,
            NEWEST_35,
            "  storage:\n    medium: Memory\n    size: 256Mi\n",
        ));
        cluster.apply(&support::cluster_yaml_on("etcd", "floor", 3, "3.5.1", ""));
        cluster.apply(&support::cluster_yaml_on(
            "etcd",
            "down",
            3,
            support::DEFAULT_VERSION,
            "",
        ));
    });
    for namespace in ["chain", "chainm", "floor", "down"] {
        cluster.wait_converged(namespace, "etcd", 3, LIMIT).await;
    }

    // Below the floor: refused, nothing moves; then both chains at once.
    floor_refused(&cluster).await;
    tokio::join!(
        chain(&cluster, "chain", true),
        chain(&cluster, "chainm", false)
    );

    // 4. A downgrade one minor down, 3.6.17 → 3.5.36, through etcd's procedure, under the
    //    workload: every member back on 3.5.36 (spec, image, etcd's answer), the same member
    //    IDs, leader last, no acknowledged write lost.
    wait_all_on(&cluster, "down", 3, support::DEFAULT_VERSION, LIMIT).await;
    let ids = cluster.etcd_members("down", "etcd").unwrap();
    let workload = Workload::start(cluster.network.clone(), "down", "etcd", "down");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let started = Instant::now();
    let (order, first_leader) = roll(&cluster, "down", NEWEST_35).await;
    let report = workload.stop().await;
    report.assert_no_loss();
    println!(
        "down: 3.6.17 -> {NEWEST_35} in {:.1} s, order {order:?} (leader at the start {first_leader}), longest unavailability {} ms",
        started.elapsed().as_secs_f64(),
        report.longest_unavailable.as_millis()
    );
    assert_eq!(order.last(), Some(&first_leader), "the leader's Pod last");
    assert_eq!(cluster.etcd_members("down", "etcd").unwrap(), ids);
    // It went through etcd's downgrade (validate + enable), not a bare binary swap.
    let (_, enabled, _) = kubectl(
        &cluster,
        &[
            "-n",
            "down",
            "get",
            "events",
            "--field-selector",
            "reason=DowngradeEnabled",
            "-o",
            "jsonpath={.items[*].message}",
        ],
    );
    println!("down: DowngradeEnabled: {enabled}");
    assert!(
        enabled.contains("3.5"),
        "a DowngradeEnabled Event: {enabled:?}"
    );
    println!("whole test {:.1} s", test_started.elapsed().as_secs_f64());
}
