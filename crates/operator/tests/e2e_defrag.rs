//! EtcdDefrag and EtcdDefragPolicy end to end, with the operator deployed from `deploy/` and
//! real etcd 3.4.23 and 3.6.17 clusters of three members in one sandbox: each is filled with
//! overwritten keys and compacted so its backend has free pages, then
//!
//! - an EtcdDefrag with `freeSpaceAbove: 1Gi` skips every member (BelowThreshold), while a
//!   second one with `all: true`, created with it, waits in the queue (Queued) and runs after
//!   it: every member defragmented, the file smaller after than before, the followers first
//!   and the leader last (as recorded in its status), and its `ttlSecondsAfterFinished`
//!   deletes it once finished;
//! - an EtcdDefragPolicy on a one-minute schedule creates an EtcdDefrag owned by it, which
//!   completes, and the policy's status records it;
//! - on a one-member 3.7.4 cluster with operator-issued certificates (mutual TLS) and
//!   authentication, an `all` run defragments the member through the operator's TLS client
//!   identity and root credentials;
//! - a run for a cluster that does not exist fails with ClusterNotFound and a Warning; a run
//!   for a paused cluster waits (ClusterPaused) and proceeds once the pause is lifted; a run
//!   while a member is frozen waits (ClusterNotHealthy, a Warning) without touching any member,
//!   and completes once the member answers again;
//! - a one-member cluster with an 8 MiB quota filled until etcd raises NOSPACE and refuses
//!   writes, then compacted: an `all` run defragments it below the quota and disarms the alarm,
//!   and writes are accepted again.

use etcd_operator_e2e_support as support;

use std::time::Duration;

use etcd_operator_api::defrag::{DefragOutcome, DefragPhase, MemberRole};
use etcd_operator_api::{EtcdDefrag, EtcdDefragPolicy};
use kube::api::ListParams;
use kube::{Api, Client};
use support::cluster::{Cluster, client_endpoint, start_cluster};
use support::events::{list_events, wait_event};
use support::workload::Workload;
use support::{
    cluster_yaml, cluster_yaml_on, condition, create_namespace, eventually, get_cluster, kubectl,
};

const NS: &str = "defrag";
const CONVERGE: Duration = Duration::from_secs(180);
const RUN: Duration = Duration::from_secs(90);
/// How long after the status shows an outcome its Event may take (it is recorded after the
/// status write).
const EVENT_LIMIT: Duration = Duration::from_secs(10);

/// Overwrites five keys with 64 KiB values 150 times, then compacts to the current revision:
/// about 9 MiB of the backend becomes free pages.
fn fill_and_compact(cluster: &Cluster, name: &str) {
    let endpoint = client_endpoint(NS, name);
    if let Err(e) = cluster.put_64k_values(&endpoint, "k$((i % 5))", 150, false) {
        panic!("filling {name}: {e}");
    }
    let out =
        tokio::task::block_in_place(|| cluster.etcdctl(&endpoint, &["get", "k0", "-w", "json"]))
            .expect("reading the revision");
    let revision = serde_json::from_str::<serde_json::Value>(&out).unwrap()["header"]["revision"]
        .as_i64()
        .expect("a revision");
    tokio::task::block_in_place(|| {
        cluster.etcdctl(&endpoint, &["compact", &revision.to_string(), "--physical"])
    })
    .expect("compacting");
}

fn defrag_yaml(name: &str, cluster: &str, rule: &str, ttl: Option<i32>) -> String {
    let ttl = ttl
        .map(|t| format!("  ttlSecondsAfterFinished: {t}\n"))
        .unwrap_or_default();
    format!(
        "apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdDefrag\nmetadata:\n  name: {name}\n  namespace: {NS}\nspec:\n  clusterRef:\n    name: {cluster}\n{ttl}  rule:\n{rule}"
    )
}

async fn finished(client: &Client, name: &str) -> EtcdDefrag {
    let api: Api<EtcdDefrag> = Api::namespaced(client.clone(), NS);
    eventually(&format!("EtcdDefrag {name} to finish"), RUN, || async {
        let d = api.get(name).await.map_err(|e| e.to_string())?;
        match d.status.as_ref().and_then(|s| s.phase) {
            Some(DefragPhase::Complete | DefragPhase::Failed) => Ok(d),
            _ => Err(format!("{:?}", d.status)),
        }
    })
    .await
}

/// The skip run, the queued `all` run after it, and the TTL, on cluster `name`.
async fn rules_queue_and_ttl(cluster: &Cluster, name: &str) {
    let client = cluster.client();
    let skip = format!("{name}-a-skip");
    let all = format!("{name}-b-all");
    // Clients keep reading and writing while every member is defragmented (a member blocks
    // while it defragments): the history checker proves what they saw.
    let workload = Workload::start(cluster.network.clone(), NS, name, &format!("{name}-defrag"));
    // One kubectl apply: both created in the same instant, the queue orders them by name.
    cluster.apply(&format!(
        "{}\n---\n{}",
        defrag_yaml(&skip, name, "    freeSpaceAbove: 1Gi\n", None),
        defrag_yaml(&all, name, "    all: true\n", Some(5))
    ));

    let skipped = finished(&client, &skip).await;
    let status = skipped.status.clone().unwrap();
    assert_eq!(status.phase, Some(DefragPhase::Complete), "{status:?}");
    let rows = status.members.clone().unwrap();
    assert_eq!(rows.len(), 3, "{rows:?}");
    for row in &rows {
        assert_eq!(row.outcome, Some(DefragOutcome::Skipped), "{row:?}");
        assert_eq!(row.reason.as_deref(), Some("BelowThreshold"), "{row:?}");
        assert!(row.db_size_before.unwrap() > 0, "{row:?}");
    }
    assert_eq!(status.defragmented.unwrap_or(0), 0);

    let done = finished(&client, &all).await;
    workload.stop().await.assert_no_loss();
    let status = done.status.clone().unwrap();
    assert_eq!(status.phase, Some(DefragPhase::Complete), "{status:?}");
    assert_eq!(status.defragmented, Some(3), "{status:?}");
    let rows = status.members.clone().unwrap();
    let roles: Vec<_> = rows.iter().map(|r| r.role).collect();
    assert_eq!(
        roles,
        [
            Some(MemberRole::Follower),
            Some(MemberRole::Follower),
            Some(MemberRole::Leader)
        ],
        "followers first, the leader last: {rows:?}"
    );
    // The member recorded as the leader is the one the cluster reports leading (leadership
    // does not move on its own in a healthy sandbox).
    let leader = get_cluster(&client, NS, name).await.status.unwrap().leader;
    assert_eq!(leader.as_deref(), Some(rows[2].name.as_str()), "{rows:?}");
    for pair in rows.windows(2) {
        assert!(pair[0].finished_at <= pair[1].finished_at, "{rows:?}");
    }
    for row in &rows {
        assert_eq!(row.outcome, Some(DefragOutcome::Defragmented), "{row:?}");
        let (before, after) = (row.db_size_before.unwrap(), row.db_size_after.unwrap());
        eprintln!(
            "{name} {} ({:?}): {before} → {after} bytes",
            row.name, row.role
        );
        assert!(after < before, "{}: {before} → {after}", row.name);
        assert_eq!(row.reclaimed_bytes, Some(before - after));
        // About 9 MiB of overwritten values were compacted away.
        assert!(
            before - after > 4 << 20,
            "{}: reclaimed {}",
            row.name,
            before - after
        );
    }
    // It waited for the first: queued, and started only once the first had finished.
    wait_event(&client, NS, None, &all, None, "Queued", EVENT_LIMIT).await;
    assert!(
        status.started_at.unwrap() >= skipped.status.unwrap().completed_at.unwrap(),
        "the queued run started before the first finished"
    );
    for reason in ["DefragStarted", "MemberDefragmented", "DefragComplete"] {
        wait_event(&client, NS, None, &all, None, reason, EVENT_LIMIT).await;
    }

    // ttlSecondsAfterFinished: 5 deletes it; the first, without a TTL, stays.
    let api: Api<EtcdDefrag> = Api::namespaced(client.clone(), NS);
    eventually(
        &format!("{all} to be deleted by its TTL"),
        Duration::from_secs(30),
        || async {
            match api.get_opt(&all).await {
                Ok(None) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    assert!(api.get_opt(&skip).await.unwrap().is_some());
}

/// A one-member cluster `tls` in `defrag-tls`: operator-issued certificates on both listeners
/// (mutual TLS) and authentication with the root password of the Secret `tls-root`.
/// On the newest 3.7 (maintenance calls under auth need the root user from 3.6 on).
fn start_tls_auth_cluster(cluster: &Cluster) {
    let version = support::NEWEST_37;
    support::create_root_secret(cluster, TLS_NS, "tls-root", "defrag-test-password");
    cluster.apply(&format!(
        "apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdCluster\nmetadata:\n  name: tls\n  namespace: {TLS_NS}\nspec:\n  replicas: 1\n  version: \"{version}\"\n  tls:\n    client:\n      operatorIssued: {{}}\n    peer:\n      operatorIssued: {{}}\n  auth:\n    enabled: true\n    rootCredentialsSecretRef:\n      name: tls-root\n"
    ));
}

const TLS_NS: &str = "defrag-tls";

/// The backend quota of the cluster `nospace`: 8 MiB.
const SMALL_QUOTA: i64 = 8 << 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn e2e_defrag_rules_queue_ttl_and_policy_on_3_4_3_6_and_3_7() {
    let cluster = start_cluster(3).await;
    cluster.deploy_operator(1).await;
    let client = cluster.client();
    create_namespace(&client, NS).await;
    create_namespace(&client, TLS_NS).await;
    cluster.apply(&cluster_yaml_on("v34", NS, 3, "3.4.23", ""));
    cluster.apply(&cluster_yaml("v35", NS, 3, ""));
    start_tls_auth_cluster(&cluster);
    // The operator's own NOSPACE remediation is turned off for this cluster: the EtcdDefrag
    // run is what must disarm the alarm here (e2e_recovery.rs tests the automatic one).
    cluster.apply(
        &cluster_yaml(
            "nospace",
            NS,
            1,
            &format!("  options:\n    quotaBackendBytes: {SMALL_QUOTA}\n"),
        )
        .replace(
            "\nspec:\n",
            "\n  annotations:\n    etcd-operator.cozystack.io/nospace-remediation: manual\nspec:\n",
        ),
    );
    cluster.wait_converged(NS, "v34", 3, CONVERGE).await;
    cluster.wait_converged(NS, "v35", 3, CONVERGE).await;
    fill_and_compact(&cluster, "v34");
    fill_and_compact(&cluster, "v35");

    rules_queue_and_ttl(&cluster, "v34").await;

    // The policy on 3.4.23 ticks while 3.6.17 runs its own.
    cluster.apply(&format!(
        "apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdDefragPolicy\nmetadata:\n  name: every-minute\n  namespace: {NS}\nspec:\n  clusterRef:\n    name: v34\n  schedule: \"* * * * *\"\n  historyLimit: 2\n  rule:\n    all: true\n"
    ));
    rules_queue_and_ttl(&cluster, "v35").await;

    tls_auth_run(&cluster).await;
    missing_and_paused_clusters(&cluster).await;
    gated_on_health(&cluster).await;
    nospace_disarmed(&cluster).await;

    let policies: Api<EtcdDefragPolicy> = Api::namespaced(client.clone(), NS);
    let policy = eventually(
        "the policy to record a successful run",
        Duration::from_secs(150),
        || async {
            let p = policies
                .get("every-minute")
                .await
                .map_err(|e| e.to_string())?;
            let status = p.status.clone().unwrap_or_default();
            if status.last_schedule_time.is_some() && status.last_successful_time.is_some() {
                Ok(p)
            } else {
                Err(format!("{status:?}"))
            }
        },
    )
    .await;
    let uid = policy.metadata.uid.clone().unwrap();
    let stamped: Vec<EtcdDefrag> = Api::<EtcdDefrag>::namespaced(client.clone(), NS)
        .list(
            &ListParams::default().labels("etcd-operator.cozystack.io/defrag-policy=every-minute"),
        )
        .await
        .unwrap()
        .items;
    let complete: Vec<&EtcdDefrag> = stamped
        .iter()
        .filter(|d| d.status.as_ref().and_then(|s| s.phase) == Some(DefragPhase::Complete))
        .collect();
    assert!(!complete.is_empty(), "no complete run among {stamped:?}");
    for run in &stamped {
        let owner = &run.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.uid.as_str(), owner.controller),
            (uid.as_str(), Some(true))
        );
        assert_eq!(run.spec.cluster_ref.name, "v34");
        assert_eq!(run.spec.rule.as_ref().unwrap().all, Some(true));
    }
    let run = complete[0].status.clone().unwrap();
    assert_eq!(run.members.unwrap().len(), 3);
    wait_event(
        &client,
        NS,
        None,
        "every-minute",
        None,
        "RunCreated",
        EVENT_LIMIT,
    )
    .await;
}

/// An `all` run on the TLS and authentication cluster.
async fn tls_auth_run(cluster: &Cluster) {
    let client = cluster.client();
    // wait_converged asks etcd in plaintext; the cluster's own status says it here.
    eventually("the TLS cluster to be Available", CONVERGE, || async {
        let c = get_cluster(&client, TLS_NS, "tls").await;
        let ready = c.status.as_ref().and_then(|s| s.ready_members);
        if condition(&c, "Available").as_deref() == Some("True") && ready == Some(1) {
            Ok(())
        } else {
            Err(format!("{:?}", c.status))
        }
    })
    .await;
    cluster.apply(&format!(
        "apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdDefrag\nmetadata:\n  name: secure\n  namespace: {TLS_NS}\nspec:\n  clusterRef:\n    name: tls\n  rule:\n    all: true\n"
    ));
    let api: Api<EtcdDefrag> = Api::namespaced(client.clone(), TLS_NS);
    let done = eventually("the TLS run to finish", RUN, || async {
        let d = api.get("secure").await.map_err(|e| e.to_string())?;
        match d.status.as_ref().and_then(|s| s.phase) {
            Some(DefragPhase::Complete | DefragPhase::Failed) => Ok(d),
            _ => Err(format!("{:?}", d.status)),
        }
    })
    .await;
    let status = done.status.unwrap();
    assert_eq!(status.phase, Some(DefragPhase::Complete), "{status:?}");
    let rows = status.members.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(
        rows[0].outcome,
        Some(DefragOutcome::Defragmented),
        "{rows:?}"
    );
    assert_eq!(rows[0].role, Some(MemberRole::Leader));
    assert!(rows[0].db_size_after.is_some(), "{rows:?}");
    // The password is in no Event of the run.
    let events = list_events(&client, TLS_NS).await;
    assert!(
        events.iter().all(|e| !e
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("defrag-test-password")),
        "a password in an Event"
    );
}

/// The `DefragChecked` condition's reason and the phase of run `name`.
async fn reason_and_phase(client: &Client, name: &str) -> (Option<String>, Option<DefragPhase>) {
    let d = Api::<EtcdDefrag>::namespaced(client.clone(), NS)
        .get(name)
        .await
        .expect("the EtcdDefrag");
    let status = d.status.unwrap_or_default();
    let reason = status
        .conditions
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "DefragChecked")
        .map(|c| c.reason);
    (reason, status.phase)
}

async fn missing_and_paused_clusters(cluster: &Cluster) {
    let client = cluster.client();
    cluster.apply(&defrag_yaml(
        "ghost",
        "no-such-cluster",
        "    all: true\n",
        None,
    ));
    let ghost = finished(&client, "ghost").await;
    assert_eq!(
        ghost.status.as_ref().unwrap().phase,
        Some(DefragPhase::Failed)
    );
    assert_eq!(
        reason_and_phase(&client, "ghost").await.0.as_deref(),
        Some("ClusterNotFound")
    );
    wait_event(
        &client,
        NS,
        None,
        "ghost",
        None,
        "ClusterNotFound",
        EVENT_LIMIT,
    )
    .await;

    let pause = |paused: bool| {
        let (ok, _, stderr) = kubectl(
            cluster,
            &[
                "-n",
                NS,
                "patch",
                "etcdcluster",
                "v35",
                "--type=merge",
                "-p",
                &format!("{{\"spec\":{{\"paused\":{paused}}}}}"),
            ],
        );
        assert!(ok, "pausing: {stderr}");
    };
    pause(true);
    cluster.apply(&defrag_yaml("while-paused", "v35", "    all: true\n", None));
    eventually("the run to wait for the paused cluster", RUN, || async {
        match reason_and_phase(&client, "while-paused").await {
            (Some(r), Some(DefragPhase::Pending)) if r == "ClusterPaused" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    // Still waiting a few passes later: nothing was defragmented meanwhile.
    tokio::time::sleep(Duration::from_secs(7)).await;
    let waiting = Api::<EtcdDefrag>::namespaced(client.clone(), NS)
        .get("while-paused")
        .await
        .unwrap();
    assert_eq!(
        waiting.status.as_ref().unwrap().phase,
        Some(DefragPhase::Pending)
    );
    assert!(waiting.status.as_ref().unwrap().members.is_none());
    pause(false);
    let done = finished(&client, "while-paused").await;
    assert_eq!(done.status.unwrap().phase, Some(DefragPhase::Complete));
}

async fn gated_on_health(cluster: &Cluster) {
    let client = cluster.client();
    cluster.kubelet.freeze_container(NS, "v35-1", None).unwrap();
    cluster.apply(&defrag_yaml("while-frozen", "v35", "    all: true\n", None));
    let waited = eventually("the run to wait for the frozen member", RUN, || async {
        match reason_and_phase(&client, "while-frozen").await {
            (Some(r), Some(DefragPhase::Pending)) if r == "ClusterNotHealthy" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let d = Api::<EtcdDefrag>::namespaced(client.clone(), NS)
        .get("while-frozen")
        .await
        .unwrap();
    cluster.kubelet.thaw_container(NS, "v35-1", None).unwrap();
    let _: () = waited;
    assert!(d.status.unwrap().members.is_none(), "no member was touched");
    wait_event(
        &client,
        NS,
        None,
        "while-frozen",
        None,
        "DefragDeferred",
        EVENT_LIMIT,
    )
    .await;
    let done = finished(&client, "while-frozen").await;
    assert_eq!(done.status.unwrap().phase, Some(DefragPhase::Complete));
}

async fn nospace_disarmed(cluster: &Cluster) {
    cluster.wait_converged(NS, "nospace", 1, CONVERGE).await;
    let endpoint = client_endpoint(NS, "nospace");
    // Until etcd refuses: 64 KiB values over five keys, at most 400 of them (25 MiB).
    if let Err(e) = cluster.put_64k_values(&endpoint, "k$((i % 5))", 400, true) {
        panic!("nospace: {e} (its quota is 8 MiB)");
    }
    let etcdctl = |args: &[&str]| tokio::task::block_in_place(|| cluster.etcdctl(&endpoint, args));
    let alarms = etcdctl(&["alarm", "list"]).expect("alarm list");
    assert!(alarms.contains("NOSPACE"), "{alarms}");
    assert!(
        etcdctl(&["put", "after", "v"]).is_err(),
        "a write under NOSPACE"
    );
    let out = etcdctl(&["get", "k0", "-w", "json"]).expect("reading the revision");
    let revision = serde_json::from_str::<serde_json::Value>(&out).unwrap()["header"]["revision"]
        .as_i64()
        .expect("a revision");
    etcdctl(&["compact", &revision.to_string(), "--physical"]).expect("compacting");

    let client = cluster.client();
    cluster.apply(&defrag_yaml(
        "nospace-all",
        "nospace",
        "    all: true\n",
        None,
    ));
    let done = finished(&client, "nospace-all").await;
    let status = done.status.unwrap();
    assert_eq!(status.phase, Some(DefragPhase::Complete), "{status:?}");
    let row = &status.members.unwrap()[0];
    // etcd raises NOSPACE when a write would take the database past the quota, so the size
    // before is near the quota, not necessarily over it.
    assert!(
        row.db_size_before.unwrap() >= SMALL_QUOTA * 9 / 10,
        "{row:?}"
    );
    assert!(row.db_size_after.unwrap() < SMALL_QUOTA, "{row:?}");
    wait_event(
        &client,
        NS,
        None,
        "nospace-all",
        None,
        "AlarmDisarmed",
        EVENT_LIMIT,
    )
    .await;
    let alarms = etcdctl(&["alarm", "list"]).expect("alarm list");
    assert!(!alarms.contains("NOSPACE"), "still armed: {alarms}");
    etcdctl(&["put", "after", "v"]).expect("a write after the alarm was disarmed");
}
