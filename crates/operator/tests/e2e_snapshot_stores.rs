//! EtcdSnapshot to the extension stores, end to end in one sandbox: Google Cloud Storage
//! through fake-gcs-server, Azure Blob Storage through Azurite (which checks every request's
//! shared-key signature), and a local directory on a volume mounted into the operator's own
//! Pod. The emulators run in the sandbox's cluster network, where the operator's Pod and the
//! restoring Pods reach them; the operator is deployed from `deploy/` under its RBAC.
//!
//! Per store, concurrently: a cluster under the client workload (no acknowledged write lost)
//! is snapshotted; the object, read with a plain client of that store (fake-gcs-server's JSON
//! API, the Azure SDK, the claim's directory), has the status's size and SHA-256 and names the
//! EtcdSnapshot that wrote it; `snapshot status` of it (etcdutl, etcdctl for 3.4) shows at
//! least the recorded revision; `deletionPolicy: Delete` removes an object with its
//! EtcdSnapshot. GCS (etcd 3.7.4, 3 members) and Azure (etcd 3.4.23) snapshots are restored
//! into new clusters, compared key by key (value, create and mod revision, version) with the
//! source at the snapshot's revision, and the restored store's revision with it. Bad input,
//! each a Failed snapshot with its reason, a Warning Event and no object left: a malformed
//! GCS key and a wrong Azure account key (fake-gcs-server checks no credentials, so GCS's
//! "refused" is covered by the unit tests), an unknown bucket or container, an unreachable
//! endpoint, a missing Secret, an object someone else wrote (left unchanged), a local path
//! outside the operator's root. A local store as a restore source is refused at admission, a
//! restore with a wrong Azure key stops the seed with `RestoreFailed` and etcd never starts.

use etcd_operator_e2e_support as support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use support::cluster::{Cluster, OPERATOR_NAMESPACE, start_cluster};
use support::events::{snapshot_taken_once, wait_event};
use support::snapshot_tool::snapshot_status;
use support::snapshots::{ready_condition, wait_available, wait_phase};
use support::stores::{Azurite, FakeGcs, Place, service_account_key};
use support::workload::Workload;
use support::{create_namespace, eventually, get_cluster, kubectl};

const LIMIT: Duration = Duration::from_secs(180);
const BUCKET: &str = "backups";
const CONTAINER: &str = "etcd";
/// The operator's `--local-store-root` (its default), a claim mounted there.
const LOCAL_ROOT: &str = "/var/lib/etcd-operator/snapshots";
const LOCAL_CLAIM: &str = "operator-snapshots";

fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

fn apply(cluster: &Cluster, manifest: &str) {
    blocking(|| cluster.apply(manifest));
}

/// A store under test, and its plain client.
#[derive(Clone)]
enum Store {
    Gcs(Arc<FakeGcs>, String),
    Azure(Arc<Azurite>),
    Local(PathBuf),
}

impl Store {
    fn name(&self) -> &'static str {
        match self {
            Store::Gcs(..) => "GCS",
            Store::Azure(..) => "Azure",
            Store::Local(..) => "local",
        }
    }

    /// The credentials Secret's data.
    fn secret_data(&self) -> Vec<(&'static str, String)> {
        match self {
            Store::Gcs(_, key) => vec![("GOOGLE_SERVICE_ACCOUNT_KEY", key.clone())],
            Store::Azure(azurite) => vec![("AZURE_STORAGE_ACCOUNT_KEY", azurite.key.clone())],
            Store::Local(_) => Vec::new(),
        }
    }

    /// The destination's YAML (indented for `spec.destination`) under `prefix`.
    fn destination(&self, prefix: &str, secret: &str) -> String {
        match self {
            Store::Gcs(gcs, _) => format!(
                "    gcs:\n      bucket: {BUCKET}\n      key: {prefix}\n      endpoint: {}\n      credentialsSecretRef:\n        name: {secret}\n",
                gcs.url
            ),
            Store::Azure(azurite) => format!(
                "    azure:\n      account: {}\n      container: {CONTAINER}\n      key: {prefix}\n      endpoint: {}\n      credentialsSecretRef:\n        name: {secret}\n",
                azurite.account, azurite.url
            ),
            Store::Local(_) => format!("    local:\n      path: {LOCAL_ROOT}/{prefix}\n"),
        }
    }

    /// The restore source's YAML (indented for `spec.bootstrap.restore.source`).
    fn source(&self, key: &str, secret: &str) -> String {
        self.destination(key, secret)
            .lines()
            .map(|l| format!("      {l}\n"))
            .collect()
    }

    fn uri(&self, key: &str) -> String {
        match self {
            Store::Gcs(..) => format!("gs://{BUCKET}/{key}"),
            Store::Azure(azurite) => format!("azure://{}/{CONTAINER}/{key}", azurite.account),
            Store::Local(_) => format!("file://{LOCAL_ROOT}/{key}"),
        }
    }

    /// size, sha256 and the uid of the EtcdSnapshot that wrote it; `None`: no such object.
    fn head(&self, key: &str) -> Option<(u64, String, Option<String>)> {
        let json = match self {
            Store::Gcs(gcs, _) => blocking(|| gcs.head(BUCKET, key))?,
            Store::Azure(azurite) => blocking(|| azurite.head(CONTAINER, key))?,
            Store::Local(dir) => {
                let data = std::fs::read(dir.join(key)).ok()?;
                let owner = std::fs::read_to_string(dir.join(format!("{key}.uid"))).ok();
                return Some((data.len() as u64, sha256_hex(&data), owner));
            }
        };
        let owner = json["metadata"]
            .as_object()
            .and_then(|m| {
                m.get("etcd-snapshot-uid")
                    .or_else(|| m.get("etcd_snapshot_uid"))
            })
            .and_then(|v| v.as_str())
            .map(str::to_string);
        Some((
            json["size"].as_u64().unwrap(),
            json["sha256"].as_str().unwrap().to_string(),
            owner,
        ))
    }

    fn download(&self, key: &str, out: &Path) {
        match self {
            Store::Gcs(gcs, _) => blocking(|| gcs.download(BUCKET, key, out)),
            Store::Azure(azurite) => blocking(|| azurite.download(CONTAINER, key, out)),
            Store::Local(dir) => {
                std::fs::copy(dir.join(key), out).unwrap();
            }
        }
    }

    /// An object someone else wrote (another EtcdSnapshot's uid, or none on a local disk).
    fn put_foreign(&self, key: &str) {
        match self {
            Store::Gcs(gcs, _) => blocking(|| gcs.put_foreign(BUCKET, key, "another-uid")),
            Store::Azure(azurite) => {
                blocking(|| azurite.put_foreign(CONTAINER, key, "another-uid"))
            }
            Store::Local(dir) => {
                let file = dir.join(key);
                std::fs::create_dir_all(file.parent().unwrap()).unwrap();
                std::fs::write(file, b"not a snapshot").unwrap();
            }
        }
    }
}

fn sha256_hex(data: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, data)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn cluster_yaml(namespace: &str, name: &str, replicas: i32, version: &str, extra: &str) -> String {
    format!(
        "apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdCluster\nmetadata:\n  name: {name}\n  namespace: {namespace}\nspec:\n  replicas: {replicas}\n  version: \"{version}\"\n{extra}"
    )
}

fn snapshot_yaml(namespace: &str, name: &str, destination: &str, extra: &str) -> String {
    format!(
        "apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdSnapshot\nmetadata:\n  name: {name}\n  namespace: {namespace}\nspec:\n  clusterRef:\n    name: etcd\n  destination:\n{destination}{extra}"
    )
}

async fn secret(cluster: &Cluster, namespace: &str, name: &str, data: &[(&str, String)]) {
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        ),
        ..Default::default()
    };
    Api::<Secret>::namespaced(cluster.client(), namespace)
        .create(&PostParams::default(), &secret)
        .await
        .expect("creating a Secret");
}

/// Every key with its value and revisions, and the store's revision (at `revision` if given).
fn keyspace(
    cluster: &Cluster,
    endpoint: &str,
    revision: Option<i64>,
) -> (i64, Vec<serde_json::Value>) {
    let mut args = vec!["get", "", "--prefix", "-w", "json"];
    let at = revision.map(|r| format!("--rev={r}"));
    if let Some(at) = &at {
        args.push(at);
    }
    let out = blocking(|| cluster.etcdctl(endpoint, &args)).expect("etcdctl get --prefix");
    let json: serde_json::Value = serde_json::from_str(&out).expect("etcdctl prints JSON");
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
    (json["header"]["revision"].as_i64().unwrap(), kvs)
}

/// A cluster under the client workload snapshotted to `store`, the object checked with the
/// store's plain client, `deletionPolicy: Delete`, and (for an object store) a new cluster
/// restored from it. Returns when the source cluster is free for the bad inputs.
async fn round_trip(
    cluster: Arc<Cluster>,
    store: Store,
    namespace: &'static str,
    version: &'static str,
    replicas: i32,
) {
    let started = Instant::now();
    create_namespace(&cluster.client(), namespace).await;
    apply(
        &cluster,
        &cluster_yaml(namespace, "etcd", replicas, version, ""),
    );
    secret(
        &cluster,
        namespace,
        "store-credentials",
        &store.secret_data(),
    )
    .await;
    wait_available(&cluster, namespace, "etcd", replicas).await;

    // Under the client workload: it writes before, during and after the snapshot.
    let workload = Workload::start(cluster.network.clone(), namespace, "etcd", store.name());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let taken = Instant::now();
    apply(
        &cluster,
        &snapshot_yaml(
            namespace,
            "first",
            &store.destination(namespace, "store-credentials"),
            "",
        ),
    );
    let s = wait_phase(&cluster, namespace, "first", "Complete").await;
    let took = taken.elapsed().as_secs_f64();
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
    let key = format!("{namespace}/first.db");
    assert_eq!(artifact.uri, store.uri(&key));
    assert_eq!(status.verified, Some(true), "{status:?}");
    assert_eq!(ready_condition(&s).0, "True");
    assert_eq!(status.etcd_version.as_deref(), Some(version));
    let (size, sha, owner) = store.head(&key).expect("the plain client finds the object");
    assert_eq!(Some(size as i64), artifact.size_bytes, "{namespace}");
    assert_eq!(
        Some(format!("sha256:{sha}")),
        artifact.checksum,
        "{namespace}"
    );
    assert_eq!(
        owner,
        s.metadata.uid.clone(),
        "the object names its EtcdSnapshot"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("first.db");
    store.download(&key, &file);
    let summary = blocking(|| snapshot_status(version, &file));
    let revision = summary["revision"].as_i64().expect("a revision");
    assert!(
        revision >= status.revision.unwrap_or(i64::MAX),
        "{namespace}: the snapshot's revision {revision} is at least the status's {:?}",
        status.revision
    );
    assert!(
        summary["totalKey"].as_u64().unwrap_or_default() > 0,
        "{summary}"
    );
    snapshot_taken_once(&cluster, namespace, "first").await;
    println!(
        "{namespace}: first Complete in {}, {size} bytes at revision {revision} (status {:?}) from {:?} under the workload, {took:.1} s after creation",
        store.name(),
        status.revision,
        status.member
    );

    // deletionPolicy Delete: the object goes with its EtcdSnapshot.
    apply(
        &cluster,
        &snapshot_yaml(
            namespace,
            "disposable",
            &store.destination(namespace, "store-credentials"),
            "  deletionPolicy: Delete\n",
        ),
    );
    wait_phase(&cluster, namespace, "disposable", "Complete").await;
    let disposable = format!("{namespace}/disposable.db");
    assert!(store.head(&disposable).is_some());
    let (ok, _, stderr) = blocking(|| {
        kubectl(
            &cluster,
            &[
                "-n",
                namespace,
                "delete",
                "etcdsnapshot",
                "disposable",
                "--timeout=120s",
            ],
        )
    });
    assert!(ok, "{stderr}");
    assert!(
        store.head(&disposable).is_none(),
        "{namespace}: deletionPolicy Delete removed {disposable}"
    );
    println!("{namespace}: disposable deleted with its object (deletionPolicy Delete)");

    if let Store::Local(_) = store {
        // A local store is no restore source: refused at admission, saying what to do.
        let manifest = cluster_yaml(
            namespace,
            "from-local",
            1,
            version,
            &format!(
                "  bootstrap:\n    restore:\n      source:\n{}",
                store.source(&key, "")
            ),
        );
        let (ok, _, stderr) = blocking(|| {
            support::kubectl_with_stdin(&cluster, &["apply", "-f", "-"], Some(&manifest))
        });
        assert!(!ok, "a local restore source was accepted");
        assert!(
            stderr.contains("bootstrap.restore.source.local is not a restore source"),
            "{stderr}"
        );
        return;
    }

    // A new cluster from the object: every key, value and revision of the source at the
    // snapshot's revision.
    let restore_started = Instant::now();
    let restored_ns = format!("{namespace}-restored");
    create_namespace(&cluster.client(), &restored_ns).await;
    secret(
        &cluster,
        &restored_ns,
        "store-credentials",
        &store.secret_data(),
    )
    .await;
    apply(
        &cluster,
        &cluster_yaml(
            &restored_ns,
            "etcd",
            1,
            version,
            &format!(
                "  bootstrap:\n    restore:\n      source:\n{}",
                store.source(&key, "store-credentials")
            ),
        ),
    );
    wait_available(&cluster, &restored_ns, "etcd", 1).await;
    let c = get_cluster(&cluster.client(), &restored_ns, "etcd").await;
    let restored = c
        .status
        .as_ref()
        .and_then(|s| s.restored_from.clone())
        .expect("status.restoredFrom");
    assert_eq!(restored.uri, store.uri(&key));
    assert_eq!(
        restored.revision,
        Some(revision),
        "restored at the snapshot's revision"
    );
    let (_, expected) = keyspace(
        &cluster,
        &format!("http://etcd-client.{namespace}.svc:2379"),
        Some(revision),
    );
    assert!(!expected.is_empty(), "keys to compare");
    let (restored_revision, kvs) = keyspace(
        &cluster,
        &format!("http://etcd-0.etcd.{restored_ns}.svc:2379"),
        None,
    );
    assert_eq!(
        restored_revision, revision,
        "{restored_ns}: the store's revision"
    );
    assert_eq!(kvs.len(), expected.len(), "{restored_ns}: key count");
    assert!(
        kvs == expected,
        "{restored_ns}: keys differ from the source's"
    );
    let pod = Api::<Pod>::namespaced(cluster.client(), &restored_ns)
        .get("etcd-0")
        .await
        .unwrap();
    let inits: Vec<String> = pod
        .spec
        .unwrap()
        .init_containers
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(inits, ["restore-fetch", "restore", "restore-commit"]);
    println!(
        "{restored_ns}: restored from {} ({} keys at revision {revision}), Available after {:.1} s; {namespace} in all {:.1} s",
        store.uri(&key),
        expected.len(),
        restore_started.elapsed().as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}

/// Bad input for `store` against the healthy cluster of `namespace`: each snapshot Failed with
/// its reason and a Warning Event, no object where it would have written, and another's
/// object untouched. `cases` are (name, destination YAML, reason, words of the message).
async fn bad_inputs(
    cluster: Arc<Cluster>,
    store: Store,
    namespace: &'static str,
    cases: Vec<(&'static str, String, &'static str, &'static str)>,
) {
    let guarded = format!("{namespace}/guarded.db");
    store.put_foreign(&guarded);
    let before = store.head(&guarded).unwrap();
    let started = Instant::now();
    let mut all = cases;
    all.push((
        "guarded",
        store.destination(namespace, "store-credentials"),
        "ObjectExists",
        "never replaced",
    ));
    for (name, destination, _, _) in &all {
        apply(&cluster, &snapshot_yaml(namespace, name, destination, ""));
    }
    for (name, _, reason, words) in &all {
        let s = wait_phase(&cluster, namespace, name, "Failed").await;
        let (status, got, message) = ready_condition(&s);
        assert_eq!(
            (status.as_str(), got.as_str()),
            ("False", *reason),
            "{namespace}/{name}: {message}"
        );
        assert!(
            message.contains(words),
            "{namespace}/{name}: {message:?} lacks {words:?}"
        );
        assert!(
            s.status.as_ref().unwrap().artifact.is_none(),
            "{name}: no artifact"
        );
        for (_, secret) in store.secret_data() {
            assert!(
                !message.contains(&secret[..secret.len().min(40)]),
                "{name}: a secret in the message"
            );
        }
        // The Warning Event follows the Failed status, and a reader can see the status first.
        wait_event(
            &cluster.client(),
            namespace,
            Some("EtcdSnapshot"),
            name,
            Some("Warning"),
            reason,
            Duration::from_secs(10),
        )
        .await;
        if *name != "guarded" {
            assert!(
                store.head(&format!("{namespace}/{name}.db")).is_none(),
                "{namespace}/{name}: an object was left"
            );
        }
        println!("{namespace}/{name}: Failed, {reason}: {message}");
    }
    assert_eq!(
        store.head(&guarded).unwrap(),
        before,
        "{namespace}: the other object is untouched"
    );
    println!(
        "{namespace}: bad inputs all Failed with their reasons {:.1} s after creation",
        started.elapsed().as_secs_f64()
    );
}

async fn gcs(cluster: Arc<Cluster>, gcs: Arc<FakeGcs>, key: String) {
    // The version matrix: GCS on the newest 3.7.
    let namespace = "gcs-37";
    let store = Store::Gcs(gcs.clone(), key);
    round_trip(
        cluster.clone(),
        store.clone(),
        namespace,
        support::NEWEST_37,
        3,
    )
    .await;
    secret(
        &cluster,
        namespace,
        "malformed-key",
        &[(
            "GOOGLE_SERVICE_ACCOUNT_KEY",
            "{\"private_key\": \"not a key\"}".to_string(),
        )],
    )
    .await;
    let closed = gcs.url.replace(":4443", ":9");
    let with = |bucket: &str, endpoint: &str, secret: &str| {
        format!(
            "    gcs:\n      bucket: {bucket}\n      key: {namespace}\n      endpoint: {endpoint}\n      credentialsSecretRef:\n        name: {secret}\n"
        )
    };
    let cases = vec![
        (
            "malformed-key",
            with(BUCKET, &gcs.url, "malformed-key"),
            "CredentialsSecretInvalid",
            "is not a usable service account JSON key",
        ),
        (
            "unknown-bucket",
            with("no-such-bucket", &gcs.url, "store-credentials"),
            "BucketNotFound",
            "bucket not found: the store has no bucket no-such-bucket",
        ),
        (
            "unreachable",
            with(BUCKET, &closed, "store-credentials"),
            "EndpointUnreachable",
            "the GCS endpoint",
        ),
        (
            "missing-secret",
            with(BUCKET, &gcs.url, "no-such-secret"),
            "CredentialsSecretInvalid",
            "the credentials Secret no-such-secret (destination.gcs.credentialsSecretRef) does not exist",
        ),
    ];
    bad_inputs(cluster, store, namespace, cases).await;
}

async fn azure(cluster: Arc<Cluster>, azurite: Arc<Azurite>) {
    let namespace = "azure-34";
    let store = Store::Azure(azurite.clone());
    round_trip(cluster.clone(), store.clone(), namespace, "3.4.23", 1).await;
    let wrong = "d3Jvbmcta2V5LXdyb25nLWtleS13cm9uZy1rZXktd3Jvbmc=".to_string();
    secret(
        &cluster,
        namespace,
        "wrong-key",
        &[("AZURE_STORAGE_ACCOUNT_KEY", wrong.clone())],
    )
    .await;
    let closed = azurite.url.replace(":10000", ":9");
    let with = |container: &str, endpoint: &str, secret: &str| {
        format!(
            "    azure:\n      account: {}\n      container: {container}\n      key: {namespace}\n      endpoint: {endpoint}\n      credentialsSecretRef:\n        name: {secret}\n",
            azurite.account
        )
    };
    let cases = vec![
        (
            "wrong-key",
            with(CONTAINER, &azurite.url, "wrong-key"),
            "Unauthorized",
            "the Azure credentials were refused",
        ),
        (
            "unknown-container",
            with("no-such-container", &azurite.url, "store-credentials"),
            "BucketNotFound",
            "container not found: the store has no container no-such-container",
        ),
        (
            "unreachable",
            with(CONTAINER, &closed, "store-credentials"),
            "EndpointUnreachable",
            "the Azure endpoint",
        ),
        (
            "missing-secret",
            with(CONTAINER, &azurite.url, "no-such-secret"),
            "CredentialsSecretInvalid",
            "does not exist",
        ),
    ];
    // Beside the bad snapshots: a restore with a wrong key stops the seed, etcd never runs.
    let restore_ns = "azure-restore-bad";
    create_namespace(&cluster.client(), restore_ns).await;
    secret(
        &cluster,
        restore_ns,
        "wrong-key",
        &[("AZURE_STORAGE_ACCOUNT_KEY", wrong)],
    )
    .await;
    apply(
        &cluster,
        &cluster_yaml(
            restore_ns,
            "etcd",
            1,
            "3.4.23",
            &format!(
                "  bootstrap:\n    restore:\n      source:\n{}",
                store.source(&format!("{namespace}/first.db"), "wrong-key")
            ),
        ),
    );
    bad_inputs(cluster.clone(), store, namespace, cases).await;
    let client = cluster.client();
    let failed = eventually(
        &format!("{restore_ns}: RestoreFailed Unauthorized"),
        LIMIT,
        || async {
            let c = get_cluster(&client, restore_ns, "etcd").await;
            c.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .into_iter()
                .flatten()
                .find(|c| c.reason == "RestoreFailed" && c.message.contains("Unauthorized"))
                .cloned()
                .ok_or_else(|| format!("{:?}", c.status.and_then(|s| s.conditions)))
        },
    )
    .await;
    assert!(
        failed
            .message
            .contains("the Azure credentials were refused reading azure://"),
        "{}",
        failed.message
    );
    let pod = Api::<Pod>::namespaced(client.clone(), restore_ns)
        .get("etcd-0")
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
    assert!(!etcd_ran, "{restore_ns}: etcd started");
    println!("{restore_ns}: RestoreFailed: {}", failed.message);
}

async fn local(cluster: Arc<Cluster>, claim_dir: PathBuf) {
    // The version matrix: a local store on the newest 3.5.
    let namespace = "local-35";
    let store = Store::Local(claim_dir);
    round_trip(
        cluster.clone(),
        store.clone(),
        namespace,
        support::NEWEST_35,
        1,
    )
    .await;
    let cases = vec![(
        "outside-root",
        "    local:\n      path: /tmp/etcd-snapshots\n".to_string(),
        "InvalidDestination",
        "is outside the operator's local store root /var/lib/etcd-operator/snapshots",
    )];
    bad_inputs(cluster, store, namespace, cases).await;
}

/// Mounts a claim at the operator's local store root (fsGroup: the operator runs as 65532)
/// and waits for the operator's Pod that has it. Returns the claim's directory.
async fn mount_local_store(cluster: &Cluster) -> PathBuf {
    apply(
        cluster,
        &format!(
            "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: {LOCAL_CLAIM}\n  namespace: {OPERATOR_NAMESPACE}\nspec:\n  accessModes: [ReadWriteOnce]\n  resources:\n    requests:\n      storage: 1Gi\n"
        ),
    );
    let patch = serde_json::json!({"spec": {"template": {"spec": {
        "securityContext": {"fsGroup": 65532},
        "volumes": [{"name": "snapshots", "persistentVolumeClaim": {"claimName": LOCAL_CLAIM}}],
        "containers": [{"name": "operator", "volumeMounts": [{"name": "snapshots", "mountPath": LOCAL_ROOT}]}],
    }}}});
    Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(cluster.client(), OPERATOR_NAMESPACE)
        .patch(
            "etcd-operator",
            &PatchParams::default(),
            &Patch::Strategic(patch),
        )
        .await
        .expect("mounting the local store into the operator");
    eventually("the operator's Pod with the local store", LIMIT, || async {
        let pods = cluster.operator_pods().await;
        let mounted: Vec<_> = pods
            .iter()
            .filter(|p| {
                p.spec
                    .as_ref()
                    .is_some_and(|s| s.volumes.iter().flatten().any(|v| v.name == "snapshots"))
            })
            .collect();
        let others = pods.len() - mounted.len();
        if others == 0 && mounted.len() == 1 && support::cluster::pod_ready(mounted[0]) {
            Ok(())
        } else {
            Err(format!("{} mounted, {others} others", mounted.len()))
        }
    })
    .await;
    let bound = Api::<PersistentVolumeClaim>::namespaced(cluster.client(), OPERATOR_NAMESPACE)
        .get(LOCAL_CLAIM)
        .await
        .unwrap();
    assert_eq!(bound.status.and_then(|s| s.phase).as_deref(), Some("Bound"));
    cluster
        .kubelet
        .claim_dir(OPERATOR_NAMESPACE, LOCAL_CLAIM)
        .expect("the claim's directory")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn e2e_snapshot_stores() {
    let started = Instant::now();
    let cluster = Arc::new(start_cluster(3).await);
    cluster.deploy_operator(1).await;
    let dir = tempfile::tempdir().unwrap();
    let place = Place::Network(cluster.network.clone());
    let gcs_server = Arc::new(blocking(|| {
        FakeGcs::start(&place, dir.path(), 4443, &[BUCKET])
    }));
    let azurite = Arc::new(blocking(|| {
        Azurite::start(&place, dir.path(), 10000, &[CONTAINER])
    }));
    let key = blocking(|| service_account_key(dir.path()));
    println!(
        "fake-gcs-server at {}, Azurite at {} ({:.1} s)",
        gcs_server.url,
        azurite.url,
        started.elapsed().as_secs_f64()
    );
    let claim_dir = mount_local_store(&cluster).await;
    println!(
        "the operator runs with the local store mounted ({:.1} s)",
        started.elapsed().as_secs_f64()
    );

    let to_gcs = tokio::spawn(gcs(cluster.clone(), gcs_server.clone(), key));
    let to_azure = tokio::spawn(azure(cluster.clone(), azurite.clone()));
    let to_local = tokio::spawn(local(cluster.clone(), claim_dir));
    to_gcs.await.unwrap();
    to_azure.await.unwrap();
    to_local.await.unwrap();
    println!(
        "snapshot stores: {:.0} s in all",
        started.elapsed().as_secs_f64()
    );
}
