//! Lost-quorum recovery end to end, with real etcd (3.7.4 for `manual`, 3.4.23 for `automatic`, 3.5.1 for the rest), the operator deployed in the sandbox
//! and the client workload. One sandbox, three clusters at once:
//!
//! - `manual`: 3 members, etcd-0 leading; the PVCs of etcd-1 and etcd-2 are wiped under their
//!   running Pods (etcd killed, so it restarts on an empty data directory and refuses to). For
//!   20 s the operator only reports (no recovery in manual mode); then `kubectl etcd
//!   recover-quorum` asks for it. The cluster is back to 3 members: etcd-0 under its old member
//!   ID, the others under new ones, one cluster ID, every acknowledged write and the sentinel
//!   on every member, `status.quorumRecovery` Completed, the annotation gone. Then etcd-0's etcd
//!   is killed once more: it restarts without `--force-new-cluster` (the cluster keeps its 3
//!   members).
//! - `automatic`: the same wipe with `spec.quorumRecovery: {mode: Automatic, after: 15s}` and no
//!   person: recovered, not before `after` has passed.
//!   When the recovery is asked for, the crash points `after_pod_delete` and
//!   `after_pod_metadata_patch` are armed: the operator dies right after the survivor's Pod is
//!   deleted and right after its new Pod is unforced, and resumes from `status.quorumRecovery`.
//! - `three-of-five`: 5 members, 3 PVCs wiped, automatic (`after: 15s`): recovered from etcd-0,
//!   and etcd-4 (which kept its data, but had no more than etcd-0) rebuilt with the others.
//! - `restarting`: automatic mode with `after: 5s`, and etcd-1 and etcd-2 frozen for 40 s (their
//!   Pods run, their data is intact; the kubelet may restart them): never treated as lost, no
//!   recovery Event, every member ID unchanged.
//! - `from-snapshot`: memory-backed, 3 members, moto as the S3 store; keys written, an
//!   EtcdSnapshot taken under the client workload, a key written after it; every Pod deleted
//!   (the data dies with the tmpfs); `kubectl etcd recover-quorum` (manual). The crash point
//!   `after_pod_create` is armed: the operator dies right after creating the restoring Pod.
//!   Back to 3 members under a new cluster ID, every key written before the snapshot on every
//!   member, the key written after it gone, the members agreeing; the seed's etcd killed once
//!   more restarts on its data (no second restore).
//! - `no-snapshot`: the same loss with no EtcdSnapshot: the request is refused with a Warning
//!   Event saying what to do, no recovery recorded, every EtcdMember still there, for 20 s.
//!
//! `E2E_QUORUM_ONLY=snapshot` runs only the last two (for working on them).

use etcd_operator_e2e_support as support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use support::cluster::Cluster;
use support::healing::{OperatorDeployment, start_healing_cluster};
use support::workload::Workload;
use support::{cluster_yaml_on, create_namespace, eventually, get_cluster};

const LIMIT: Duration = Duration::from_secs(300);
const SENTINEL: &str = "sentinel";
const ANNOTATION: &str = "etcd-operator.cozystack.io/recover-quorum";
const CRASH_POINTS: [&str; 2] = ["after_pod_delete", "after_pod_metadata_patch"];

fn member_url(namespace: &str, member: &str) -> String {
    format!("http://{member}.etcd.{namespace}.svc:2379")
}

fn etcdctl(cluster: &Cluster, endpoint: &str, args: &[&str]) -> Result<String, String> {
    let mut all = vec!["--dial-timeout=1s", "--command-timeout=3s"];
    all.extend_from_slice(args);
    cluster.etcdctl(endpoint, &all)
}

fn cluster_id(cluster: &Cluster, endpoint: &str) -> Option<String> {
    let out = etcdctl(cluster, endpoint, &["endpoint", "status", "-w", "json"]).ok()?;
    let parsed: serde_json::Value = serde_json::from_str(&out).ok()?;
    parsed[0]["Status"]["header"]["cluster_id"]
        .as_u64()
        .map(|id| format!("{id:x}"))
}

/// `kubectl etcd ARGS` through the plugin's library entry point, as the binary runs it.
async fn plugin(cluster: &Cluster, namespace: &str, args: &[&str]) -> (i32, String, String) {
    let kubeconfig = cluster.kubeconfig_path().display().to_string();
    let mut argv: Vec<String> = ["kubectl-etcd", "--kubeconfig", &kubeconfig, "-n", namespace]
        .iter()
        .map(|a| a.to_string())
        .collect();
    argv.extend(args.iter().map(|a| a.to_string()));
    let outcome = tokio::task::block_in_place(|| {
        std::thread::Builder::new()
            .stack_size(32 * 1024 * 1024)
            .spawn(move || {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap()
                    .block_on(kubectl_etcd::run(argv))
            })
            .unwrap()
            .join()
            .unwrap()
    });
    (outcome.code, outcome.stdout, outcome.stderr)
}

async fn recovery_events(cluster: &Cluster, namespace: &str) -> Vec<(String, String)> {
    cluster
        .events(namespace)
        .await
        .into_iter()
        .filter(|(r, _)| r.starts_with("QuorumRecovery"))
        .collect()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Trigger {
    Manual,
    Automatic,
}

/// A 3-member cluster in `namespace` with the sentinel written, etcd-0 leading, under the
/// workload.
async fn prepare(
    cluster: &Cluster,
    namespace: &str,
    replicas: i32,
    version: &str,
    extra_spec: &str,
) -> Workload {
    create_namespace(&cluster.client(), namespace).await;
    // kubectl, retried: on a loaded machine its first TLS handshake can time out.
    let manifest = cluster_yaml_on("etcd", namespace, replicas, version, extra_spec);
    eventually(&format!("{namespace}: kubectl apply"), LIMIT, || async {
        let (ok, _, stderr) = tokio::task::block_in_place(|| {
            support::kubectl_with_stdin(cluster, &["apply", "-f", "-"], Some(&manifest))
        });
        ok.then_some(()).ok_or(stderr)
    })
    .await;
    cluster
        .wait_converged(namespace, "etcd", replicas, LIMIT)
        .await;
    let endpoint = support::cluster::client_endpoint(namespace, "etcd");
    eventually(
        &format!("{namespace}: the sentinel written"),
        LIMIT,
        || async {
            tokio::task::block_in_place(|| {
                etcdctl(cluster, &endpoint, &["put", SENTINEL, "present"])
            })
            .map(|_| ())
        },
    )
    .await;
    cluster.move_leader_to(namespace, "etcd", "etcd-0").await;
    let workload = Workload::start(cluster.network.clone(), namespace, "etcd", namespace);
    tokio::time::sleep(Duration::from_secs(2)).await;
    workload
}

async fn wiped(
    cluster: Arc<Cluster>,
    namespace: &'static str,
    trigger: Trigger,
    replicas: i32,
    version: &'static str,
    lost: &'static [&'static str],
) {
    let extra = match trigger {
        Trigger::Manual => "",
        Trigger::Automatic => "  quorumRecovery:\n    mode: Automatic\n    after: 15s\n",
    };
    let workload = prepare(&cluster, namespace, replicas, version, extra).await;
    let members: Vec<String> = (0..replicas).map(|i| format!("etcd-{i}")).collect();
    let others: Vec<String> = members[1..].to_vec();
    let before = cluster.recorded_ids(namespace, "etcd").await;
    let original_cluster_id =
        tokio::task::block_in_place(|| cluster_id(&cluster, &member_url(namespace, "etcd-0")))
            .expect("etcd-0 reports the cluster ID");

    for m in lost {
        cluster
            .kubelet
            .wipe_claim(namespace, &format!("data-{m}"))
            .unwrap();
        cluster
            .kubelet
            .signal_container(namespace, m, None, Signal::SIGKILL)
            .unwrap();
    }
    let lost_at = Instant::now();
    // The operator sees the loss first (etcd 3.4 takes a few seconds to lose its leader).
    eventually(&format!("{namespace}: quorum lost"), LIMIT, || async {
        let object = get_cluster(&cluster.client(), namespace, "etcd").await;
        let available = support::condition(&object, "Available");
        let recorded = object
            .status
            .as_ref()
            .is_some_and(|s| s.quorum_recovery.is_some());
        (available.as_deref() == Some("False") || recorded)
            .then_some(())
            .ok_or(format!("Available {available:?}"))
    })
    .await;

    if trigger == Trigger::Manual {
        tokio::time::sleep(Duration::from_secs(20)).await;
        let events = recovery_events(&cluster, namespace).await;
        assert!(
            events.is_empty(),
            "{namespace}: manual mode recovers only when asked: {events:?}"
        );
        let status = get_cluster(&cluster.client(), namespace, "etcd")
            .await
            .status
            .unwrap_or_default();
        assert!(status.quorum_recovery.is_none(), "{namespace}: {status:?}");
        // The operator dies right after deleting the survivor's Pod and right after
        // unforcing its new one (the first pass through each point): it resumes.
        for point in CRASH_POINTS {
            cluster.arm_failpoint(point);
        }
        let (code, out, err) = plugin(&cluster, namespace, &["recover-quorum"]).await;
        assert_eq!(code, 0, "{namespace}: recover-quorum: {out}{err}");
        println!("{namespace}: {}", out.trim());
    }

    cluster
        .wait_converged(namespace, "etcd", replicas, LIMIT)
        .await;
    eventually(
        &format!("{namespace}: recovery completed"),
        LIMIT,
        || async {
            let object = get_cluster(&cluster.client(), namespace, "etcd").await;
            let phase = object
                .status
                .and_then(|s| s.quorum_recovery)
                .and_then(|r| r.phase);
            (phase == Some(etcd_operator_api::cluster::QuorumRecoveryPhase::Completed))
                .then_some(())
                .ok_or(format!("phase {phase:?}"))
        },
    )
    .await;
    cluster
        .wait_converged(namespace, "etcd", replicas, LIMIT)
        .await;
    let recovered_in = lost_at.elapsed();
    println!(
        "{namespace}: quorum lost ({} of {replicas} wiped) to Available at {replicas} members in {:.1} s",
        lost.len(),
        recovered_in.as_secs_f64()
    );
    // A lost-quorum recovery may lose what only the lost majority held: the checker names
    // every acknowledged write missing from the final history, and the operator's claim in
    // status.quorumRecovery is held against it below.
    let report = workload.stop_allowing_loss().await;
    println!("{}", report.summary());
    assert!(report.acknowledged > 0, "{namespace}: the workload wrote");
    report.assert_checked();

    let object = get_cluster(&cluster.client(), namespace, "etcd").await;
    let r = object
        .status
        .clone()
        .unwrap_or_default()
        .quorum_recovery
        .expect("status.quorumRecovery is recorded");
    println!("{namespace}: status.quorumRecovery {r:?}");
    assert_eq!(
        r.phase,
        Some(etcd_operator_api::cluster::QuorumRecoveryPhase::Completed)
    );
    assert_eq!(r.survivor, "etcd-0");
    assert_eq!(
        r.removed, others,
        "every member but the survivor is rebuilt"
    );
    assert!(r.may_have_lost.is_some());
    // The operator's claim about what was lost, against the checker's list.
    let survivor_index = r
        .survivor_raft_index
        .expect("the survivor's raft index is recorded");
    let survivor_revision = r
        .survivor_revision
        .expect("the survivor's revision is recorded");
    let highest_other = r
        .members
        .iter()
        .filter(|m| m.name != r.survivor)
        .filter_map(|m| m.raft_index)
        .max();
    println!(
        "{namespace}: the operator claims (survivor at revision {survivor_revision}): {:?}; the checker found {} acknowledged write(s) lost: {:?}",
        r.may_have_lost,
        report.lost.len(),
        report.lost
    );
    // The survivor led the cluster when the majority was lost, so no entry was committed
    // without it: the operator recovers from the highest raft index and loses nothing.
    assert!(
        highest_other.is_none_or(|i| i <= survivor_index),
        "{namespace}: the survivor (raft index {survivor_index}) had the highest index: {:?}",
        r.members
    );
    assert!(
        report.lost_writes.is_empty(),
        "{namespace}: the survivor had the highest raft index, so no acknowledged write may be lost; the checker found {:?} (history in {})",
        report.lost,
        report.dir.display()
    );
    match trigger {
        Trigger::Manual => assert!(r.trigger.starts_with("Manual"), "{}", r.trigger),
        Trigger::Automatic => {
            assert_eq!(r.trigger, "Automatic");
            let started = r.start_time.unwrap().0;
            let forced = r.forced_time.unwrap().0;
            assert!(forced >= started);
        }
    }
    assert!(
        object
            .metadata
            .annotations
            .as_ref()
            .is_none_or(|a| !a.contains_key(ANNOTATION)),
        "{namespace}: the request annotation is removed once done"
    );

    let after = cluster.recorded_ids(namespace, "etcd").await;
    let id = |list: &[(String, String)], m: &str| {
        list.iter()
            .find(|(n, _)| n == m)
            .map(|(_, id)| id.clone())
            .unwrap_or_default()
    };
    assert_eq!(
        id(&after, "etcd-0"),
        id(&before, "etcd-0"),
        "{namespace}: the survivor keeps its member ID"
    );
    for m in &others {
        assert!(
            !id(&after, m).is_empty() && id(&after, m) != id(&before, m),
            "{namespace}: {m} joined again under a new member ID ({} → {})",
            id(&before, m),
            id(&after, m)
        );
    }
    for i in 0..replicas {
        let url = member_url(namespace, &format!("etcd-{i}"));
        eventually(
            &format!("{namespace}: etcd-{i} has the sentinel"),
            LIMIT,
            || async {
                let v = etcdctl(&cluster, &url, &["get", SENTINEL, "--print-value-only"])?;
                (v.trim() == "present")
                    .then_some(())
                    .ok_or(format!("{v:?}"))
            },
        )
        .await;
        assert_eq!(
            tokio::task::block_in_place(|| cluster_id(&cluster, &url)).as_deref(),
            Some(original_cluster_id.as_str()),
            "{namespace}: etcd-{i} is in the original cluster"
        );
    }
    // Every member holds the same data in its own store (serializable reads): etcd's
    // --force-new-cluster can leave rejoined members without an entry the survivor applied
    // (etcd-io/etcd#14009) when the survivor was not stopped cleanly.
    let revisions: Vec<(i64, usize)> = (0..replicas)
        .map(|i| {
            let url = member_url(namespace, &format!("etcd-{i}"));
            tokio::task::block_in_place(|| {
                let status = etcdctl(&cluster, &url, &["endpoint", "status", "-w", "json"])
                    .expect("endpoint status");
                let parsed: serde_json::Value = serde_json::from_str(&status).unwrap();
                let keys = etcdctl(
                    &cluster,
                    &url,
                    &["get", "", "--prefix", "--keys-only", "--consistency=s"],
                )
                .expect("keys");
                (
                    parsed[0]["Status"]["header"]["revision"]
                        .as_i64()
                        .unwrap_or(-1),
                    keys.lines().filter(|l| !l.trim().is_empty()).count(),
                )
            })
        })
        .collect();
    println!("{namespace}: (revision, keys) per member {revisions:?}");
    assert!(
        revisions.iter().all(|r| *r == revisions[0]),
        "{namespace}: the members disagree: {revisions:?}"
    );
    let pod = cluster.member_pod(namespace, "etcd-0").await.unwrap();
    assert_eq!(
        pod.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("etcd-operator.cozystack.io/force-new-cluster"))
            .map(String::as_str),
        Some("false"),
        "{namespace}: the survivor's Pod no longer forces a new cluster"
    );
    let events = recovery_events(&cluster, namespace).await;
    println!("{namespace}: recovery Events {events:#?}");
    for reason in [
        "QuorumRecoveryStarted",
        "QuorumRecoveryForced",
        "QuorumRecoveryCompleted",
    ] {
        assert!(
            events.iter().any(|(r, _)| r == reason),
            "{namespace}: {reason}: {events:?}"
        );
    }

    // The survivor's etcd restarts in the same Pod: without --force-new-cluster, so the
    // cluster keeps its three members.
    cluster
        .kubelet
        .signal_container(namespace, "etcd-0", None, Signal::SIGKILL)
        .unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    cluster
        .wait_converged(namespace, "etcd", replicas, LIMIT)
        .await;
    assert_eq!(
        cluster.recorded_ids(namespace, "etcd").await,
        after,
        "{namespace}: a restart of the survivor changes no membership"
    );
}

async fn restarting(cluster: Arc<Cluster>, namespace: &'static str) {
    let workload = prepare(
        &cluster,
        namespace,
        3,
        "3.5.1",
        "  quorumRecovery:\n    mode: Automatic\n    after: 5s\n",
    )
    .await;
    let before = cluster.recorded_ids(namespace, "etcd").await;
    for m in ["etcd-1", "etcd-2"] {
        cluster
            .kubelet
            .freeze_container(namespace, m, None)
            .unwrap();
    }
    tokio::time::sleep(Duration::from_secs(40)).await;
    for m in ["etcd-1", "etcd-2"] {
        // The kubelet may have restarted it meanwhile (liveness): nothing to thaw then.
        let _ = cluster.kubelet.thaw_container(namespace, m, None);
    }
    cluster.wait_converged(namespace, "etcd", 3, LIMIT).await;
    workload.stop().await.assert_no_loss();
    let events = recovery_events(&cluster, namespace).await;
    assert!(
        events.is_empty(),
        "{namespace}: a majority restarting on its data is not lost quorum: {events:?}"
    );
    assert_eq!(
        cluster.recorded_ids(namespace, "etcd").await,
        before,
        "{namespace}: no member was replaced"
    );
    let status = get_cluster(&cluster.client(), namespace, "etcd")
        .await
        .status
        .unwrap_or_default();
    assert!(status.quorum_recovery.is_none(), "{namespace}: {status:?}");
}

const MEMORY: &str = "  storage:\n    medium: Memory\n    size: 256Mi\n";

fn kubectl_ok(cluster: &Cluster, args: &[&str]) {
    let (ok, _, stderr) = tokio::task::block_in_place(|| support::kubectl(cluster, args));
    assert!(ok, "kubectl {args:?}: {stderr}");
}

/// Deletes every Pod of the cluster at once (grace 0): a memory-backed member's data is gone.
async fn delete_every_pod(cluster: &Cluster, namespace: &str, replicas: i32) {
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(cluster.client(), namespace);
    let now = kube::api::DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    for i in 0..replicas {
        pods.delete(&format!("etcd-{i}"), &now).await.unwrap();
    }
}

async fn wait_quorum_lost(cluster: &Cluster, namespace: &str) {
    support::status::wait_condition(
        &cluster.client(),
        namespace,
        "etcd",
        "Available",
        "False",
        None,
        LIMIT,
    )
    .await;
}

async fn from_snapshot(cluster: Arc<Cluster>, moto: Arc<support::moto::Moto>) {
    let namespace = "from-snapshot";
    let workload = prepare(&cluster, namespace, 3, "3.5.1", MEMORY).await;
    let endpoint = support::cluster::client_endpoint(namespace, "etcd");
    for i in 0..20 {
        tokio::task::block_in_place(|| {
            etcdctl(
                &cluster,
                &endpoint,
                &["put", &format!("before-{i}"), "kept"],
            )
        })
        .expect("put");
    }
    kubectl_ok(
        &cluster,
        &[
            "-n",
            namespace,
            "create",
            "secret",
            "generic",
            "s3",
            &format!("--from-literal=AWS_ACCESS_KEY_ID={}", moto.key_id),
            &format!("--from-literal=AWS_SECRET_ACCESS_KEY={}", moto.secret),
        ],
    );
    let snapshot = format!(
        "apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdSnapshot\nmetadata:\n  name: before-loss\n  namespace: {namespace}\nspec:\n  clusterRef:\n    name: etcd\n  destination:\n    s3:\n      endpoint: {}\n      bucket: {BUCKET}\n      key: {namespace}\n      region: us-east-1\n      forcePathStyle: true\n      credentialsSecretRef:\n        name: s3\n",
        moto.url
    );
    tokio::task::block_in_place(|| cluster.apply(&snapshot));
    let api: kube::Api<etcd_operator_api::EtcdSnapshot> =
        kube::Api::namespaced(cluster.client(), namespace);
    let revision = eventually(
        &format!("{namespace}: snapshot Complete"),
        LIMIT,
        || async {
            let s = api.get("before-loss").await.map_err(|e| e.to_string())?;
            let status = s.status.unwrap_or_default();
            match (status.phase, status.verified, status.revision) {
                (
                    Some(etcd_operator_api::snapshot::SnapshotPhase::Complete),
                    Some(true),
                    Some(r),
                ) => Ok(r),
                other => Err(format!("{other:?} {:?}", status.failure_reason)),
            }
        },
    )
    .await;
    // Taken under the workload, which lost nothing up to here.
    workload.stop().await.assert_no_loss();
    tokio::task::block_in_place(|| etcdctl(&cluster, &endpoint, &["put", "after-snapshot", "x"]))
        .expect("put after the snapshot");
    let original_cluster_id =
        tokio::task::block_in_place(|| cluster_id(&cluster, &member_url(namespace, "etcd-0")))
            .expect("etcd-0 reports the cluster ID");

    delete_every_pod(&cluster, namespace, 3).await;
    wait_quorum_lost(&cluster, namespace).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        recovery_events(&cluster, namespace).await.is_empty(),
        "{namespace}: manual mode recovers only when asked"
    );
    // The operator dies right after creating the restoring Pod, and resumes.
    cluster.arm_failpoint(SNAPSHOT_CRASH_POINT);
    let (code, out, err) = plugin(&cluster, namespace, &["recover-quorum"]).await;
    assert_eq!(code, 0, "{namespace}: recover-quorum: {out}{err}");
    let lost_at = Instant::now();

    eventually(
        &format!("{namespace}: recovery completed"),
        LIMIT,
        || async {
            let object = get_cluster(&cluster.client(), namespace, "etcd").await;
            let phase = object
                .status
                .and_then(|s| s.quorum_recovery)
                .and_then(|r| r.phase);
            (phase == Some(etcd_operator_api::cluster::QuorumRecoveryPhase::Completed))
                .then_some(())
                .ok_or(format!("phase {phase:?}"))
        },
    )
    .await;
    cluster.wait_converged(namespace, "etcd", 3, LIMIT).await;
    println!(
        "{namespace}: every Pod lost to Available at 3 members from the snapshot in {:.1} s",
        lost_at.elapsed().as_secs_f64()
    );
    let object = get_cluster(&cluster.client(), namespace, "etcd").await;
    let status = object.status.clone().unwrap_or_default();
    let r = status.quorum_recovery.clone().unwrap();
    println!("{namespace}: status.quorumRecovery {r:?}");
    let snap = r
        .snapshot
        .clone()
        .expect("recorded as a recovery from a snapshot");
    assert_eq!(snap.name, "before-loss");
    assert_eq!(snap.revision, Some(revision));
    assert!(r.trigger.starts_with("Manual"), "{}", r.trigger);
    assert!(
        r.may_have_lost
            .as_deref()
            .unwrap()
            .contains(&format!("after revision {revision}")),
        "{:?}",
        r.may_have_lost
    );
    assert_eq!(
        snap.previous_cluster_id.as_deref(),
        Some(original_cluster_id.as_str())
    );
    assert_ne!(
        status.cluster_id.as_deref(),
        Some(original_cluster_id.as_str())
    );
    assert_eq!(status.cluster_id, snap.cluster_id);
    assert!(
        object
            .metadata
            .annotations
            .as_ref()
            .is_none_or(|a| !a.contains_key(ANNOTATION)),
        "{namespace}: the request annotation is removed once done"
    );
    let mut seen = Vec::new();
    for i in 0..3 {
        let url = member_url(namespace, &format!("etcd-{i}"));
        eventually(
            &format!("{namespace}: etcd-{i} has the data up to the snapshot"),
            LIMIT,
            || async {
                let keys = etcdctl(
                    &cluster,
                    &url,
                    &[
                        "get",
                        "before-",
                        "--prefix",
                        "--keys-only",
                        "--consistency=s",
                    ],
                )?;
                let n = keys.lines().filter(|l| !l.trim().is_empty()).count();
                let sentinel = etcdctl(
                    &cluster,
                    &url,
                    &["get", SENTINEL, "--print-value-only", "--consistency=s"],
                )?;
                (n == 20 && sentinel.trim() == "present")
                    .then_some(())
                    .ok_or(format!("{n} keys, sentinel {sentinel:?}"))
            },
        )
        .await;
        let after = tokio::task::block_in_place(|| {
            etcdctl(
                &cluster,
                &url,
                &[
                    "get",
                    "after-snapshot",
                    "--print-value-only",
                    "--consistency=s",
                ],
            )
        })
        .unwrap();
        assert!(
            after.trim().is_empty(),
            "{namespace}: a write after the snapshot came back: {after:?}"
        );
        let status = tokio::task::block_in_place(|| {
            etcdctl(&cluster, &url, &["endpoint", "status", "-w", "json"])
        })
        .unwrap();
        let parsed: serde_json::Value = serde_json::from_str(&status).unwrap();
        let header = &parsed[0]["Status"]["header"];
        seen.push((
            header["cluster_id"].as_u64().map(|id| format!("{id:x}")),
            header["revision"].as_i64(),
        ));
        assert!(header["revision"].as_i64().unwrap() >= revision);
    }
    println!("{namespace}: (cluster ID, revision) per member {seen:?}");
    assert!(
        seen.iter().all(|s| *s == seen[0]),
        "{namespace}: the members disagree: {seen:?}"
    );
    assert_eq!(seen[0].0, status.cluster_id);
    let events = recovery_events(&cluster, namespace).await;
    println!("{namespace}: recovery Events {events:#?}");
    for reason in [
        "QuorumRecoveryStarted",
        "QuorumRecoveryRestoring",
        "QuorumRecoveryCompleted",
    ] {
        assert!(
            events.iter().any(|(r, _)| r == reason),
            "{namespace}: {reason}: {events:?}"
        );
    }
    // The seed's etcd restarts in the same Pod on its data: no second restore.
    let ids = cluster.recorded_ids(namespace, "etcd").await;
    cluster
        .kubelet
        .signal_container(namespace, "etcd-0", Some("etcd"), Signal::SIGKILL)
        .unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    cluster.wait_converged(namespace, "etcd", 3, LIMIT).await;
    assert_eq!(cluster.recorded_ids(namespace, "etcd").await, ids);
    let keys = tokio::task::block_in_place(|| {
        etcdctl(
            &cluster,
            &member_url(namespace, "etcd-0"),
            &["get", "", "--prefix", "--keys-only", "--consistency=s"],
        )
    })
    .unwrap();
    assert!(keys.contains(SENTINEL), "{keys}");
}

async fn no_snapshot(cluster: Arc<Cluster>) {
    let namespace = "no-snapshot";
    let workload = prepare(&cluster, namespace, 3, "3.5.1", MEMORY).await;
    workload.stop().await.assert_no_loss();
    let before = support::members(&cluster.client(), namespace, "etcd").await;
    delete_every_pod(&cluster, namespace, 3).await;
    wait_quorum_lost(&cluster, namespace).await;
    let (code, out, err) = plugin(&cluster, namespace, &["recover-quorum"]).await;
    assert_eq!(code, 0, "{namespace}: recover-quorum: {out}{err}");
    let refused = eventually(&format!("{namespace}: refused"), LIMIT, || async {
        cluster
            .events(namespace)
            .await
            .into_iter()
            .find(|(r, _)| r == "QuorumRecoveryRefused")
            .ok_or("no QuorumRecoveryRefused Event yet".to_string())
    })
    .await;
    println!("{namespace}: {refused:?}");
    for what in [
        "no Complete and verified EtcdSnapshot",
        "nothing was deleted",
        "snapshot:<EtcdSnapshot name>",
        "delete the EtcdCluster",
    ] {
        assert!(
            refused.1.contains(what),
            "{namespace}: {what}: {}",
            refused.1
        );
    }
    tokio::time::sleep(Duration::from_secs(20)).await;
    let object = get_cluster(&cluster.client(), namespace, "etcd").await;
    let status = object.status.clone().unwrap_or_default();
    assert!(status.quorum_recovery.is_none(), "{namespace}: {status:?}");
    assert_eq!(
        support::condition(&object, "Available").as_deref(),
        Some("False")
    );
    let after = support::members(&cluster.client(), namespace, "etcd").await;
    let names = |l: &[etcd_operator_api::EtcdMember]| {
        l.iter().map(|m| m.metadata.uid.clone()).collect::<Vec<_>>()
    };
    assert_eq!(
        names(&after),
        names(&before),
        "{namespace}: no EtcdMember was deleted"
    );
    assert!(
        recovery_events(&cluster, namespace)
            .await
            .iter()
            .all(|(r, _)| r == "QuorumRecoveryRefused"),
        "{namespace}: nothing started"
    );
}

const BUCKET: &str = "backups";
const SNAPSHOT_CRASH_POINT: &str = "after_pod_create";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn e2e_quorum_recovery() {
    let started = Instant::now();
    let cluster = Arc::new(start_healing_cluster(3).await);
    let mut operator = OperatorDeployment::repairing();
    operator.failpoints = true;
    cluster.deploy_operator_with(&operator).await;
    let moto_dir = tempfile::tempdir().unwrap();
    let moto = Arc::new(tokio::task::block_in_place(|| {
        support::moto::Moto::start(&cluster, moto_dir.path(), BUCKET)
    }));
    let snapshot = tokio::spawn(from_snapshot(cluster.clone(), moto.clone()));
    let none = tokio::spawn(no_snapshot(cluster.clone()));
    let only_snapshot = std::env::var("E2E_QUORUM_ONLY").is_ok_and(|v| v == "snapshot");
    if only_snapshot {
        snapshot.await.unwrap();
        none.await.unwrap();
        assert!(cluster.armed_failpoints().is_empty());
        assert!(cluster.operator_restarts().await >= 1);
        return;
    }
    let manual = tokio::spawn(wiped(
        cluster.clone(),
        "manual",
        Trigger::Manual,
        3,
        support::NEWEST_37,
        &["etcd-1", "etcd-2"],
    ));
    let automatic = tokio::spawn(wiped(
        cluster.clone(),
        "automatic",
        Trigger::Automatic,
        3,
        "3.4.23",
        &["etcd-1", "etcd-2"],
    ));
    let five = tokio::spawn(wiped(
        cluster.clone(),
        "three-of-five",
        Trigger::Automatic,
        5,
        "3.5.1",
        &["etcd-1", "etcd-2", "etcd-3"],
    ));
    let restart = tokio::spawn(restarting(cluster.clone(), "restarting"));
    manual.await.unwrap();
    automatic.await.unwrap();
    five.await.unwrap();
    restart.await.unwrap();
    snapshot.await.unwrap();
    none.await.unwrap();
    assert!(
        cluster.armed_failpoints().is_empty(),
        "every crash point fired: {:?} left",
        cluster.armed_failpoints()
    );
    let restarts = cluster.operator_restarts().await;
    println!("operator restarts (crash points): {restarts}");
    assert!(restarts > CRASH_POINTS.len() as i32, "{restarts}");
    println!(
        "quorum recovery: {:.0} s in all",
        started.elapsed().as_secs_f64()
    );
}
