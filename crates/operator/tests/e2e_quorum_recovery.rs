//! Lost-quorum recovery end to end, with real etcd (3.5.1, and 3.4.23 for `automatic`), the operator deployed in the sandbox
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

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use support::cluster::Cluster;
use support::healing::{OperatorDeployment, start_healing_cluster};
use support::workload::Workload;
use support::{cluster_yaml, create_namespace, eventually, get_cluster};

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
    let manifest = cluster_yaml("etcd", namespace, replicas, extra_spec)
        .replace("\"3.5.1\"", &format!("\"{version}\""));
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
    workload.stop().await.assert_no_loss();

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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn e2e_quorum_recovery() {
    let started = Instant::now();
    let cluster = Arc::new(start_healing_cluster(3).await);
    let mut operator = OperatorDeployment::repairing();
    operator.failpoints = true;
    cluster.deploy_operator_with(&operator).await;
    let manual = tokio::spawn(wiped(
        cluster.clone(),
        "manual",
        Trigger::Manual,
        3,
        "3.5.1",
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
    assert!(
        cluster.armed_failpoints().is_empty(),
        "every crash point fired: {:?} left",
        cluster.armed_failpoints()
    );
    let restarts = cluster.operator_restarts().await;
    println!("operator restarts (crash points): {restarts}");
    assert!(restarts >= CRASH_POINTS.len() as i32, "{restarts}");
    println!(
        "quorum recovery: {:.0} s in all",
        started.elapsed().as_secs_f64()
    );
}
