//! Alarm remediation end to end, with the operator deployed from `deploy/` and real etcd
//! clusters of three members in one sandbox (CORRUPT on 3.4.23 and the default 3.6.17,
//! NOSPACE on 3.4.23 and 3.7.4), the client workload writing through each cluster's Service
//! the whole time:
//!
//! - CORRUPT raised through etcd's alarm API (Alarm ACTIVATE) against a follower: the member
//!   goes to Replacing, is removed from etcd, the alarm is disarmed, and a new member (a new
//!   etcd ID under the same name) joins empty as a learner and is promoted; the other two keep
//!   their IDs;
//! - the same against the leader: leadership is handed over first (a LeaderMoved Event), then
//!   the same replacement;
//! - NOSPACE on clusters with an 8 MiB quota filled with overwritten keys until etcd refuses
//!   writes: the operator compacts, defragments every member (the leader last) and disarms
//!   the alarm, and writes are accepted again; then filled with live data until refused: the
//!   operator says to raise the quota (a Warning) instead of looping; on 3.4 keys are deleted
//!   and it remedies and disarms, on 3.7 the quota is raised in the spec, rolled to the members
//!   one at a time under the alarm, and the alarm disarmed; `status.noSpaceRemediation` records
//!   each remediation's phase and every member's backend before and after;
//! - no acknowledged write is lost, and writes are accepted again afterwards.
//!
//! Partitions (a leader cut off, a follower isolated, the operator cut off, impaired links)
//! are in `e2e_partitions.rs`.

use etcd_operator_e2e_support as support;

use std::collections::BTreeMap;
use std::time::Duration;

use etcd_client::{AlarmAction, AlarmOptions, AlarmType};
use etcd_operator_api::cluster::{NoSpacePhase, NoSpaceRemediationStatus};
use kube::{Api, Client};
use support::cluster::{Cluster, client_endpoint, start_cluster};
use support::events::cluster_events;
use support::workload::{Workload, cluster_client};
use support::{cluster_yaml, cluster_yaml_on, create_namespace, eventually, get_cluster, members};

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

/// Alarm ACTIVATE CORRUPT against member `id`, through the cluster's Service; etcd answers
/// with the alarm it activated.
async fn raise_corrupt(cluster: &Cluster, name: &str, id: u64) {
    let mut client = cluster_client(&cluster.network, &client_endpoint(NS, name), None)
        .await
        .expect("an etcd client in the cluster network");
    let mut options = AlarmOptions::new();
    options.with_member(id);
    let response = client
        .alarm(AlarmAction::Activate, AlarmType::Corrupt, Some(options))
        .await
        .expect("Alarm ACTIVATE CORRUPT");
    assert!(
        response
            .alarms()
            .iter()
            .any(|a| a.member_id() == id && a.alarm() == AlarmType::Corrupt),
        "{name}: etcd did not activate CORRUPT on {id:x}: {:?}",
        response
            .alarms()
            .iter()
            .map(|a| (a.member_id(), a.alarm()))
            .collect::<Vec<_>>()
    );
}

/// CORRUPT against the member `victim` of cluster `name` (3 members): it is replaced by a new
/// member under the same name, the others keep their IDs, the alarm is gone.
async fn corrupt_member_is_replaced(cluster: &Cluster, name: &str, victim: &str, leader: bool) {
    let client = cluster.client();
    let before = recorded_ids(&client, name).await;
    let old_id = before[victim].clone();
    assert!(!old_id.is_empty(), "{before:?}");
    let seen: std::collections::BTreeSet<String> = cluster_events(&client, NS, name)
        .await
        .into_iter()
        .map(|(n, _, _)| n)
        .collect();

    raise_corrupt(cluster, name, u64::from_str_radix(&old_id, 16).unwrap()).await;
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

    let events: Vec<(String, String)> = cluster_events(&client, NS, name)
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

/// The backend quota of the NOSPACE clusters: 8 MiB.
const SMALL_QUOTA: i64 = 8 << 20;

/// Puts 64 KiB values until etcd refuses (at most 400 of them): over five keys when `live`
/// is `None`, else each under its own `live-<round>-N` key.
fn fill_until_refused(cluster: &Cluster, name: &str, live: Option<u32>) {
    let endpoint = member_endpoints(name);
    let key = match live {
        None => "k$((i % 5))".to_string(),
        Some(round) => format!("live-{round}-$i"),
    };
    if let Err(e) = cluster.put_64k_values(&endpoint, &key, 400, true) {
        panic!("{name}: {e} (its quota is 8 MiB)");
    }
}

/// The three members' own client URLs. Not the client Service: a member's readiness is etcd's
/// `/health`, which fails while any alarm is active, so under NOSPACE the Service has no
/// endpoints at all.
fn member_endpoints(name: &str) -> String {
    (0..3)
        .map(|i| format!("http://{name}-{i}.{name}.{NS}.svc:2379"))
        .collect::<Vec<_>>()
        .join(",")
}

fn etcdctl(cluster: &Cluster, name: &str, args: &[&str]) -> Result<String, String> {
    tokio::task::block_in_place(|| cluster.etcdctl(&member_endpoints(name), args))
}

/// Waits until NOSPACE is gone and a write is accepted.
async fn writes_accepted(cluster: &Cluster, name: &str, key: &str) {
    eventually(
        &format!("{name}: NOSPACE remedied and writes accepted"),
        REMEDY,
        || async {
            let alarms = etcdctl(cluster, name, &["alarm", "list"])?;
            if alarms.contains("NOSPACE") {
                let progressing = support::progressing(&cluster.client(), NS, name).await;
                let status = etcdctl(cluster, name, &["endpoint", "status", "-w", "table"]);
                return Err(format!(
                    "still armed: {alarms}; Progressing {progressing:?}; {status:?}"
                ));
            }
            etcdctl(cluster, name, &["put", key, "v"]).map(|_| ())
        },
    )
    .await;
}

/// Waits until the cluster's `status.noSpaceRemediation` is in `phase`.
async fn nospace_record(
    cluster: &Cluster,
    name: &str,
    phase: NoSpacePhase,
) -> NoSpaceRemediationStatus {
    let client = cluster.client();
    eventually(
        &format!("{name}: status.noSpaceRemediation {phase:?}"),
        Duration::from_secs(60),
        || async {
            let record = get_cluster(&client, NS, name)
                .await
                .status
                .and_then(|s| s.no_space_remediation);
            match record {
                Some(r) if r.phase == phase => Ok(r),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await
}

/// `raise_quota`: the live data over the quota is let through by a raised
/// `spec.options.quotaBackendBytes` (rolled out under the alarm) instead of deleted keys.
async fn nospace_scenario(cluster: &Cluster, name: &str, raise_quota: bool) {
    let client = cluster.client();
    let workload = Workload::start(
        cluster.network.clone(),
        NS,
        name,
        &format!("{name}-nospace"),
    );
    let seen: std::collections::BTreeSet<String> = cluster_events(&client, NS, name)
        .await
        .into_iter()
        .map(|(n, _, _)| n)
        .collect();
    let ids_before = recorded_ids(&client, name).await;

    // Overwritten keys: compaction and defragmentation reclaim the space.
    // etcd refused a write: NOSPACE is raised (the Events below show the operator disarm it).
    fill_until_refused(cluster, name, None);
    let raised = std::time::Instant::now();
    writes_accepted(cluster, name, "after-nospace").await;
    eprintln!(
        "{name}: NOSPACE from overwritten keys remedied in {:.1} s",
        raised.elapsed().as_secs_f64()
    );
    let events: Vec<(String, String, String)> = cluster_events(&client, NS, name)
        .await
        .into_iter()
        .filter(|(n, _, _)| !seen.contains(n))
        .collect();
    let reasons: Vec<&str> = events.iter().map(|(_, r, _)| r.as_str()).collect();
    let compacted = reasons
        .iter()
        .position(|r| *r == "KeyspaceCompacted")
        .unwrap_or_else(|| panic!("no compaction: {events:?}"));
    let defrags: Vec<&(String, String, String)> = events
        .iter()
        .filter(|(_, r, _)| r == "MemberDefragmented")
        .collect();
    assert_eq!(
        defrags.len(),
        3,
        "every member defragmented once: {events:?}"
    );
    assert!(
        defrags[2].2.contains("leader") && !defrags[0].2.contains("leader"),
        "followers first, the leader last: {defrags:?}"
    );
    let first_defrag = reasons
        .iter()
        .position(|r| *r == "MemberDefragmented")
        .unwrap();
    let disarmed = reasons
        .iter()
        .rposition(|r| *r == "AlarmDisarmed")
        .unwrap_or_else(|| panic!("not disarmed by the operator: {events:?}"));
    assert!(
        compacted < first_defrag && first_defrag < disarmed,
        "{events:?}"
    );
    // The status tells the same story: remedied, each member's backend before and after.
    let record = nospace_record(cluster, name, NoSpacePhase::Remedied).await;
    assert_eq!(record.members.len(), 3, "{record:?}");
    assert!(record.compacted_revision.is_some(), "{record:?}");
    for m in &record.members {
        let (before, after) = (m.db_size_before.unwrap(), m.db_size_after.unwrap());
        assert!(after < before, "{name}: {} not smaller: {record:?}", m.name);
        eprintln!(
            "{name}: status.noSpaceRemediation {}: {before} -> {after} bytes (in use {:?}, quota {:?})",
            m.name, m.db_size_in_use, m.quota_bytes
        );
    }
    let first_start = record.started_at.clone();

    // Live data over the quota: reported, not looped; deleting keys lets it through.
    let seen: std::collections::BTreeSet<String> = cluster_events(&client, NS, name)
        .await
        .into_iter()
        .map(|(n, _, _)| n)
        .collect();
    // Each refusal is remedied as far as compaction and defragmentation go; once what is left
    // is live data over 90 % of the quota, the operator says so. Fill again while it could
    // still get below (bbolt's free pages after the fill can be reclaimed once or twice).
    let mut reported = None;
    for round in 1..=5 {
        fill_until_refused(cluster, name, Some(round));
        let outcome = eventually(
            &format!(
                "{name}: live data over the quota reported, or the alarm disarmed (round {round})"
            ),
            REMEDY,
            || async {
                let events = cluster_events(&client, NS, name).await;
                if let Some(e) = events.iter().find(|(n, r, m)| {
                    !seen.contains(n)
                        && r == "NoSpaceAlarm"
                        && m.contains("raise spec.options.quotaBackendBytes")
                }) {
                    return Ok(Some(e.2.clone()));
                }
                let alarms = etcdctl(cluster, name, &["alarm", "list"])?;
                if alarms.contains("NOSPACE") {
                    Err(format!("still armed, not reported: {events:?}"))
                } else {
                    Ok(None)
                }
            },
        )
        .await;
        if let Some(message) = outcome {
            eprintln!("{name}: reported after {round} fill(s): {message}");
            reported = Some(message);
            break;
        }
    }
    assert!(reported.is_some(), "{name}: live data never reported");
    let exceeded = nospace_record(cluster, name, NoSpacePhase::QuotaExceeded).await;
    assert!(
        exceeded
            .message
            .as_deref()
            .is_some_and(|m| m.contains("quotaBackendBytes")),
        "{exceeded:?}"
    );
    assert!(
        exceeded.started_at > first_start,
        "a new record: {exceeded:?}"
    );
    let before = cluster_events(&client, NS, name).await;
    let seen: std::collections::BTreeSet<String> =
        before.iter().map(|(n, _, _)| n.clone()).collect();
    // The revision each compaction named ("... compacted up to revision N ...").
    let compacted_at = |message: &str| -> Option<i64> {
        let rest = message.split("up to revision ").nth(1)?;
        rest.split_whitespace().next()?.parse().ok()
    };
    let compacted_before: Vec<i64> = before
        .iter()
        .filter(|(_, r, _)| r == "KeyspaceCompacted")
        .filter_map(|(_, _, m)| compacted_at(m))
        .collect();
    // A few passes later: still armed, no compaction or defragmentation loop.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let during: Vec<(String, String)> = cluster_events(&client, NS, name)
        .await
        .into_iter()
        .filter(|(n, _, _)| !seen.contains(n))
        .map(|(_, r, m)| (r, m))
        .collect();
    let alarms = eventually(
        &format!("{name}: the alarm list"),
        Duration::from_secs(30),
        || async { etcdctl(cluster, name, &["alarm", "list"]) },
    )
    .await;
    assert!(alarms.contains("NOSPACE"), "{name}: {alarms}");
    // etcd still accepts deletions under NOSPACE, and the workload deletes, so the revision can
    // move and a new compaction (then the defragmentations it calls for) is the remedy doing
    // its work. A loop is a revision compacted again, or defragmentation with nothing new
    // compacted.
    let new_compactions: Vec<i64> = during
        .iter()
        .filter(|(r, _)| r == "KeyspaceCompacted")
        .map(|(_, m)| compacted_at(m).unwrap_or_else(|| panic!("a revision in {m:?}")))
        .collect();
    let highest_before = compacted_before.iter().copied().max().unwrap_or(0);
    assert!(
        new_compactions.iter().all(|r| *r > highest_before),
        "looping: a revision compacted again (before: {compacted_before:?}): {during:?}"
    );
    let defrags = during
        .iter()
        .filter(|(r, _)| r == "MemberDefragmented")
        .count();
    assert!(
        defrags == 0 || !new_compactions.is_empty(),
        "looping: defragmentation with nothing new compacted: {during:?}"
    );
    if raise_quota {
        // The quota raised in the spec: rolled to the members one at a time under the alarm
        // (no key deleted), then the alarm disarmed.
        let raised = 4 * SMALL_QUOTA;
        let api: Api<etcd_operator_api::EtcdCluster> = Api::namespaced(client.clone(), NS);
        api.patch(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({
                "spec": {"options": {"quotaBackendBytes": raised}}
            })),
        )
        .await
        .unwrap();
        let started = std::time::Instant::now();
        writes_accepted(cluster, name, "after-raised-quota").await;
        eprintln!(
            "{name}: the quota raised to {raised} rolled out under NOSPACE and the alarm disarmed in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        let done = nospace_record(cluster, name, NoSpacePhase::Remedied).await;
        assert!(
            done.members.iter().all(|m| m.quota_bytes == Some(raised)),
            "{done:?}"
        );
    } else {
        eventually(
            &format!("{name}: deleting the live keys under NOSPACE"),
            Duration::from_secs(30),
            || async { etcdctl(cluster, name, &["del", "--prefix", "live-"]) },
        )
        .await;
        writes_accepted(cluster, name, "after-live-data").await;
        nospace_record(cluster, name, NoSpacePhase::Remedied).await;
    }

    assert_eq!(
        recorded_ids(&client, name).await,
        ids_before,
        "no member was replaced"
    );
    let report = workload.stop().await;
    report.assert_no_loss();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn e2e_recovery_alarms_on_3_4_3_6_and_3_7() {
    let cluster = start_cluster(3).await;
    cluster.deploy_operator(1).await;
    let client = cluster.client();
    create_namespace(&client, NS).await;
    cluster.apply(&cluster_yaml_on("v34", NS, 3, "3.4.23", ""));
    cluster.apply(&cluster_yaml("v35", NS, 3, ""));
    let quota = format!("  options:\n    quotaBackendBytes: {SMALL_QUOTA}\n");
    cluster.apply(&cluster_yaml_on("n34", NS, 3, "3.4.23", &quota));
    // The version matrix: NOSPACE on 3.4.23 and on the newest 3.7.
    cluster.apply(&cluster_yaml_on("n37", NS, 3, support::NEWEST_37, &quota));
    for name in ["v34", "v35", "n34", "n37"] {
        cluster.wait_converged(NS, name, 3, CONVERGE).await;
    }

    tokio::join!(
        corrupt_scenario(&cluster, "v34"),
        corrupt_scenario(&cluster, "v35"),
        nospace_scenario(&cluster, "n34", false),
        nospace_scenario(&cluster, "n37", true),
    );
}
