//! Alarm remediation end to end, with the operator deployed from `deploy/` and real etcd
//! 3.4.23 and 3.5.1 clusters of three members in one sandbox, the client workload writing
//! through each cluster's Service the whole time:
//!
//! - CORRUPT raised through etcd's alarm API (Alarm ACTIVATE) against a follower: the member
//!   goes to Replacing, is removed from etcd, the alarm is disarmed, and a new member (a new
//!   etcd ID under the same name) joins empty as a learner and is promoted; the other two keep
//!   their IDs;
//! - the same against the leader: leadership is handed over first (a LeaderMoved Event), then
//!   the same replacement;
//! - no acknowledged write is lost, and writes are accepted again afterwards.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use etcd_client::{AlarmAction, AlarmOptions, AlarmType};
use k8s_openapi::api::core::v1::Event;
use kube::api::ListParams;
use kube::{Api, Client};
use support::cluster::{Cluster, client_endpoint, start_cluster};
use support::workload::{Workload, cluster_client};
use support::{cluster_yaml, create_namespace, eventually, get_cluster, members};

const NS: &str = "recovery";
const CONVERGE: Duration = Duration::from_secs(180);
const REMEDY: Duration = Duration::from_secs(180);

/// `name → etcd member ID (hex)` from the EtcdMembers' status.
async fn recorded_ids(client: &Client, cluster: &str) -> BTreeMap<String, String> {
    members(client, NS, cluster)
        .await
        .into_iter()
        .map(|m| {
            (
                m.metadata.name.clone().unwrap_or_default(),
                m.status.and_then(|s| s.member_id).unwrap_or_default(),
            )
        })
        .collect()
}

/// `(name, reason, message)` of the Events about EtcdCluster `cluster`, oldest first (each
/// Event the operator records is a new object stamped to the microsecond).
async fn cluster_events(client: &Client, cluster: &str) -> Vec<(String, String, String)> {
    let mut events: Vec<Event> = Api::<Event>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await
        .expect("listing Events")
        .items
        .into_iter()
        .filter(|e| {
            e.involved_object.kind.as_deref() == Some("EtcdCluster")
                && e.involved_object.name.as_deref() == Some(cluster)
        })
        .collect();
    events.sort_by_key(|e| e.event_time.clone().map(|t| t.0));
    events
        .into_iter()
        .map(|e| {
            (
                e.metadata.name.unwrap_or_default(),
                e.reason.unwrap_or_default(),
                e.message.unwrap_or_default(),
            )
        })
        .collect()
}

/// Alarm ACTIVATE CORRUPT against member `id`, through the cluster's Service.
async fn raise_corrupt(cluster: &Cluster, name: &str, id: u64) {
    let mut client = cluster_client(&cluster.network, &client_endpoint(NS, name), None)
        .await
        .expect("an etcd client in the cluster network");
    let mut options = AlarmOptions::new();
    options.with_member(id);
    client
        .alarm(AlarmAction::Activate, AlarmType::Corrupt, Some(options))
        .await
        .expect("Alarm ACTIVATE CORRUPT");
}

/// CORRUPT against the member `victim` of cluster `name` (3 members): it is replaced by a new
/// member under the same name, the others keep their IDs, the alarm is gone.
async fn corrupt_member_is_replaced(cluster: &Cluster, name: &str, victim: &str, leader: bool) {
    let client = cluster.client();
    let before = recorded_ids(&client, name).await;
    let old_id = before[victim].clone();
    assert!(!old_id.is_empty(), "{before:?}");
    let seen: std::collections::BTreeSet<String> = cluster_events(&client, name)
        .await
        .into_iter()
        .map(|(n, _, _)| n)
        .collect();

    raise_corrupt(cluster, name, u64::from_str_radix(&old_id, 16).unwrap()).await;
    let alarms = tokio::task::block_in_place(|| {
        cluster.etcdctl(&client_endpoint(NS, name), &["alarm", "list"])
    })
    .expect("alarm list");
    assert!(alarms.contains("CORRUPT"), "{alarms}");
    eprintln!("{name}: CORRUPT raised against {victim} ({old_id})");
    let raised = std::time::Instant::now();

    // The member is removed, the alarm disarmed, and a new member of that name joins.
    eventually(
        &format!("{name}: {victim} replaced and CORRUPT disarmed"),
        REMEDY,
        || async {
            let alarms = tokio::task::block_in_place(|| {
                cluster.etcdctl(&client_endpoint(NS, name), &["alarm", "list"])
            })?;
            if alarms.contains("CORRUPT") {
                return Err(format!("still armed: {alarms}"));
            }
            let listed = cluster.etcd_members(NS, name)?;
            let ids: Vec<&str> = listed.iter().map(|(_, id, _)| id.as_str()).collect();
            if ids.contains(&old_id.as_str()) {
                return Err(format!("{old_id} still in etcd: {listed:?}"));
            }
            cluster.membership_agrees(NS, name, 3).await
        },
    )
    .await;
    cluster.wait_converged(NS, name, 3, CONVERGE).await;
    eprintln!(
        "{name}: {victim} replaced in {:.1} s",
        raised.elapsed().as_secs_f64()
    );

    let after = recorded_ids(&client, name).await;
    for (member, id) in &before {
        if member == victim {
            assert_ne!(&after[member], id, "{victim} kept its corrupt identity");
        } else {
            assert_eq!(
                &after[member], id,
                "{member} was touched: {before:?} → {after:?}"
            );
        }
    }

    let events: Vec<(String, String)> = cluster_events(&client, name)
        .await
        .into_iter()
        .filter(|(n, _, _)| !seen.contains(n))
        .map(|(_, r, m)| (r, m))
        .collect();
    let reasons: Vec<&str> = events.iter().map(|(r, _)| r.as_str()).collect();
    let position = |reason: &str| {
        reasons
            .iter()
            .position(|r| *r == reason)
            .unwrap_or_else(|| panic!("no {reason} Event: {events:?}"))
    };
    // Removed, then disarmed, then the new member joins as a learner and is promoted.
    let removed = position("MemberRemoved");
    let disarmed = position("AlarmDisarmed");
    let added = position("LearnerAdded");
    let promoted = position("LearnerPromoted");
    assert!(
        removed < disarmed && disarmed < added && added < promoted,
        "{events:?}"
    );
    if leader {
        assert!(position("LeaderMoved") < removed, "{events:?}");
    }
    let removals = reasons.iter().filter(|r| **r == "MemberRemoved").count();
    assert_eq!(removals, 1, "one member removed: {events:?}");
    assert!(
        events[removed].1.contains(victim),
        "the removal names {victim}: {events:?}"
    );
}

async fn leader_and_follower(client: &Client, name: &str) -> (String, String) {
    let leader = get_cluster(client, NS, name)
        .await
        .status
        .and_then(|s| s.leader)
        .expect("a leader in the status");
    let follower = recorded_ids(client, name)
        .await
        .into_keys()
        .find(|m| *m != leader)
        .expect("a follower");
    (leader, follower)
}

async fn corrupt_scenario(cluster: &Cluster, name: &str) {
    let client = cluster.client();
    let workload = Workload::start(
        cluster.network.clone(),
        NS,
        name,
        &format!("{name}-corrupt"),
    );

    let (_, follower) = leader_and_follower(&client, name).await;
    corrupt_member_is_replaced(cluster, name, &follower, false).await;

    let (leader, _) = leader_and_follower(&client, name).await;
    corrupt_member_is_replaced(cluster, name, &leader, true).await;

    cluster.put(NS, name, "after-corrupt", "v");
    let report = workload.stop().await;
    report.assert_no_loss();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn e2e_recovery_corrupt_on_3_4_and_3_5() {
    let cluster = start_cluster(3).await;
    cluster.deploy_operator(1).await;
    let client = cluster.client();
    create_namespace(&client, NS).await;
    cluster.apply(&cluster_yaml("v34", NS, 3, "").replace("3.5.1", "3.4.23"));
    cluster.apply(&cluster_yaml("v35", NS, 3, ""));
    cluster.wait_converged(NS, "v34", 3, CONVERGE).await;
    cluster.wait_converged(NS, "v35", 3, CONVERGE).await;

    tokio::join!(
        corrupt_scenario(&cluster, "v34"),
        corrupt_scenario(&cluster, "v35")
    );
}
