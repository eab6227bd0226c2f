//! EtcdSnapshot end to end, in one sandbox: real etcd 3.5.36 (3 members) and 3.4.23 (1 member)
//! and a 3.5.1 cluster with mutual TLS and authentication, the operator deployed from
//! `deploy/` under its RBAC, and moto_server as the S3 store (authentication on), reached
//! from the operator's Pod through the cluster network.
//!
//! Each cluster gets known keys from the client workload, then an EtcdSnapshot: it must reach
//! Complete with the artifact's size and sha256 equal to what a plain S3 client (boto3) reads,
//! and `etcdutl snapshot status` (etcdctl for 3.4) on the downloaded object must show the
//! revision the status records and at least the keys written. Bad input: wrong credentials,
//! an unknown bucket, a missing credentials Secret, an object another snapshot wrote, a
//! missing claim, a missing, a paused and a parked cluster: each Failed with its reason and a
//! Warning Event, no multipart upload left behind, the other snapshot's object untouched. And
//! a snapshot interrupted by an operator restart is taken again by the next operator.
//!
//! `destination.pvc`: a snapshot of a cluster under the client workload, written by the
//! agent Pod onto a claim, whose file (read from the claim's directory) has the SHA-256 and
//! size of the status; a file someone else wrote is never replaced; `deletionPolicy: Delete`
//! removes the file; and a new cluster restored from the file has every key at the
//! snapshot's revision.

use etcd_operator_e2e_support as support;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_operator_api::EtcdSnapshot;
use kube::Api;
use kube::api::ListParams;
use support::certs::{make_ca, make_leaf, member_sans, tls_files};
use support::cluster::{Cluster, ETCDCTL, start_cluster};
use support::events::{events_of, snapshot_taken_once, wait_event};
use support::moto::Moto;
use support::snapshot_tool::snapshot_status;
use support::snapshots::{ready_condition, wait_available, wait_phase};
use support::workload::Workload;
use support::{create_namespace, eventually, get_cluster, kubectl};

const LIMIT: Duration = Duration::from_secs(240);
const BUCKET: &str = "backups";

fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

fn kubectl_ok(cluster: &Cluster, args: &[&str]) {
    let (ok, _, stderr) = blocking(|| kubectl(cluster, args));
    assert!(ok, "kubectl {args:?}: {stderr}");
}

fn apply(cluster: &Cluster, manifest: &str) {
    blocking(|| cluster.apply(manifest));
}

fn cluster_yaml(namespace: &str, name: &str, replicas: i32, version: &str, extra: &str) -> String {
    format!(
        "apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdCluster\nmetadata:\n  name: {name}\n  namespace: {namespace}\nspec:\n  replicas: {replicas}\n  version: \"{version}\"\n{extra}"
    )
}

/// An EtcdSnapshot of cluster `of` to `bucket` under the prefix `key`.
fn snapshot_yaml(
    namespace: &str,
    name: &str,
    of: &str,
    endpoint: &str,
    bucket: &str,
    key: &str,
    secret: &str,
) -> String {
    format!(
        "apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdSnapshot\nmetadata:\n  name: {name}\n  namespace: {namespace}\nspec:\n  clusterRef:\n    name: {of}\n  destination:\n    s3:\n      endpoint: {}\n      bucket: {bucket}\n      key: {key}\n      region: us-east-1\n      forcePathStyle: true\n      credentialsSecretRef:\n        name: {secret}\n",
        endpoint
    )
}

fn credentials_secret(cluster: &Cluster, namespace: &str, name: &str, id: &str, secret: &str) {
    kubectl_ok(
        cluster,
        &[
            "-n",
            namespace,
            "create",
            "secret",
            "generic",
            name,
            &format!("--from-literal=AWS_ACCESS_KEY_ID={id}"),
            &format!("--from-literal=AWS_SECRET_ACCESS_KEY={secret}"),
        ],
    );
}

/// The snapshot is Complete, its artifact is what the store holds, and the object is a
/// snapshot of the revision the status records with at least `keys` keys.
async fn check_complete(
    cluster: &Cluster,
    moto: &Moto,
    namespace: &str,
    name: &str,
    version: &str,
    keys: usize,
) -> EtcdSnapshot {
    let started = Instant::now();
    let s = wait_phase(cluster, namespace, name, "Complete").await;
    let status = s.status.clone().unwrap();
    let artifact = status
        .artifact
        .clone()
        .expect("a Complete snapshot has an artifact");
    let key = format!("{namespace}/{name}.db");
    assert_eq!(artifact.uri, format!("s3://{BUCKET}/{key}"));
    assert_eq!(status.verified, Some(true), "{status:?}");
    assert_eq!(ready_condition(&s).0, "True");
    assert!(
        status
            .member
            .as_deref()
            .is_some_and(|m| m.starts_with("etcd-")),
        "{status:?}"
    );
    assert_eq!(status.etcd_version.as_deref(), Some(version));
    assert!(status.start_time.is_some() && status.completion_time.is_some());

    let held = blocking(|| moto.head(BUCKET, &key)).expect("the object exists");
    assert_eq!(held["size"].as_i64(), artifact.size_bytes, "{held}");
    assert_eq!(
        Some(format!("sha256:{}", held["sha256"].as_str().unwrap())),
        artifact.checksum,
        "{held}"
    );
    assert_eq!(
        held["metadata"]["etcd-snapshot-uid"].as_str(),
        s.metadata.uid.as_deref(),
        "the object records the EtcdSnapshot that wrote it"
    );

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("downloaded.db");
    blocking(|| moto.download(BUCKET, &key, &file));
    let summary = blocking(|| snapshot_status(version, &file));
    assert_eq!(
        summary["revision"].as_i64(),
        status.revision,
        "{namespace}: the status's revision is the snapshot's: {summary}"
    );
    assert!(
        summary["totalKey"].as_u64().unwrap_or_default() as usize >= keys,
        "{namespace}: {keys} keys written, the snapshot holds {summary}"
    );
    // Exactly one of each: the snapshot was taken once.
    snapshot_taken_once(cluster, namespace, name).await;
    println!(
        "{namespace}: {name} Complete, {} bytes at revision {:?} from {:?} ({} keys) in {:.1} s after waiting",
        artifact.size_bytes.unwrap_or_default(),
        status.revision,
        status.member,
        summary["totalKey"],
        started.elapsed().as_secs_f64()
    );
    s
}

/// A cluster with known keys from the client workload, then a snapshot of it.
async fn snapshot_of_plain_cluster(
    cluster: Arc<Cluster>,
    moto: Arc<Moto>,
    namespace: &'static str,
    version: &'static str,
    replicas: i32,
) {
    create_namespace(&cluster.client(), namespace).await;
    apply(
        &cluster,
        &cluster_yaml(namespace, "etcd", replicas, version, ""),
    );
    wait_available(&cluster, namespace, "etcd", replicas).await;
    let workload = Workload::start(
        cluster.network.clone(),
        namespace,
        "etcd",
        "before-snapshot",
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let report = workload.stop().await;
    println!("{namespace}: {}", report.summary());
    report.assert_no_loss();
    assert!(
        report.acknowledged > 0,
        "{namespace}: the workload wrote nothing"
    );
    credentials_secret(
        &cluster,
        namespace,
        "s3-credentials",
        &moto.key_id,
        &moto.secret,
    );
    apply(
        &cluster,
        &snapshot_yaml(
            namespace,
            "first",
            "etcd",
            &moto.url,
            BUCKET,
            namespace,
            "s3-credentials",
        ),
    );
    let s = check_complete(
        &cluster,
        &moto,
        namespace,
        "first",
        version,
        report.keys_stored,
    )
    .await;
    if replicas == 1 {
        // Over 12 MiB: a multipart upload of three parts (5 MiB each but the last).
        let mut client = support::workload::cluster_client(
            &cluster.network,
            &support::workload::client_service_url(namespace, "etcd"),
            None,
        )
        .await
        .expect("an etcd client");
        for i in 0..24u32 {
            let value: Vec<u8> = (0..512 * 1024u32)
                .map(|j| (j.wrapping_mul(2654435761) >> (i % 24)) as u8)
                .collect();
            client
                .put(format!("large/{i:02}"), value, None)
                .await
                .expect("a large put");
        }
        apply(
            &cluster,
            &snapshot_yaml(
                namespace,
                "large",
                "etcd",
                &moto.url,
                BUCKET,
                namespace,
                "s3-credentials",
            ),
        );
        let large = check_complete(
            &cluster,
            &moto,
            namespace,
            "large",
            version,
            report.keys_stored + 24,
        )
        .await;
        let size = large.status.unwrap().artifact.unwrap().size_bytes.unwrap();
        assert!(
            size > 12 * 1024 * 1024,
            "{namespace}: {size} bytes is not a multipart upload"
        );
    }
    if replicas > 1 {
        // From a follower: the leader keeps its disk and network for raft.
        let leader = blocking(|| {
            cluster.etcdctl(
                &format!("http://etcd-client.{namespace}.svc:2379"),
                &["endpoint", "status", "--cluster", "-w", "json"],
            )
        })
        .expect("endpoint status");
        let member = s.status.unwrap().member.unwrap();
        let statuses: serde_json::Value = serde_json::from_str(&leader).unwrap();
        let leader_id = statuses[0]["Status"]["leader"].as_u64();
        let from = statuses
            .as_array()
            .unwrap()
            .iter()
            .find(|e| {
                e["Endpoint"]
                    .as_str()
                    .unwrap_or_default()
                    .contains(&format!("{member}."))
            })
            .and_then(|e| e["Status"]["header"]["member_id"].as_u64());
        assert!(
            from.is_some() && from != leader_id,
            "{namespace}: taken from the leader {member}: {leader}"
        );
    }
}

/// Every bad input against the healthy 3.5.36 cluster in `namespace`, at once.
async fn bad_inputs(cluster: Arc<Cluster>, moto: Arc<Moto>, namespace: &'static str) {
    credentials_secret(
        &cluster,
        namespace,
        "s3-wrong",
        "AKIAWRONGWRONGWRONG",
        "not-the-secret",
    );
    // An object another EtcdSnapshot wrote, where "guarded" would write.
    let guarded_key = format!("{namespace}/guarded.db");
    blocking(|| moto.put_foreign(BUCKET, &guarded_key, "uid-of-another-snapshot"));
    let before = blocking(|| moto.head(BUCKET, &guarded_key)).unwrap();

    // Nothing listens on port 9 of the bridge.
    let closed = moto.url.replace(":9000", ":9");
    let cases: [(&str, String, &str, &str); 6] = [
        (
            "unreachable",
            snapshot_yaml(
                namespace,
                "unreachable",
                "etcd",
                &closed,
                BUCKET,
                namespace,
                "s3-credentials",
            ),
            "EndpointUnreachable",
            "is unreachable",
        ),
        (
            "wrong-credentials",
            snapshot_yaml(
                namespace,
                "wrong-credentials",
                "etcd",
                &moto.url,
                BUCKET,
                namespace,
                "s3-wrong",
            ),
            "Unauthorized",
            "the S3 credentials were refused",
        ),
        (
            "unknown-bucket",
            snapshot_yaml(
                namespace,
                "unknown-bucket",
                "etcd",
                &moto.url,
                "no-such-bucket",
                namespace,
                "s3-credentials",
            ),
            "BucketNotFound",
            "bucket not found",
        ),
        (
            "missing-secret",
            snapshot_yaml(
                namespace,
                "missing-secret",
                "etcd",
                &moto.url,
                BUCKET,
                namespace,
                "no-such-secret",
            ),
            "CredentialsSecretInvalid",
            "does not exist",
        ),
        (
            "guarded",
            snapshot_yaml(
                namespace,
                "guarded",
                "etcd",
                &moto.url,
                BUCKET,
                namespace,
                "s3-credentials",
            ),
            "ObjectExists",
            "never replaced",
        ),
        (
            "no-cluster",
            snapshot_yaml(
                namespace,
                "no-cluster",
                "missing",
                &moto.url,
                BUCKET,
                namespace,
                "s3-credentials",
            ),
            "ClusterNotFound",
            "cluster not found",
        ),
    ];
    let started = Instant::now();
    for (_, manifest, _, _) in &cases {
        apply(&cluster, manifest);
    }
    apply(
        &cluster,
        &format!(
            "apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdSnapshot\nmetadata:\n  name: to-pvc\n  namespace: {namespace}\nspec:\n  clusterRef:\n    name: etcd\n  destination:\n    pvc:\n      claimName: no-such-claim\n"
        ),
    );
    for (name, reason, words) in cases.iter().map(|(n, _, r, w)| (*n, *r, *w)).chain([(
        "to-pvc",
        "ClaimNotFound",
        "claim not found: no PersistentVolumeClaim no-such-claim",
    )]) {
        let s = wait_phase(&cluster, namespace, name, "Failed").await;
        let (status, got, message) = ready_condition(&s);
        assert_eq!(
            (status.as_str(), got.as_str()),
            ("False", reason),
            "{name}: {message}"
        );
        assert!(
            message.contains(words),
            "{name}: {message:?} lacks {words:?}"
        );
        assert_eq!(
            s.status.as_ref().unwrap().failure_reason.as_deref(),
            Some(message.as_str())
        );
        assert!(
            s.status.as_ref().unwrap().artifact.is_none(),
            "{name}: no artifact"
        );
        assert!(!message.contains(&moto.secret) && !message.contains("not-the-secret"));
        // The Event follows the status write: wait for it rather than read once.
        wait_event(
            &cluster.client(),
            namespace,
            Some("EtcdSnapshot"),
            name,
            Some("Warning"),
            reason,
            Duration::from_secs(30),
        )
        .await;
        println!("{namespace}/{name}: Failed, {reason}: {message}");
    }
    println!(
        "bad inputs: all Failed with their reasons {:.1} s after creation",
        started.elapsed().as_secs_f64()
    );
    let after = blocking(|| moto.head(BUCKET, &guarded_key)).unwrap();
    assert_eq!(before, after, "the other snapshot's object is untouched");
    assert_eq!(
        blocking(|| moto.unfinished_uploads(BUCKET)),
        0,
        "no multipart upload left"
    );
}

/// Snapshots of a paused and of a parked (0 replicas) cluster fail at once with that reason.
async fn idle_clusters(cluster: Arc<Cluster>, moto: Arc<Moto>) {
    let namespace = "snap-idle";
    create_namespace(&cluster.client(), namespace).await;
    credentials_secret(
        &cluster,
        namespace,
        "s3-credentials",
        &moto.key_id,
        &moto.secret,
    );
    apply(&cluster, &cluster_yaml(namespace, "parked", 0, "3.5.1", ""));
    apply(
        &cluster,
        &cluster_yaml(namespace, "paused", 1, "3.5.1", "  paused: true\n"),
    );
    for (of, reason, words) in [
        ("parked", "ClusterParked", "cluster has 0 replicas"),
        ("paused", "ClusterPaused", "cluster is paused"),
    ] {
        apply(
            &cluster,
            &snapshot_yaml(
                namespace,
                of,
                of,
                &moto.url,
                BUCKET,
                namespace,
                "s3-credentials",
            ),
        );
        let s = wait_phase(&cluster, namespace, of, "Failed").await;
        let (_, got, message) = ready_condition(&s);
        assert_eq!(got, reason, "{message}");
        assert!(message.contains(words), "{message}");
        println!("{namespace}/{of}: Failed, {reason}: {message}");
    }
}

/// An EtcdSnapshotSchedule every minute keeping the last 2 (the pure retention is tested over
/// weeks of ticks in `snapshot::schedule`): its first snapshot is taken at once; after the third snapshot completes (the
/// `SNAPSHOT_SCHEDULE_TICKS`th; 3 in the suite, `SNAPSHOT_SCHEDULE_TICKS=10` for the ten
/// runs, 11 minutes), exactly the two newest EtcdSnapshots are left, every older one's object is
/// gone from the store and the two kept are there. Then the deletion policy of a user's snapshots: `Delete` takes the
/// object with it, the default `Retain` leaves it.
async fn scheduled_snapshots(cluster: Arc<Cluster>, moto: Arc<Moto>) {
    let namespace = "snap-sched";
    let started = Instant::now();
    create_namespace(&cluster.client(), namespace).await;
    credentials_secret(
        &cluster,
        namespace,
        "s3-credentials",
        &moto.key_id,
        &moto.secret,
    );
    apply(&cluster, &cluster_yaml(namespace, "etcd", 1, "3.5.1", ""));
    wait_available(&cluster, namespace, "etcd", 1).await;
    apply(
        &cluster,
        &format!(
            "apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdSnapshotSchedule\nmetadata:\n  name: minutely\n  namespace: {namespace}\nspec:\n  clusterRef:\n    name: etcd\n  schedule: \"* * * * *\"\n  retention:\n    keepLast: 2\n  template:\n    destination:\n      s3:\n        endpoint: {}\n        bucket: {BUCKET}\n        key: sched\n        region: us-east-1\n        forcePathStyle: true\n        credentialsSecretRef:\n          name: s3-credentials\n",
            moto.url
        ),
    );
    let api: Api<EtcdSnapshot> = Api::namespaced(cluster.client(), namespace);
    let label = "etcd-operator.cozystack.io/snapshot-schedule=minutely";
    let schedules: Api<etcd_operator_api::EtcdSnapshotSchedule> =
        Api::namespaced(cluster.client(), namespace);
    let ticks: usize = std::env::var("SNAPSHOT_SCHEDULE_TICKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n >= 3)
        .unwrap_or(3);
    let seen_so_far = std::sync::Mutex::new(Vec::<String>::new());
    eventually(
        &format!("{ticks} scheduled snapshots, the two newest kept"),
        Duration::from_secs(120 + 60 * ticks as u64),
        || async {
            let list = api
                .list(&ListParams::default().labels(label))
                .await
                .map_err(|e| e.to_string())?;
            let status = schedules
                .get("minutely")
                .await
                .map_err(|e| e.to_string())?
                .status
                .unwrap_or_default();
            let names: Vec<(String, Option<String>)> = list
                .items
                .iter()
                .filter(|s| s.metadata.deletion_timestamp.is_none())
                .map(|s| {
                    let phase = s
                        .status
                        .as_ref()
                        .and_then(|s| s.phase)
                        .map(|p| format!("{p:?}"));
                    (s.metadata.name.clone().unwrap_or_default(), phase)
                })
                .collect();
            let mut seen = seen_so_far.lock().unwrap();
            for (name, _) in &names {
                if !seen.contains(name) {
                    seen.push(name.clone());
                }
            }
            seen.sort();
            let complete = names
                .iter()
                .filter(|(_, p)| p.as_deref() == Some("Complete"))
                .count();
            (seen.len() >= ticks && complete == 2 && status.kept == Some(2))
                .then_some(())
                .ok_or_else(|| format!("seen {seen:?}, now {names:?}, status {status:?}"))
        },
    )
    .await;
    let seen = seen_so_far.into_inner().unwrap();
    // The first one was taken at once, not at the first tick: it is named for the schedule's
    // creation (`spec.firstSnapshot` defaults to `Immediately`).
    let created = schedules
        .get("minutely")
        .await
        .unwrap()
        .metadata
        .creation_timestamp
        .expect("a creation timestamp");
    assert_eq!(
        seen.first(),
        Some(&format!("minutely-{}", created.0.as_second())),
        "the schedule's first snapshot is the one taken at its creation"
    );
    let key = |name: &str| format!("sched/{name}.db");
    // Names are `<schedule>-<unix tick>`: sorted, they are in the order of their ticks.
    let pruned = &seen[..seen.len() - 2];
    eventually("the pruned snapshots' objects to go", LIMIT, || async {
        let left: Vec<String> = pruned
            .iter()
            .filter(|name| blocking(|| moto.head(BUCKET, &key(name))).is_ok())
            .map(|name| key(name))
            .collect();
        left.is_empty()
            .then_some(())
            .ok_or_else(|| format!("{left:?} still in the store"))
    })
    .await;
    for kept in &seen[seen.len() - 2..] {
        let head = blocking(|| moto.head(BUCKET, &key(kept))).expect("a kept snapshot's object");
        assert!(head["size"].as_i64().unwrap_or(0) > 0, "{head}");
    }
    let status = schedules.get("minutely").await.unwrap().status.unwrap();
    assert_eq!(status.newest_verified.as_ref(), seen.last());
    assert!(status.last_successful_time.is_some(), "{status:?}");
    println!(
        "{namespace}: {} scheduled snapshots, {} pruned with their objects, 2 kept ({:.0} s)",
        seen.len(),
        pruned.len(),
        started.elapsed().as_secs_f64()
    );
    kubectl_ok(
        &cluster,
        &[
            "-n",
            namespace,
            "patch",
            "etcdsnapshotschedule",
            "minutely",
            "--type=merge",
            "-p",
            "{\"spec\":{\"suspend\":true}}",
        ],
    );

    // A user's snapshots: `Delete` takes the object along, `Retain` (the default) does not.
    for (name, policy) in [("by-hand-delete", "Delete"), ("by-hand-retain", "Retain")] {
        let mut yaml = snapshot_yaml(
            namespace,
            name,
            "etcd",
            &moto.url,
            BUCKET,
            "by-hand",
            "s3-credentials",
        );
        if policy == "Delete" {
            yaml.push_str("  deletionPolicy: Delete\n");
        }
        apply(&cluster, &yaml);
        wait_phase(&cluster, namespace, name, "Complete").await;
        let object = format!("by-hand/{name}.db");
        blocking(|| moto.head(BUCKET, &object)).expect("the object is stored");
        kubectl_ok(
            &cluster,
            &[
                "-n",
                namespace,
                "delete",
                "etcdsnapshot",
                name,
                "--timeout=120s",
            ],
        );
        let gone = blocking(|| moto.head(BUCKET, &object)).is_err();
        assert_eq!(gone, policy == "Delete", "{policy}: object gone {gone}");
        println!("{namespace}/{name}: deleted, deletionPolicy {policy}, object gone: {gone}");
    }
}

/// An EtcdSnapshot of cluster `of` to `<subPath>/<name>.db` on claim `claim`.
fn pvc_snapshot_yaml(namespace: &str, name: &str, of: &str, claim: &str, sub_path: &str) -> String {
    format!(
        "apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdSnapshot\nmetadata:\n  name: {name}\n  namespace: {namespace}\nspec:\n  clusterRef:\n    name: {of}\n  destination:\n    pvc:\n      claimName: {claim}\n      subPath: {sub_path}\n"
    )
}

fn sha256_hex(file: &Path) -> (u64, String) {
    let bytes = std::fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let digest = ring::digest::digest(&ring::digest::SHA256, &bytes);
    (
        bytes.len() as u64,
        digest.as_ref().iter().map(|b| format!("{b:02x}")).collect(),
    )
}

/// `destination.pvc` and `bootstrap.restore.source.pvc`, in namespace `snap-pvc`, on the
/// default version (the newest 3.6).
async fn pvc_snapshot_and_restore(cluster: Arc<Cluster>) {
    let namespace = "snap-pvc";
    create_namespace(&cluster.client(), namespace).await;
    apply(
        &cluster,
        &cluster_yaml(namespace, "etcd", 3, support::DEFAULT_VERSION, ""),
    );
    apply(
        &cluster,
        &format!(
            "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: backups\n  namespace: {namespace}\nspec:\n  accessModes: [ReadWriteOnce]\n  resources:\n    requests:\n      storage: 1Gi\n"
        ),
    );
    wait_available(&cluster, namespace, "etcd", 3).await;

    // Under the client workload: it writes before, during and after the snapshot.
    let workload = Workload::start(cluster.network.clone(), namespace, "etcd", "pvc");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let started = Instant::now();
    apply(
        &cluster,
        &pvc_snapshot_yaml(namespace, "nightly", "etcd", "backups", "etcd/nightly"),
    );
    let s = wait_phase(&cluster, namespace, "nightly", "Complete").await;
    let took = started.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let report = workload.stop().await;
    println!("{namespace}: {}", report.summary());
    report.assert_no_loss();
    assert!(
        report.acknowledged > 0,
        "{namespace}: the workload wrote nothing"
    );

    let status = s.status.clone().unwrap();
    let artifact = status.artifact.clone().expect("an artifact");
    assert_eq!(artifact.uri, "pvc://backups/etcd/nightly/nightly.db");
    assert_eq!(status.verified, Some(true), "{status:?}");
    assert_eq!(ready_condition(&s).0, "True");
    assert_eq!(
        status.etcd_version.as_deref(),
        Some(support::DEFAULT_VERSION)
    );
    assert!(
        status
            .member
            .as_deref()
            .is_some_and(|m| m.starts_with("etcd-")),
        "{status:?}"
    );
    // The file, as the claim holds it: the status's size and SHA-256, the owner file beside
    // it, a snapshot of the recorded revision; no temporary file left.
    let claim_dir = cluster
        .kubelet
        .claim_dir(namespace, "backups")
        .expect("the claim's directory");
    let dir = claim_dir.join("etcd/nightly");
    let file = dir.join("nightly.db");
    let (size, sha) = blocking(|| sha256_hex(&file));
    assert_eq!(Some(size as i64), artifact.size_bytes);
    assert_eq!(Some(format!("sha256:{sha}")), artifact.checksum);
    assert_eq!(
        std::fs::read_to_string(dir.join("nightly.db.uid")).unwrap(),
        s.metadata.uid.clone().unwrap(),
        "the owner file names the EtcdSnapshot"
    );
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["nightly.db", "nightly.db.uid"],
        "no temporary file left"
    );
    let summary = blocking(|| snapshot_status(support::DEFAULT_VERSION, &file));
    assert_eq!(summary["revision"].as_i64(), status.revision, "{summary}");
    // The agent's Pod and its Secret (if any) go once the result is recorded.
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(cluster.client(), namespace);
    let selector = format!(
        "etcd-operator.cozystack.io/snapshot-uid={}",
        s.metadata.uid.clone().unwrap()
    );
    eventually(
        &format!("{namespace}: the agent Pod removed"),
        LIMIT,
        || async {
            let left = pods
                .list(&ListParams::default().labels(&selector))
                .await
                .map_err(|e| e.to_string())?;
            left.items
                .is_empty()
                .then_some(())
                .ok_or_else(|| format!("{} Pods left", left.items.len()))
        },
    )
    .await;
    println!(
        "{namespace}: nightly Complete on the claim, {size} bytes at revision {:?} from {:?} under the workload, {took:.1} s after creation; the file's SHA-256 is the status's",
        status.revision, status.member
    );

    // A file nobody's EtcdSnapshot wrote is never replaced.
    let foreign = dir.join("guarded.db");
    std::fs::write(&foreign, b"someone else's file").unwrap();
    apply(
        &cluster,
        &pvc_snapshot_yaml(namespace, "guarded", "etcd", "backups", "etcd/nightly"),
    );
    let g = wait_phase(&cluster, namespace, "guarded", "Failed").await;
    let (_, reason, message) = ready_condition(&g);
    assert_eq!(reason, "FileExists", "{message}");
    assert!(message.contains("never replaced"), "{message}");
    assert_eq!(std::fs::read(&foreign).unwrap(), b"someone else's file");
    // The Event follows the status write: wait for it rather than read once.
    wait_event(
        &cluster.client(),
        namespace,
        Some("EtcdSnapshot"),
        "guarded",
        Some("Warning"),
        "FileExists",
        Duration::from_secs(30),
    )
    .await;

    // deletionPolicy Delete: the file goes with the EtcdSnapshot (through a short Pod).
    let mut disposable = pvc_snapshot_yaml(namespace, "disposable", "etcd", "backups", "tmp");
    disposable.push_str("  deletionPolicy: Delete\n");
    apply(&cluster, &disposable);
    wait_phase(&cluster, namespace, "disposable", "Complete").await;
    let disposable_file = claim_dir.join("tmp/disposable.db");
    assert!(disposable_file.is_file());
    kubectl_ok(
        &cluster,
        &[
            "-n",
            namespace,
            "delete",
            "etcdsnapshot",
            "disposable",
            "--timeout=180s",
        ],
    );
    assert!(
        !disposable_file.exists(),
        "deletionPolicy Delete removed the file"
    );
    assert!(!claim_dir.join("tmp/disposable.db.uid").exists());
    println!("{namespace}: disposable deleted with its file (deletionPolicy Delete)");

    // A new cluster from the file: every key at the snapshot's revision.
    let revision = status.revision.expect("a revision");
    let restore_started = Instant::now();
    apply(
        &cluster,
        &cluster_yaml(
            namespace,
            "restored",
            1,
            support::DEFAULT_VERSION,
            "  bootstrap:\n    restore:\n      source:\n        pvc:\n          claimName: backups\n          subPath: etcd/nightly/nightly.db\n",
        ),
    );
    wait_available(&cluster, namespace, "restored", 1).await;
    let c = get_cluster(&cluster.client(), namespace, "restored").await;
    let restored = c
        .status
        .as_ref()
        .and_then(|s| s.restored_from.clone())
        .expect("status.restoredFrom");
    assert_eq!(restored.uri, "pvc://backups/etcd/nightly/nightly.db");
    assert_eq!(restored.revision, Some(revision));
    let at_snapshot = blocking(|| {
        cluster.etcdctl(
            &format!("http://etcd-client.{namespace}.svc:2379"),
            &[
                "get",
                "",
                "--prefix",
                "-w",
                "json",
                &format!("--rev={revision}"),
            ],
        )
    })
    .expect("the source at the snapshot's revision");
    let at_snapshot: serde_json::Value = serde_json::from_str(&at_snapshot).unwrap();
    let expected = at_snapshot["kvs"].as_array().cloned().unwrap_or_default();
    assert!(!expected.is_empty(), "keys to compare");
    let (restored_revision, kvs) = keyspace(
        &cluster,
        &format!("http://restored-0.restored.{namespace}.svc:2379"),
    );
    assert_eq!(restored_revision, revision);
    assert_eq!(kvs.len(), expected.len(), "key count");
    for (got, want) in kvs.iter().zip(&expected) {
        for field in ["key", "value", "create_revision", "mod_revision", "version"] {
            assert_eq!(got[field], want[field], "{field} of {got} / {want}");
        }
    }
    println!(
        "{namespace}: restored from the claim ({} keys at revision {revision}), Available after {:.1} s",
        expected.len(),
        restore_started.elapsed().as_secs_f64()
    );
}

/// A 3.5.1 cluster with mutual TLS on both ports and authentication: the operator dials it
/// with its client certificate and the root password, as it does for everything else.
async fn tls_auth_cluster(cluster: Arc<Cluster>, moto: Arc<Moto>) {
    let namespace = "snap-tls";
    create_namespace(&cluster.client(), namespace).await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    blocking(|| {
        make_ca(d, "ca");
        let sans = member_sans(namespace);
        make_leaf(
            d,
            "ca",
            "server",
            "etcd",
            Some(&sans),
            "serverAuth,clientAuth",
        );
        make_leaf(
            d,
            "ca",
            "peer",
            "etcd-peer",
            Some(&sans),
            "serverAuth,clientAuth",
        );
        make_leaf(d, "ca", "client", "root", None, "clientAuth");
    });
    for (secret, leaf) in [
        ("etcd-server", "server"),
        ("etcd-peer", "peer"),
        ("etcd-operator-client", "client"),
    ] {
        let mut args = vec![
            "-n".to_string(),
            namespace.to_string(),
            "create".into(),
            "secret".into(),
            "generic".into(),
            secret.into(),
            "--type=kubernetes.io/tls".into(),
        ];
        for (key, path) in tls_files(d, leaf, "ca") {
            args.push(format!("--from-file={key}={}", path.display()));
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        kubectl_ok(&cluster, &refs);
    }
    blocking(|| {
        support::create_root_secret(&cluster, namespace, "etcd-root", "snapshot-root-password")
    });
    let extra = "  tls:\n    client:\n      serverSecretRef:\n        name: etcd-server\n      operatorClientSecretRef:\n        name: etcd-operator-client\n    peer:\n      secretRef:\n        name: etcd-peer\n  auth:\n    enabled: true\n    rootCredentialsSecretRef:\n      name: etcd-root\n";
    apply(
        &cluster,
        &cluster_yaml(namespace, "etcd", 1, "3.5.1", extra),
    );
    wait_available(&cluster, namespace, "etcd", 1).await;
    let client = cluster.client();
    eventually("authentication enabled", LIMIT, || async {
        let c = get_cluster(&client, namespace, "etcd").await;
        (c.status.as_ref().and_then(|s| s.auth_enabled) == Some(true))
            .then_some(())
            .ok_or_else(|| format!("{:?}", c.status))
    })
    .await;
    // A key, written over mutual TLS as root.
    let out = blocking(|| {
        cluster
            .network
            .command(ETCDCTL)
            .unwrap()
            .arg(format!(
                "--endpoints=https://etcd-client.{namespace}.svc:2379"
            ))
            .arg(format!("--cacert={}", d.join("ca.crt").display()))
            .arg(format!("--cert={}", d.join("client.crt").display()))
            .arg(format!("--key={}", d.join("client.key").display()))
            .args([
                "--user=root:snapshot-root-password",
                "--command-timeout=10s",
                "put",
                "secured-key",
                "secured-value",
            ])
            .output()
            .expect("etcdctl runs")
    });
    assert!(
        out.status.success(),
        "put over TLS: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    credentials_secret(
        &cluster,
        namespace,
        "s3-credentials",
        &moto.key_id,
        &moto.secret,
    );
    apply(
        &cluster,
        &snapshot_yaml(
            namespace,
            "secured",
            "etcd",
            &moto.url,
            BUCKET,
            namespace,
            "s3-credentials",
        ),
    );
    check_complete(&cluster, &moto, namespace, "secured", "3.5.1", 1).await;

    // To a claim: the agent Pod dials with the operator's CA, client certificate and root
    // credentials (a Secret made for that Pod alone, deleted with it).
    apply(
        &cluster,
        &format!(
            "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: backups\n  namespace: {namespace}\nspec:\n  accessModes: [ReadWriteOnce]\n  resources:\n    requests:\n      storage: 1Gi\n"
        ),
    );
    apply(
        &cluster,
        &pvc_snapshot_yaml(namespace, "secured-pvc", "etcd", "backups", "tls"),
    );
    let s = wait_phase(&cluster, namespace, "secured-pvc", "Complete").await;
    let artifact = s.status.clone().unwrap().artifact.unwrap();
    let file = cluster
        .kubelet
        .claim_dir(namespace, "backups")
        .unwrap()
        .join("tls/secured-pvc.db");
    let (size, sha) = blocking(|| sha256_hex(&file));
    assert_eq!(Some(size as i64), artifact.size_bytes);
    assert_eq!(Some(format!("sha256:{sha}")), artifact.checksum);
    let summary = blocking(|| snapshot_status("3.5.1", &file));
    assert!(
        summary["totalKey"].as_u64().unwrap_or_default() >= 1,
        "{summary}"
    );
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(cluster.client(), namespace);
    let selector = format!(
        "etcd-operator.cozystack.io/snapshot-uid={}",
        s.metadata.uid.clone().unwrap()
    );
    eventually(
        &format!("{namespace}: the agent's access Secret removed"),
        LIMIT,
        || async {
            let left = secrets
                .list(&ListParams::default().labels(&selector))
                .await
                .map_err(|e| e.to_string())?;
            left.items
                .is_empty()
                .then_some(())
                .ok_or_else(|| format!("{} Secrets left", left.items.len()))
        },
    )
    .await;
    println!(
        "{namespace}: secured-pvc Complete on the claim over mutual TLS with auth, {size} bytes"
    );
}

/// An operator that stopped in the middle of a snapshot (the status still says `Started`; here
/// the upload had completed, the worst case for the overwrite guard): the next operator takes
/// the snapshot again, replacing only its own object, and records it. Runs last: it restarts
/// the operator.
async fn interrupted_snapshot_resumes(cluster: Arc<Cluster>, moto: Arc<Moto>, namespace: &str) {
    let api: Api<EtcdSnapshot> = Api::namespaced(cluster.client(), namespace);
    let first = api.get("first").await.expect("the first snapshot");
    let first_status = first.status.clone().unwrap();
    api.patch_status(
        "first",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(serde_json::json!({"status": {"phase": "Started"}})),
    )
    .await
    .expect("setting the phase back to Started");
    let pods: Api<k8s_openapi::api::core::v1::Pod> =
        Api::namespaced(cluster.client(), support::cluster::OPERATOR_NAMESPACE);
    for pod in cluster.operator_pods().await {
        pods.delete(
            pod.metadata.name.as_deref().unwrap(),
            &kube::api::DeleteParams::default(),
        )
        .await
        .expect("deleting the operator's Pod");
    }
    let started = Instant::now();
    cluster.wait_operator_ready(1).await;
    let ready_after = started.elapsed().as_secs_f64();
    let again = wait_phase(&cluster, namespace, "first", "Complete").await;
    let status = again.status.clone().unwrap();
    assert_ne!(
        status.completion_time, first_status.completion_time,
        "the snapshot was taken again"
    );
    assert_eq!(status.verified, Some(true));
    let key = format!("{namespace}/first.db");
    let held = blocking(|| moto.head(BUCKET, &key)).expect("the object exists");
    assert_eq!(
        held["size"].as_i64(),
        status.artifact.as_ref().unwrap().size_bytes
    );
    assert_eq!(
        Some(format!("sha256:{}", held["sha256"].as_str().unwrap())),
        status.artifact.unwrap().checksum
    );
    let started_events = events_of(&cluster, namespace, "EtcdSnapshot", "first")
        .await
        .into_iter()
        .filter(|(_, reason)| reason == "SnapshotStarted")
        .count();
    assert_eq!(started_events, 2, "taken once more, not more");
    println!(
        "{namespace}/first: interrupted, taken again by the restarted operator {:.1} s after its Pod was deleted (the new operator ready after {ready_after:.1} s)",
        started.elapsed().as_secs_f64()
    );
}

/// An EtcdCluster bootstrapped from the object `key`.
fn restored_cluster_yaml(
    namespace: &str,
    name: &str,
    replicas: i32,
    version: &str,
    endpoint: &str,
    key: &str,
    secret: &str,
) -> String {
    cluster_yaml(
        namespace,
        name,
        replicas,
        version,
        &format!(
            "  bootstrap:\n    restore:\n      source:\n        s3:\n          endpoint: {endpoint}\n          bucket: {BUCKET}\n          key: {key}\n          forcePathStyle: true\n          credentialsSecretRef:\n            name: {secret}\n"
        ),
    )
}

/// Every key with its value and revisions, and the store's revision, as one member (or the
/// client Service) answers.
fn keyspace(cluster: &Cluster, endpoint: &str) -> (i64, Vec<serde_json::Value>) {
    let out = blocking(|| cluster.etcdctl(endpoint, &["get", "", "--prefix", "-w", "json"]))
        .expect("etcdctl get --prefix");
    let json: serde_json::Value = serde_json::from_str(&out).expect("etcdctl prints JSON");
    let revision = json["header"]["revision"].as_i64().expect("a revision");
    let kvs = json["kvs"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|kv| {
            serde_json::json!({
                "key": kv["key"], "value": kv["value"], "create_revision": kv["create_revision"],
                "mod_revision": kv["mod_revision"], "version": kv["version"],
            })
        })
        .collect();
    (revision, kvs)
}

/// A new cluster restored from the EtcdSnapshot `snapshot` of the cluster in `from` (which
/// took no writes since): every key, value and revision equal, the status names the source
/// and the revision, the other members joined as learners. With `wipe`, the restored seed's
/// volume is then wiped: it is replaced from the live cluster, never restored again.
#[allow(clippy::too_many_arguments)]
async fn restore_into_new_cluster(
    cluster: Arc<Cluster>,
    moto: Arc<Moto>,
    from: &'static str,
    snapshot: &'static str,
    namespace: &'static str,
    version: &'static str,
    replicas: i32,
    wipe: bool,
) {
    create_namespace(&cluster.client(), namespace).await;
    credentials_secret(
        &cluster,
        namespace,
        "s3-credentials",
        &moto.key_id,
        &moto.secret,
    );
    let key = format!("{from}/{snapshot}.db");
    let started = Instant::now();
    apply(
        &cluster,
        &restored_cluster_yaml(
            namespace,
            "etcd",
            replicas,
            version,
            &moto.url,
            &key,
            "s3-credentials",
        ),
    );
    wait_available(&cluster, namespace, "etcd", replicas).await;
    let available_after = started.elapsed().as_secs_f64();

    let source = Api::<EtcdSnapshot>::namespaced(cluster.client(), from)
        .get(snapshot)
        .await
        .expect("the source snapshot");
    let (source_revision, source_kvs) =
        keyspace(&cluster, &format!("http://etcd-client.{from}.svc:2379"));
    assert!(!source_kvs.is_empty(), "{from}: keys to compare");
    let c = get_cluster(&cluster.client(), namespace, "etcd").await;
    let restored = c
        .status
        .as_ref()
        .and_then(|s| s.restored_from.clone())
        .expect("status.restoredFrom");
    assert_eq!(restored.uri, format!("s3://{BUCKET}/{key}"));
    assert_eq!(
        restored.revision,
        Some(source_revision),
        "{namespace}: restored at the snapshot's revision"
    );
    assert_eq!(
        source.status.as_ref().and_then(|s| s.revision),
        Some(source_revision),
        "{from}: no write since the snapshot"
    );
    for i in 0..replicas {
        let url = format!("http://etcd-{i}.etcd.{namespace}.svc:2379");
        let (revision, kvs) = keyspace(&cluster, &url);
        assert_eq!(revision, source_revision, "{namespace}/etcd-{i}: revision");
        assert_eq!(
            kvs.len(),
            source_kvs.len(),
            "{namespace}/etcd-{i}: key count"
        );
        assert!(kvs == source_kvs, "{namespace}/etcd-{i}: keys differ");
    }
    // The first member was restored (its Pod ran the restore init containers); the others
    // joined as learners (plain Pods) and were promoted.
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(cluster.client(), namespace);
    for i in 0..replicas {
        let pod = pods.get(&format!("etcd-{i}")).await.expect("a member Pod");
        let inits: Vec<String> = pod
            .spec
            .unwrap()
            .init_containers
            .unwrap_or_default()
            .into_iter()
            .map(|c| c.name)
            .collect();
        if i == 0 {
            assert_eq!(inits, ["restore-fetch", "restore", "restore-commit"]);
        } else {
            assert!(inits.is_empty(), "etcd-{i}: {inits:?}");
        }
    }
    let members = blocking(|| {
        cluster.etcdctl(
            &format!("http://etcd-client.{namespace}.svc:2379"),
            &["member", "list", "-w", "json"],
        )
    })
    .unwrap();
    let members: serde_json::Value = serde_json::from_str(&members).unwrap();
    let list = members["members"].as_array().unwrap();
    assert_eq!(list.len() as i32, replicas, "{members}");
    assert!(
        list.iter().all(|m| m["isLearner"].as_bool() != Some(true)),
        "{members}"
    );
    println!(
        "{namespace}: {replicas} member(s) restored from {key} ({} keys, revision {source_revision}), Available after {available_after:.1} s, every key and revision equal",
        source_kvs.len()
    );
    if !wipe {
        return;
    }
    let client_url = format!("http://etcd-client.{namespace}.svc:2379");
    blocking(|| cluster.etcdctl(&client_url, &["put", "after-restore", "live"])).unwrap();
    let ids_before = cluster.recorded_ids(namespace, "etcd").await;
    let wiped = Instant::now();
    cluster
        .kubelet
        .wipe_claim(namespace, "data-etcd-0")
        .unwrap();
    cluster
        .kubelet
        .signal_container(
            namespace,
            "etcd-0",
            Some("etcd"),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
    let client = cluster.client();
    let old_seed = ids_before
        .iter()
        .find(|(n, _)| n == "etcd-0")
        .map(|(_, id)| id.clone())
        .unwrap();
    eventually(
        &format!("{namespace}: the wiped seed replaced"),
        LIMIT,
        || async {
            let now = cluster.recorded_ids(namespace, "etcd").await;
            let seed = now
                .iter()
                .find(|(n, _)| n == "etcd-0")
                .map(|(_, id)| id.clone())
                .unwrap_or_default();
            let c = get_cluster(&client, namespace, "etcd").await;
            let ready = c.status.as_ref().and_then(|s| s.ready_members);
            if !seed.is_empty() && seed != old_seed && ready == Some(replicas) {
                Ok(())
            } else {
                Err(format!("seed {seed:?} (was {old_seed}), ready {ready:?}"))
            }
        },
    )
    .await;
    let pod = pods.get("etcd-0").await.unwrap();
    assert!(
        pod.spec
            .unwrap()
            .init_containers
            .unwrap_or_default()
            .is_empty(),
        "{namespace}: the replacement seed Pod restores nothing"
    );
    let url = format!("http://etcd-0.etcd.{namespace}.svc:2379");
    eventually(
        &format!("{namespace}/etcd-0 has the live data"),
        LIMIT,
        || async {
            let value = blocking(|| {
                cluster.etcdctl(&url, &["get", "after-restore", "--print-value-only"])
            })?;
            (value.trim() == "live")
                .then_some(())
                .ok_or_else(|| format!("after-restore = {value:?}"))
        },
    )
    .await;
    println!(
        "{namespace}: the restored seed's wiped volume: replaced from the live cluster under a new ID in {:.1} s, not restored again",
        wiped.elapsed().as_secs_f64()
    );
}

/// Restore sources that cannot work: each cluster's seed stays out of service with the reason
/// in the cluster's conditions and a Warning Event, and its etcd never starts.
async fn restore_bad_inputs(cluster: Arc<Cluster>, moto: Arc<Moto>, snapshot_key: String) {
    let namespace = "restore-bad";
    create_namespace(&cluster.client(), namespace).await;
    credentials_secret(
        &cluster,
        namespace,
        "s3-credentials",
        &moto.key_id,
        &moto.secret,
    );
    credentials_secret(
        &cluster,
        namespace,
        "s3-wrong",
        "AKIAWRONGWRONGWRONG",
        "not-the-secret",
    );
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("notes.txt");
    std::fs::write(
        &text,
        "these are not the bytes of an etcd snapshot\n".repeat(100),
    )
    .unwrap();
    blocking(|| moto.upload(BUCKET, "restore-bad/notes.db", &text));
    // A real snapshot with one byte flipped in the middle: etcd's trailing hash disagrees.
    let real = dir.path().join("real.db");
    blocking(|| moto.download(BUCKET, &snapshot_key, &real));
    let mut bytes = std::fs::read(&real).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    let damaged = dir.path().join("damaged.db");
    std::fs::write(&damaged, &bytes).unwrap();
    blocking(|| moto.upload(BUCKET, "restore-bad/damaged.db", &damaged));

    let cases = [
        (
            "missing",
            "restore-bad/none.db",
            "s3-credentials",
            "SnapshotNotFound",
            "does not exist",
        ),
        (
            "not-a-snapshot",
            "restore-bad/notes.db",
            "s3-credentials",
            "NotASnapshot",
            "is not an etcd snapshot",
        ),
        (
            "damaged",
            "restore-bad/damaged.db",
            "s3-credentials",
            "NotASnapshot",
            "checksum mismatch",
        ),
        (
            "wrong-credentials",
            &snapshot_key,
            "s3-wrong",
            "Unauthorized",
            "the S3 credentials were refused",
        ),
        (
            "missing-secret",
            &snapshot_key,
            "no-such-secret",
            "CredentialsSecretInvalid",
            "no-such-secret",
        ),
    ];
    let started = Instant::now();
    for (name, key, secret, _, _) in &cases {
        apply(
            &cluster,
            &restored_cluster_yaml(namespace, name, 1, "3.5.1", &moto.url, key, secret),
        );
    }
    let client = cluster.client();
    for (name, _, _, reason, words) in &cases {
        let c = eventually(&format!("{namespace}/{name}: {reason}"), LIMIT, || async {
            let c = get_cluster(&client, namespace, name).await;
            let found = c
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .into_iter()
                .flatten()
                .find(|c| c.reason == "RestoreFailed")
                .cloned();
            match found {
                Some(condition) if condition.message.contains(reason) => Ok(condition),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
        assert!(
            c.message.contains(words),
            "{name}: {:?} lacks {words:?}",
            c.message
        );
        assert!(!c.message.contains(&moto.secret) && !c.message.contains("not-the-secret"));
        // The Event is recorded after the status write.
        wait_event(
            &client,
            namespace,
            None,
            name,
            Some("Warning"),
            "RestoreFailed",
            LIMIT,
        )
        .await;
        // etcd never started: its container has not run, the data directory holds nothing.
        let pod = Api::<k8s_openapi::api::core::v1::Pod>::namespaced(client.clone(), namespace)
            .get(&format!("{name}-0"))
            .await
            .unwrap();
        let etcd_ran = pod
            .status
            .and_then(|s| s.container_statuses)
            .unwrap_or_default()
            .iter()
            .any(|c| {
                c.name == "etcd"
                    && c.state
                        .as_ref()
                        .is_some_and(|s| s.running.is_some() || s.terminated.is_some())
            });
        assert!(!etcd_ran, "{name}: etcd started");
        println!("{namespace}/{name}: {}: {}", c.reason, c.message);
    }
    println!(
        "restore bad inputs: each reported {:.1} s after creation",
        started.elapsed().as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn e2e_snapshots_to_s3() {
    let started = Instant::now();
    let cluster = Arc::new(start_cluster(3).await);
    cluster.deploy_operator(1).await;
    let dir = tempfile::tempdir().unwrap();
    let moto = Arc::new(blocking(|| Moto::start(&cluster, dir.path(), BUCKET)));
    println!(
        "moto_server at {} ({:.1} s)",
        moto.url,
        started.elapsed().as_secs_f64()
    );

    let v35 = tokio::spawn(snapshot_of_plain_cluster(
        cluster.clone(),
        moto.clone(),
        "snap-35",
        support::NEWEST_35,
        3,
    ));
    let v34 = tokio::spawn(snapshot_of_plain_cluster(
        cluster.clone(),
        moto.clone(),
        "snap-34",
        "3.4.23",
        1,
    ));
    let idle = tokio::spawn(idle_clusters(cluster.clone(), moto.clone()));
    let tls = tokio::spawn(tls_auth_cluster(cluster.clone(), moto.clone()));
    let scheduled = tokio::spawn(scheduled_snapshots(cluster.clone(), moto.clone()));
    let to_pvc = tokio::spawn(pvc_snapshot_and_restore(cluster.clone()));
    v35.await.unwrap();
    // Restores run beside the bad inputs: neither writes to snap-35.
    let restore_35 = tokio::spawn(restore_into_new_cluster(
        cluster.clone(),
        moto.clone(),
        "snap-35",
        "first",
        "restore-35",
        support::NEWEST_35,
        3,
        true,
    ));
    let restore_bad = tokio::spawn(restore_bad_inputs(
        cluster.clone(),
        moto.clone(),
        "snap-35/first.db".to_string(),
    ));
    // The bad inputs need the healthy 3.5.36 cluster (else they would fail for that first).
    bad_inputs(cluster.clone(), moto.clone(), "snap-35").await;
    v34.await.unwrap();
    let restore_34 = tokio::spawn(restore_into_new_cluster(
        cluster.clone(),
        moto.clone(),
        "snap-34",
        "large",
        "restore-34",
        "3.4.23",
        1,
        false,
    ));
    idle.await.unwrap();
    tls.await.unwrap();
    restore_35.await.unwrap();
    restore_34.await.unwrap();
    restore_bad.await.unwrap();
    scheduled.await.unwrap();
    to_pvc.await.unwrap();
    interrupted_snapshot_resumes(cluster.clone(), moto.clone(), "snap-35").await;
    println!("snapshots: {:.0} s in all", started.elapsed().as_secs_f64());
}
