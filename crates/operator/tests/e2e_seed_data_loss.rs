//! A member whose data directory is lost under its running Pod (the reference operator's own
//! `TestSeedDataDirLossDoesNotRebootstrap`, and more): the seed's data directory is emptied and
//! its etcd killed, so the kubelet restarts the container in the same Pod with the arguments it
//! was born with. It must not form a new one-member cluster and serve an empty keyspace (same
//! member and cluster IDs, so nothing else would notice), nor rejoin under its old ID.
//!
//! Two clusters in one sandbox, at the same time: etcd 3.5.1 with the seed simply wiped, and
//! etcd 3.4.23 with the seed also partitioned from its peers while it restarts (where a
//! re-bootstrapped seed would stay a separate cluster accepting writes: split brain). For 90 s
//! after the wipe, every member is read directly (serializable reads, answered from the
//! member's own store) every second: none may answer without the sentinel key; writes sent
//! to the wiped member are refused or survive. Then the cluster is back to 3 members with the
//! sentinel on every member and one cluster ID, the seed replaced under a new member ID.

use etcd_operator_e2e_support as support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use support::cluster::Cluster;
use support::healing::{OperatorDeployment, start_healing_cluster};
use support::workload::Workload;
use support::{cluster_yaml_on, create_namespace, eventually};

const LIMIT: Duration = Duration::from_secs(240);
const WATCH: Duration = Duration::from_secs(90);
const SENTINEL: &str = "sentinel";

fn member_url(namespace: &str, member: &str) -> String {
    format!("http://{member}.etcd.{namespace}.svc:2379")
}

/// etcdctl against one member, quick to give up (a member that does not answer is fine).
fn etcdctl(cluster: &Cluster, endpoint: &str, args: &[&str]) -> Result<String, String> {
    let mut all = vec!["--dial-timeout=1s"];
    all.extend_from_slice(args);
    cluster.etcdctl(endpoint, &all)
}

/// The cluster ID a member reports in its response header, if it answers.
fn cluster_id(cluster: &Cluster, endpoint: &str) -> Option<String> {
    let out = etcdctl(cluster, endpoint, &["endpoint", "status", "-w", "json"]).ok()?;
    let parsed: serde_json::Value = serde_json::from_str(&out).ok()?;
    parsed[0]["Status"]["header"]["cluster_id"]
        .as_u64()
        .map(|id| format!("{id:x}"))
}

#[derive(Default)]
struct Watch {
    /// A member answered a read without the sentinel: (second, member, what it said).
    violations: Vec<(u64, String, String)>,
    /// Reads answered with the sentinel, and reads not answered, per member.
    answered: [u32; 3],
    silent: [u32; 3],
    /// Writes sent to the wiped member: acknowledged keys.
    acknowledged: Vec<String>,
    refused: u32,
}

/// Reads the sentinel from each member and writes to `etcd-0` once a second for [`WATCH`].
async fn watch_members(cluster: Arc<Cluster>, namespace: String) -> Watch {
    let watch = Arc::new(Mutex::new(Watch::default()));
    let started = Instant::now();
    let mut second = 0u64;
    while started.elapsed() < WATCH {
        let mut tasks = Vec::new();
        for i in 0..3usize {
            let (cluster, namespace, watch) = (cluster.clone(), namespace.clone(), watch.clone());
            tasks.push(tokio::task::spawn_blocking(move || {
                let member = format!("etcd-{i}");
                let url = member_url(&namespace, &member);
                let read = etcdctl(
                    &cluster,
                    &url,
                    &[
                        "get",
                        SENTINEL,
                        "--consistency=s",
                        "--print-value-only",
                        "--command-timeout=2s",
                    ],
                );
                let mut w = watch.lock().unwrap();
                match read {
                    Ok(out) if out.trim() == "present" => w.answered[i] += 1,
                    Ok(out) => w.violations.push((second, member, out)),
                    Err(_) => w.silent[i] += 1,
                }
            }));
        }
        {
            let (cluster, namespace, watch) = (cluster.clone(), namespace.clone(), watch.clone());
            tasks.push(tokio::task::spawn_blocking(move || {
                let key = format!("through-seed-{second}");
                let url = member_url(&namespace, "etcd-0");
                let put = etcdctl(&cluster, &url, &["put", &key, "v", "--command-timeout=2s"]);
                let mut w = watch.lock().unwrap();
                match put {
                    Ok(_) => w.acknowledged.push(key),
                    Err(_) => w.refused += 1,
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        second += 1;
        let next = Duration::from_secs(second);
        if let Some(wait) = next.checked_sub(started.elapsed()) {
            tokio::time::sleep(wait).await;
        }
    }
    Arc::try_unwrap(watch)
        .ok()
        .expect("the probes are done")
        .into_inner()
        .unwrap()
}

/// One scenario: a 3-member cluster in `namespace`, its seed wiped (and partitioned from its
/// peers while it restarts, with `partition`), watched, then healed.
async fn scenario(cluster: Arc<Cluster>, namespace: &'static str, version: &str, partition: bool) {
    let client = cluster.client();
    create_namespace(&client, namespace).await;
    cluster.apply(&cluster_yaml_on("etcd", namespace, 3, version, ""));
    cluster.wait_converged(namespace, "etcd", 3, LIMIT).await;
    tokio::task::block_in_place(|| cluster.put(namespace, "etcd", SENTINEL, "present"));
    let ids = cluster.recorded_ids(namespace, "etcd").await;
    let seed_id = ids
        .iter()
        .find(|(n, _)| n == "etcd-0")
        .map(|(_, id)| id.clone())
        .unwrap();
    let original_cluster_id =
        tokio::task::block_in_place(|| cluster_id(&cluster, &member_url(namespace, "etcd-1")))
            .expect("etcd-1 reports the cluster ID");
    let workload = Workload::start(cluster.network.clone(), namespace, "etcd", namespace);
    tokio::time::sleep(Duration::from_secs(1)).await;

    if partition {
        for peer in ["etcd-1", "etcd-2"] {
            cluster
                .kubelet
                .set_pods_partitioned(namespace, "etcd-0", peer, true)
                .await
                .unwrap();
        }
    }
    cluster
        .kubelet
        .wipe_claim(namespace, "data-etcd-0")
        .unwrap();
    cluster
        .kubelet
        .signal_container(namespace, "etcd-0", None, Signal::SIGKILL)
        .unwrap();
    let wiped = Instant::now();
    let watching = tokio::spawn(watch_members(cluster.clone(), namespace.to_string()));
    if partition {
        // The seed restarts (and keeps restarting) cut off from its peers; the partition goes
        // with its Pod once the operator replaces the member.
        tokio::time::sleep(Duration::from_secs(20)).await;
        for peer in ["etcd-1", "etcd-2"] {
            let _ = cluster
                .kubelet
                .set_pods_partitioned(namespace, "etcd-0", peer, false)
                .await;
        }
    }
    let watch = watching.await.unwrap();
    println!(
        "{namespace}: answers with the sentinel {:?}, silent {:?}; writes through the seed: {} acknowledged, {} refused",
        watch.answered,
        watch.silent,
        watch.acknowledged.len(),
        watch.refused
    );
    assert!(
        watch.violations.is_empty(),
        "{namespace}: members answered without the sentinel (second, member, answer): {:?}",
        watch.violations
    );
    assert!(
        watch.answered[1] > 80 && watch.answered[2] > 80,
        "{namespace}: the other members kept serving: {:?}",
        watch.answered
    );

    cluster.wait_converged(namespace, "etcd", 3, LIMIT).await;
    println!(
        "{namespace}: back to 3 members {:.1} s after the wipe",
        wiped.elapsed().as_secs_f64()
    );
    workload.stop().await.assert_no_loss();
    let now = cluster.recorded_ids(namespace, "etcd").await;
    let new_seed_id = now
        .iter()
        .find(|(n, _)| n == "etcd-0")
        .map(|(_, id)| id.clone())
        .unwrap();
    assert!(
        !new_seed_id.is_empty() && new_seed_id != seed_id,
        "{namespace}: the seed was replaced under a new member ID ({seed_id} → {new_seed_id})"
    );
    for (name, id) in &ids {
        if name != "etcd-0" {
            assert!(
                now.contains(&(name.clone(), id.clone())),
                "{name} untouched"
            );
        }
    }
    for i in 0..3 {
        let url = member_url(namespace, &format!("etcd-{i}"));
        eventually(&format!("etcd-{i} has every key"), LIMIT, || async {
            let sentinel = etcdctl(&cluster, &url, &["get", SENTINEL, "--print-value-only"])?;
            if sentinel.trim() != "present" {
                return Err(format!("sentinel: {sentinel:?}"));
            }
            for key in &watch.acknowledged {
                let value = etcdctl(&cluster, &url, &["get", key, "--print-value-only"])?;
                if value.trim() != "v" {
                    return Err(format!("acknowledged {key} is missing"));
                }
            }
            Ok(())
        })
        .await;
        assert_eq!(
            cluster_id(&cluster, &url).as_deref(),
            Some(original_cluster_id.as_str()),
            "{namespace}: etcd-{i} is in the original cluster"
        );
    }
    let events = cluster.events(namespace).await;
    assert!(
        events
            .iter()
            .any(|(r, m)| r == "MemberPhaseChanged" && m == "member etcd-0 is now Replacing"),
        "{namespace}: the seed was replaced: {events:#?}"
    );
    assert!(
        events.iter().any(|(r, m)| r == "PodStartChanged"
            && m.starts_with("Pod etcd-0 now restarts only on its own data")),
        "{namespace}: the seed's Pod was told to restart only on its data: {events:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn e2e_seed_data_loss_never_rebootstraps() {
    let test_started = Instant::now();
    let cluster = Arc::new(start_healing_cluster(3).await);
    cluster
        .deploy_operator_with(&OperatorDeployment::repairing())
        .await;
    let plain = tokio::spawn(scenario(cluster.clone(), "wiped", "3.5.1", false));
    let partitioned = tokio::spawn(scenario(cluster.clone(), "wiped-cut-off", "3.4.23", true));
    plain.await.unwrap();
    partitioned.await.unwrap();
    println!(
        "seed data loss: {:.0} s in all",
        test_started.elapsed().as_secs_f64()
    );
}
