//! The repairs that end in a new member, end to end on real etcd in the sandbox, under the
//! client workload: a member whose data directory is corrupted crash-loops, is recreated three
//! times with a growing backoff that its status reports, then replaced (removed from etcd, its
//! PVC deleted, added again as a learner on a fresh one), and the cluster returns to full size
//! with the majority's data; a memory-backed member that loses its Pod is replaced as a new
//! member, never restarted on empty data under its old ID.

use etcd_operator_e2e_support as support;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use nix::sys::signal::Signal;
use support::cluster::Cluster;
use support::healing::{OperatorDeployment, start_healing_cluster};
use support::workload::Workload;
use support::{cluster_yaml, create_namespace, eventually, members};

const LIMIT: Duration = Duration::from_secs(240);

fn id_of(ids: &[(String, String)], member: &str) -> String {
    ids.iter()
        .find(|(name, _)| name == member)
        .map(|(_, id)| id.clone())
        .unwrap_or_default()
}

/// Watches one member's `Ready` reasons and `recreateCount` until dropped.
struct ReasonLog {
    seen: Arc<Mutex<BTreeSet<String>>>,
    highest_count: Arc<Mutex<i32>>,
    task: tokio::task::JoinHandle<()>,
}

impl ReasonLog {
    fn start(cluster: &Cluster, namespace: &str, member: &str) -> ReasonLog {
        let client = cluster.client();
        let seen = Arc::new(Mutex::new(BTreeSet::new()));
        let highest_count = Arc::new(Mutex::new(0));
        let (namespace, member) = (namespace.to_string(), member.to_string());
        let task = tokio::spawn({
            let (seen, highest_count) = (seen.clone(), highest_count.clone());
            async move {
                loop {
                    for m in members(&client, &namespace, "etcd").await {
                        if m.metadata.name.as_deref() != Some(member.as_str()) {
                            continue;
                        }
                        let status = m.status.unwrap_or_default();
                        if let Some(reason) = status
                            .conditions
                            .iter()
                            .flatten()
                            .find(|c| c.type_ == "Ready")
                            .map(|c| c.reason.clone())
                        {
                            seen.lock().unwrap().insert(reason);
                        }
                        let mut highest = highest_count.lock().unwrap();
                        *highest = (*highest).max(status.recreate_count.unwrap_or(0));
                    }
                    // The kubelet's own word, beside the member's: the status names a
                    // crash loop only while a Pod is in CrashLoopBackOff with 3 restarts at the
                    // moment the operator writes it, which a repair can overtake.
                    let pod = Api::<Pod>::namespaced(client.clone(), &namespace)
                        .get_opt(&member)
                        .await
                        .ok()
                        .flatten();
                    let waiting = pod
                        .and_then(|p| p.status?.container_statuses?.into_iter().next())
                        .and_then(|c| c.state?.waiting?.reason);
                    if let Some(reason) = waiting {
                        seen.lock().unwrap().insert(format!("Pod:{reason}"));
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        });
        ReasonLog {
            seen,
            highest_count,
            task,
        }
    }

    fn reasons(&self) -> BTreeSet<String> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for ReasonLog {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn e2e_healing_replacements() {
    let test_started = Instant::now();
    let cluster = start_healing_cluster(3).await;
    // Backoff 5 s, 10 s, 20 s: longer than it takes the kubelet to report a new Pod
    // crash-looping (3 restarts, about 7 s on the scaled clock), so the wait before at least
    // the replacement is observable in the status (with 2 s it could pass unseen).
    let mut operator = OperatorDeployment::repairing();
    operator
        .extra_args
        .push("--repair-backoff-seconds=5".to_string());
    cluster.deploy_operator_with(&operator).await;
    let client = cluster.client();

    // Corrupted data: crash-loop, three recreations with backoff, then a replacement.
    create_namespace(&client, "corrupt").await;
    cluster.apply(&cluster_yaml("etcd", "corrupt", 3, ""));
    cluster.wait_converged("corrupt", "etcd", 3, LIMIT).await;
    let ids = cluster.recorded_ids("corrupt", "etcd").await;
    let workload = Workload::start(cluster.network.clone(), "corrupt", "etcd", "corrupt");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let log = ReasonLog::start(&cluster, "corrupt", "etcd-2");
    let started = Instant::now();
    let changed = cluster
        .kubelet
        .corrupt_claim("corrupt", "data-etcd-2")
        .unwrap();
    assert!(changed > 0, "the claim has files to corrupt");
    cluster
        .kubelet
        .signal_container("corrupt", "etcd-2", None, Signal::SIGKILL)
        .unwrap();
    eventually("etcd-2 replaced under a new ID", LIMIT, || async {
        let now = cluster.recorded_ids("corrupt", "etcd").await;
        let id = id_of(&now, "etcd-2");
        (!id.is_empty() && id != id_of(&ids, "etcd-2"))
            .then_some(())
            .ok_or_else(|| format!("etcd-2 is {id:?}; reasons so far {:?}", log.reasons()))
    })
    .await;
    cluster.wait_converged("corrupt", "etcd", 3, LIMIT).await;
    println!(
        "corrupt: replaced and converged {:.1} s after the corruption",
        started.elapsed().as_secs_f64()
    );
    workload.stop().await.assert_no_loss();
    let reasons = log.reasons();
    assert!(
        reasons.contains("CrashLoopBackOff") || reasons.contains("Pod:CrashLoopBackOff"),
        "etcd-2 crash-looped: {reasons:?}"
    );
    for expected in ["Recreating", "RepairBackoff"] {
        assert!(
            reasons.contains(expected),
            "etcd-2's status said {expected}: {reasons:?}"
        );
    }
    assert_eq!(
        *log.highest_count.lock().unwrap(),
        3,
        "three recreations counted"
    );
    // Each recreation made a new Pod (so deleted the crash-looping one); then the member was
    // replaced. (New Pods are counted, not deletions: a delete may be sent again while the
    // Pod terminates.)
    let events = cluster.events("corrupt").await;
    let replacing = events
        .iter()
        .position(|(_, m)| m == "member etcd-2 is now Replacing")
        .unwrap_or_else(|| panic!("no replacement in {events:#?}"));
    let recreations = events[..replacing]
        .iter()
        .skip_while(|(_, m)| m != "member etcd-2 is now Recreating")
        .filter(|(r, m)| r == "PodCreated" && m == "Pod etcd-2")
        .count();
    assert_eq!(recreations, 3, "three real recreations first: {events:#?}");
    let after = cluster.recorded_ids("corrupt", "etcd").await;
    for name in ["etcd-0", "etcd-1"] {
        assert_eq!(id_of(&after, name), id_of(&ids, name), "{name} untouched");
    }
    let listed = cluster.etcd_members("corrupt", "etcd").unwrap();
    assert!(
        listed.iter().all(|(_, id, _)| *id != id_of(&ids, "etcd-2")),
        "the old etcd-2 is gone from etcd: {listed:?}"
    );
    drop(log);

    // A memory-backed member loses its Pod: replaced as a new member.
    create_namespace(&client, "mem").await;
    let memory = "  storage:\n    medium: Memory\n    size: 256Mi\n";
    cluster.apply(&cluster_yaml("etcd", "mem", 3, memory));
    cluster.wait_converged("mem", "etcd", 3, LIMIT).await;
    let ids = cluster.recorded_ids("mem", "etcd").await;
    let workload = Workload::start(cluster.network.clone(), "mem", "etcd", "memory");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let _log = ReasonLog::start(&cluster, "mem", "etcd-1");
    let started = Instant::now();
    cluster.delete_member_pod("mem", "etcd-1").await;
    eventually("etcd-1 replaced under a new ID", LIMIT, || async {
        let now = cluster.recorded_ids("mem", "etcd").await;
        let id = id_of(&now, "etcd-1");
        (!id.is_empty() && id != id_of(&ids, "etcd-1"))
            .then_some(())
            .ok_or_else(|| format!("etcd-1 is {id:?}"))
    })
    .await;
    cluster.wait_converged("mem", "etcd", 3, LIMIT).await;
    println!(
        "memory: replaced and converged {:.1} s after the Pod was deleted",
        started.elapsed().as_secs_f64()
    );
    workload.stop().await.assert_no_loss();
    // Never restarted on empty data under its old ID: it left etcd before any new Pod.
    let events = cluster.events("mem").await;
    let steps: Vec<&str> = events
        .iter()
        .skip_while(|(_, m)| m != "member etcd-1 is now Replacing")
        .filter(|(_, m)| m.contains("etcd-1"))
        .map(|(r, _)| r.as_str())
        .collect();
    let removed = steps.iter().position(|r| *r == "MemberRemoved");
    let created = steps.iter().position(|r| *r == "PodCreated");
    assert!(
        removed.is_some() && removed < created,
        "MemberRemove before the new Pod: {steps:?}"
    );
    let listed = cluster.etcd_members("mem", "etcd").unwrap();
    assert!(
        listed.iter().all(|(_, id, _)| *id != id_of(&ids, "etcd-1")),
        "the old etcd-1 never came back: {listed:?}"
    );
    println!(
        "e2e_healing_replacements: {:.0} s",
        test_started.elapsed().as_secs_f64()
    );
}
