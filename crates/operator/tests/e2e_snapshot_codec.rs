//! EtcdSnapshot compression, encryption and verification end to end, in one sandbox: real
//! etcd 3.5.1 (3 members) and 3.4.23 (1 member), the operator deployed from `deploy/` under
//! its RBAC, moto_server as the S3 store, a PersistentVolumeClaim, and the reference tools
//! for the formats (`age`/`age-keygen`, `zstd`, `gzip`, Debian packages) to make the keys and
//! read the artifacts back independently of the operator's own code.
//!
//! 3.5.1 (namespace `codec-35`), every snapshot of the same cluster, written to by the client
//! workload before and not since:
//! - `zstd-age`: S3, zstd, age to a recipient `age-keygen` made, `verify: Restore`. Complete
//!   and verified by a restore (the throwaway etcd's revision and keys recorded, its Pod gone);
//!   the object is an age file whose SHA-256 is the artifact's; `age -d` and `zstd -d` give
//!   etcd's bytes with the status's `snapshotChecksum`, and `etcdutl snapshot status` of them
//!   shows the revision and TOTAL KEYS the status records.
//! - `gzip-pvc`: a claim, gzip, `verify: Restore` from the claim: `gzip -d` of the file gives
//!   the same.
//! - `sealed-pvc`: a claim, zstd + age, `verify: Restore`, its identity Secret replaced by a
//!   stranger's after the operator checked it and created the agent Pod, before the Pod can
//!   start (every node cordoned meanwhile): verification fails (the agent's read-back with the
//!   stranger's identity): `verified: false`, Failed `VerificationFailed`, a Warning Event, the
//!   artifact named.
//! - `mismatched`: an identity that belongs to none of the recipients: Failed
//!   `EncryptionSecretInvalid` before anything is written.
//! - A new 3-member cluster restored from `zstd-age` with `ageIdentitySecretRef`: every key,
//!   value and revision equal the source's; restores with a stranger's identity
//!   (`WrongIdentity`), without one (`EncryptedSnapshot`) and from the object with one byte
//!   flipped (`NotASnapshot`, its age layer damaged) each fail clearly, etcd never started.
//!
//! 3.4.23 (namespace `codec-34`): `gzip-age` to S3 with `verify: Restore` (the throwaway etcd
//! restored with etcdctl), read back with `age -d | gzip -d` and `etcdctl snapshot status`,
//! and restored into a new 3.4.23 cluster with every key equal.

use etcd_operator_e2e_support as support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_operator_api::EtcdSnapshot;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use support::cluster::{Cluster, start_cluster};
use support::events::wait_event;
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

fn apply(cluster: &Cluster, manifest: &str) {
    blocking(|| cluster.apply(manifest));
}

fn run(program: &str, args: &[&str]) -> Vec<u8> {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} does not run ({e}): run scripts/install-deps.sh"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// An age key pair made by `age-keygen`: the identity file's text (with its comment lines)
/// and the recipient.
struct Keys {
    identity: String,
    recipient: String,
    file: PathBuf,
}

fn keygen(dir: &Path, name: &str) -> Keys {
    let file = dir.join(format!("{name}.txt"));
    run("age-keygen", &["-o", file.to_str().unwrap()]);
    let recipient = String::from_utf8(run("age-keygen", &["-y", file.to_str().unwrap()]))
        .unwrap()
        .trim()
        .to_string();
    Keys {
        identity: std::fs::read_to_string(&file).unwrap(),
        recipient,
        file,
    }
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().fold(0u32, |n, b| (n << 8) | *b as u32) << (8 * (3 - chunk.len()));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A Secret with `data` (base64), so that `kubectl apply` creates or replaces it.
fn secret_yaml_of(namespace: &str, name: &str, data: &[(&str, &str)]) -> String {
    let data: String = data
        .iter()
        .map(|(k, v)| format!("  {k}: {}\n", base64(v.as_bytes())))
        .collect();
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\n  namespace: {namespace}\ntype: Opaque\ndata:\n{data}"
    )
}

fn secret_yaml(namespace: &str, name: &str, key: &str, text: &str) -> String {
    secret_yaml_of(namespace, name, &[(key, text)])
}

fn credentials_secret(cluster: &Cluster, namespace: &str, moto: &Moto) {
    apply(
        cluster,
        &secret_yaml_of(
            namespace,
            "s3-credentials",
            &[
                ("AWS_ACCESS_KEY_ID", &moto.key_id),
                ("AWS_SECRET_ACCESS_KEY", &moto.secret),
            ],
        ),
    );
}

fn cluster_yaml(namespace: &str, name: &str, replicas: i32, version: &str, extra: &str) -> String {
    format!(
        "apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdCluster\nmetadata:\n  name: {name}\n  namespace: {namespace}\nspec:\n  replicas: {replicas}\n  version: \"{version}\"\n{extra}"
    )
}

fn s3_destination(moto: &Moto, namespace: &str) -> String {
    format!(
        "    s3:\n      endpoint: {}\n      bucket: {BUCKET}\n      key: {namespace}\n      forcePathStyle: true\n      credentialsSecretRef:\n        name: s3-credentials\n",
        moto.url
    )
}

fn pvc_destination(claim: &str, sub_path: &str) -> String {
    format!("    pvc:\n      claimName: {claim}\n      subPath: {sub_path}\n")
}

/// An EtcdSnapshot of `etcd` to `destination` (indented YAML) with `extra` spec fields.
fn snapshot_yaml(namespace: &str, name: &str, destination: &str, extra: &str) -> String {
    format!(
        "apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdSnapshot\nmetadata:\n  name: {name}\n  namespace: {namespace}\nspec:\n  clusterRef:\n    name: etcd\n  destination:\n{destination}{extra}"
    )
}

fn age_spec(identity_secret: Option<&str>) -> String {
    let identity = identity_secret
        .map(|s| format!("      identitySecretRef:\n        name: {s}\n"))
        .unwrap_or_default();
    format!(
        "  encryption:\n    age:\n      recipientsSecretRef:\n        name: backup-age\n{identity}"
    )
}

/// Whether `text` holds an age identity (`AGE-SECRET-KEY-1` followed by its key), not just
/// the words naming the format.
fn leaks_key(text: &str) -> bool {
    text.match_indices("AGE-SECRET-KEY-1").any(|(at, mark)| {
        text[at + mark.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
    })
}

fn sha256_hex(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Decodes a stored artifact with the reference tools: `age -d` when it is an age file,
/// then `zstd -d` or `gzip -d` by its magic number. Returns etcd's bytes' file.
fn decode_with_tools(artifact: &Path, identity: Option<&Path>, dir: &Path) -> PathBuf {
    let mut current = artifact.to_path_buf();
    let head = std::fs::read(&current).unwrap();
    if head.starts_with(b"age-encryption.org/v1\n") {
        let out = dir.join("decrypted");
        run(
            "age",
            &[
                "-d",
                "-i",
                identity
                    .expect("an identity for an age file")
                    .to_str()
                    .unwrap(),
                "-o",
                out.to_str().unwrap(),
                current.to_str().unwrap(),
            ],
        );
        current = out;
    }
    let head = std::fs::read(&current).unwrap();
    let out = dir.join("snapshot.db");
    if head.starts_with(&[0x28, 0xB5, 0x2F, 0xFD]) {
        run(
            "zstd",
            &[
                "-q",
                "-d",
                "-f",
                current.to_str().unwrap(),
                "-o",
                out.to_str().unwrap(),
            ],
        );
    } else if head.starts_with(&[0x1F, 0x8B]) {
        std::fs::write(&out, run("gzip", &["-d", "-c", current.to_str().unwrap()])).unwrap();
    } else {
        std::fs::copy(&current, &out).unwrap();
    }
    out
}

/// A Complete snapshot, verified as `method`, whose artifact (as `fetch` puts it into a
/// file) decodes with the reference tools into etcd's bytes with the status's checksum,
/// revision and key count.
#[allow(clippy::too_many_arguments)]
async fn check_decoded(
    cluster: &Cluster,
    namespace: &str,
    name: &str,
    version: &str,
    method: &str,
    layers: (&str, bool),
    identity: Option<&Path>,
    fetch: impl FnOnce(&Path),
) -> EtcdSnapshot {
    let s = wait_phase(cluster, namespace, name, "Complete").await;
    let status = s.status.clone().unwrap();
    assert_eq!(status.verified, Some(true), "{status:?}");
    let (ready, _, message) = ready_condition(&s);
    assert_eq!(ready, "True", "{message}");
    let verification = status.verification.clone().expect("a verification");
    assert_eq!(
        format!("{:?}", verification.method),
        method,
        "{verification:?}"
    );
    assert_eq!(verification.content_checked, Some(true));
    assert!(verification.time.is_some());
    assert_eq!(format!("{:?}", status.compression.unwrap()), layers.0);
    match (&status.encryption, layers.1) {
        (Some(e), true) => assert_eq!(e.method, "age"),
        (None, false) => {}
        other => panic!("{namespace}/{name}: encryption {other:?}"),
    }
    let artifact = status.artifact.clone().unwrap();

    let dir = tempfile::tempdir().unwrap();
    let stored = dir.path().join("artifact");
    blocking(|| fetch(&stored));
    let bytes = std::fs::read(&stored).unwrap();
    assert_eq!(
        Some(bytes.len() as i64),
        artifact.size_bytes,
        "{namespace}/{name}"
    );
    assert_eq!(
        Some(format!("sha256:{}", sha256_hex(&bytes))),
        artifact.checksum,
        "{namespace}/{name}: the artifact's checksum is the stored bytes' SHA-256"
    );
    let plain = blocking(|| decode_with_tools(&stored, identity, dir.path()));
    let plain_bytes = std::fs::read(&plain).unwrap();
    assert_eq!(Some(plain_bytes.len() as i64), status.snapshot_size_bytes);
    assert_eq!(
        Some(format!("sha256:{}", sha256_hex(&plain_bytes))),
        status.snapshot_checksum,
        "{namespace}/{name}: the decoded bytes are etcd's"
    );
    if layers != ("None", false) {
        assert_ne!(artifact.checksum, status.snapshot_checksum);
    }
    let summary = blocking(|| snapshot_status(version, &plain));
    assert_eq!(summary["revision"].as_i64(), status.revision, "{summary}");
    assert_eq!(
        summary["revision"].as_i64(),
        verification.revision,
        "{summary}"
    );
    assert_eq!(
        summary["totalKey"].as_i64(),
        verification.total_keys,
        "{namespace}/{name}: the key count is etcdutl's TOTAL KEYS: {summary}"
    );
    println!(
        "{namespace}: {name} Complete ({message}); {} stored bytes decode to etcd's {} bytes at revision {:?}",
        bytes.len(),
        plain_bytes.len(),
        status.revision
    );
    s
}

/// The restore check's Pod and Secret are gone once it is recorded.
async fn no_agent_left(cluster: &Cluster, namespace: &str, s: &EtcdSnapshot) {
    let pods: Api<Pod> = Api::namespaced(cluster.client(), namespace);
    let selector = format!(
        "etcd-operator.cozystack.io/snapshot-uid={}",
        s.metadata.uid.clone().unwrap()
    );
    eventually(
        &format!(
            "{namespace}: the agent Pods of {:?} removed",
            s.metadata.name
        ),
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
}

/// Every key with its value and revisions, and the store's revision, as one member answers.
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

fn restore_yaml(moto: &Moto, key: &str, identity: Option<&str>) -> String {
    let identity = identity
        .map(|s| format!("      ageIdentitySecretRef:\n        name: {s}\n"))
        .unwrap_or_default();
    format!(
        "  bootstrap:\n    restore:\n      source:\n        s3:\n          endpoint: {}\n          bucket: {BUCKET}\n          key: {key}\n          forcePathStyle: true\n          credentialsSecretRef:\n            name: s3-credentials\n{identity}",
        moto.url
    )
}

/// A new cluster `name` restored from the object `key` with `identity`: every member has
/// every key, value and revision of the source cluster (which took no writes since).
#[allow(clippy::too_many_arguments)]
async fn restore_and_compare(
    cluster: &Cluster,
    moto: &Moto,
    namespace: &str,
    name: &str,
    version: &str,
    replicas: i32,
    key: &str,
    identity: &str,
    revision: i64,
) {
    let started = Instant::now();
    apply(
        cluster,
        &cluster_yaml(
            namespace,
            name,
            replicas,
            version,
            &restore_yaml(moto, key, Some(identity)),
        ),
    );
    wait_available(cluster, namespace, name, replicas).await;
    let c = get_cluster(&cluster.client(), namespace, name).await;
    let restored = c
        .status
        .as_ref()
        .and_then(|s| s.restored_from.clone())
        .expect("status.restoredFrom");
    assert_eq!(restored.uri, format!("s3://{BUCKET}/{key}"));
    assert_eq!(restored.revision, Some(revision));
    let (source_revision, source_kvs) =
        keyspace(cluster, &format!("http://etcd-client.{namespace}.svc:2379"));
    assert_eq!(
        source_revision, revision,
        "{namespace}: no write since the snapshot"
    );
    assert!(!source_kvs.is_empty());
    for i in 0..replicas {
        let (got_revision, kvs) = keyspace(
            cluster,
            &format!("http://{name}-{i}.{name}.{namespace}.svc:2379"),
        );
        assert_eq!(got_revision, revision, "{namespace}/{name}-{i}: revision");
        assert_eq!(
            kvs.len(),
            source_kvs.len(),
            "{namespace}/{name}-{i}: key count"
        );
        assert!(kvs == source_kvs, "{namespace}/{name}-{i}: keys differ");
    }
    println!(
        "{namespace}: {name} restored from {key} (encrypted), {} keys at revision {revision} on {replicas} members, Available after {:.1} s",
        source_kvs.len(),
        started.elapsed().as_secs_f64()
    );
}

/// A restore that must fail in its fetch step with `reason`, saying `words`, etcd never
/// started.
async fn restore_fails(cluster: &Cluster, namespace: &str, name: &str, reason: &str, words: &str) {
    let client = cluster.client();
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
    assert!(!leaks_key(&c.message), "no key material: {}", c.message);
    wait_event(
        &cluster.client(),
        namespace,
        Some("EtcdCluster"),
        name,
        Some("Warning"),
        "RestoreFailed",
        LIMIT,
    )
    .await;
    let pod = Api::<Pod>::namespaced(client.clone(), namespace)
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
    println!("{namespace}/{name}: RestoreFailed: {}", c.message);
}

/// Writes through the client workload for a few seconds, none lost, then stops.
async fn write_some(cluster: &Cluster, namespace: &str, tag: &str) {
    let workload = Workload::start(cluster.network.clone(), namespace, "etcd", tag);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let report = workload.stop().await;
    println!("{namespace}: {}", report.summary());
    report.assert_no_loss();
    assert!(
        report.acknowledged > 0,
        "{namespace}: the workload wrote nothing"
    );
}

/// Cordons (or uncordons) every node, as `kubectl cordon` does: Pods already running stay,
/// new ones wait in Pending until a node takes them again.
async fn set_unschedulable(cluster: &Cluster, unschedulable: bool) {
    let nodes: Api<Node> = Api::all(cluster.client());
    let list = nodes.list(&ListParams::default()).await.expect("nodes");
    assert!(!list.items.is_empty(), "the sandbox has nodes");
    let patch = serde_json::json!({ "spec": { "unschedulable": unschedulable } });
    for node in list.items {
        let name = node.metadata.name.expect("a node's name");
        nodes
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_or_else(|e| panic!("node {name}: unschedulable={unschedulable}: {e}"));
    }
}

async fn codec_35(cluster: Arc<Cluster>, moto: Arc<Moto>, keys: Arc<(Keys, Keys)>) {
    let namespace = "codec-35";
    let (ours, stranger) = (&keys.0, &keys.1);
    create_namespace(&cluster.client(), namespace).await;
    apply(&cluster, &cluster_yaml(namespace, "etcd", 3, "3.5.1", ""));
    apply(
        &cluster,
        &format!(
            "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: backups\n  namespace: {namespace}\nspec:\n  accessModes: [ReadWriteOnce]\n  resources:\n    requests:\n      storage: 1Gi\n"
        ),
    );
    credentials_secret(&cluster, namespace, &moto);
    let recipients = format!("# the backup key\n{}\n", ours.recipient);
    apply(
        &cluster,
        &secret_yaml(namespace, "backup-age", "recipients", &recipients),
    );
    apply(
        &cluster,
        &secret_yaml(namespace, "backup-age-identity", "identity", &ours.identity),
    );
    apply(
        &cluster,
        &secret_yaml(namespace, "flaky-identity", "identity", &ours.identity),
    );
    apply(
        &cluster,
        &secret_yaml(
            namespace,
            "stranger-identity",
            "identity",
            &stranger.identity,
        ),
    );
    wait_available(&cluster, namespace, "etcd", 3).await;
    write_some(&cluster, namespace, "codec").await;

    let started = Instant::now();
    let s3 = s3_destination(&moto, namespace);
    apply(
        &cluster,
        &snapshot_yaml(
            namespace,
            "zstd-age",
            &s3,
            &format!(
                "  compression: Zstd\n{}  verify: Restore\n",
                age_spec(Some("backup-age-identity"))
            ),
        ),
    );
    apply(
        &cluster,
        &snapshot_yaml(
            namespace,
            "gzip-pvc",
            &pvc_destination("backups", "codec"),
            "  compression: Gzip\n  verify: Restore\n",
        ),
    );
    apply(
        &cluster,
        &snapshot_yaml(
            namespace,
            "mismatched",
            &s3,
            &age_spec(Some("stranger-identity")),
        ),
    );
    // sealed-pvc: its identity Secret turns into a stranger's once its agent Pod exists and
    // before any of its containers can read it. Every node is unschedulable meanwhile, so the
    // Pod waits in Pending: without that, the agent and the restore check can both read the
    // old Secret before the change lands (it happened: Complete in 5 s on a loaded machine).
    set_unschedulable(&cluster, true).await;
    apply(
        &cluster,
        &snapshot_yaml(
            namespace,
            "sealed-pvc",
            &pvc_destination("backups", "sealed"),
            &format!(
                "  compression: Zstd\n{}  verify: Restore\n",
                age_spec(Some("flaky-identity"))
            ),
        ),
    );
    let pods: Api<Pod> = Api::namespaced(cluster.client(), namespace);
    let agent = eventually(
        &format!("{namespace}: sealed-pvc's agent Pod"),
        LIMIT,
        || async {
            let list = pods
                .list(
                    &ListParams::default().labels("etcd-operator.cozystack.io/snapshot-agent=save"),
                )
                .await
                .map_err(|e| e.to_string())?;
            list.items
                .into_iter()
                .find(|p| {
                    p.metadata
                        .name
                        .as_deref()
                        .is_some_and(|n| n.starts_with("sealed-pvc-save-"))
                })
                .ok_or_else(|| "not yet".to_string())
        },
    )
    .await;
    assert!(
        agent
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_ref())
            .is_none(),
        "sealed-pvc's agent Pod was placed on a node that is unschedulable: {:?}",
        agent.spec.and_then(|s| s.node_name)
    );
    apply(
        &cluster,
        &secret_yaml(namespace, "flaky-identity", "identity", &stranger.identity),
    );
    set_unschedulable(&cluster, false).await;

    // zstd-age: S3, verified by a restore; the object is what age and zstd read.
    let s = check_decoded(
        &cluster,
        namespace,
        "zstd-age",
        "3.5.1",
        "Restore",
        ("Zstd", true),
        Some(&ours.file),
        |out| moto.download(BUCKET, &format!("{namespace}/zstd-age.db"), out),
    )
    .await;
    let took = started.elapsed().as_secs_f64();
    let status = s.status.clone().unwrap();
    let encryption = status.encryption.clone().unwrap();
    let fingerprint = format!("sha256:{}", &sha256_hex(ours.recipient.as_bytes())[..16]);
    assert_eq!(
        encryption.recipients,
        [fingerprint],
        "the recipient's fingerprint"
    );
    let verification = status.verification.clone().unwrap();
    let (_, source_kvs) = keyspace(
        &cluster,
        &format!("http://etcd-client.{namespace}.svc:2379"),
    );
    assert_eq!(
        verification.keys,
        Some(source_kvs.len() as i64),
        "the throwaway etcd served every key"
    );
    let serialized = serde_json::to_string(&status).unwrap();
    assert!(!leaks_key(&serialized) && !serialized.contains(&ours.recipient));
    for reason in ["SnapshotStarted", "SnapshotVerifying", "SnapshotComplete"] {
        wait_event(
            &cluster.client(),
            namespace,
            Some("EtcdSnapshot"),
            "zstd-age",
            Some("Normal"),
            reason,
            LIMIT,
        )
        .await;
    }
    no_agent_left(&cluster, namespace, &s).await;
    println!(
        "{namespace}: zstd-age verified by a restore {took:.1} s after creation: {verification:?}"
    );
    let revision = status.revision.expect("a revision");

    // The restores from zstd-age, and the bad ones, run beside the PVC checks.
    let restores = {
        let (cluster, moto) = (cluster.clone(), moto.clone());
        tokio::spawn(async move {
            let key = format!("{namespace}/zstd-age.db");
            // One byte flipped in the middle of the object.
            let dir = tempfile::tempdir().unwrap();
            let object = dir.path().join("object");
            blocking(|| moto.download(BUCKET, &key, &object));
            let mut bytes = std::fs::read(&object).unwrap();
            let middle = bytes.len() / 2;
            bytes[middle] ^= 0x01;
            std::fs::write(&object, &bytes).unwrap();
            let damaged = format!("{namespace}/damaged.db");
            blocking(|| moto.upload(BUCKET, &damaged, &object));
            for (name, key, identity) in [
                ("wrong-key", key.as_str(), Some("stranger-identity")),
                ("no-key", key.as_str(), None),
                ("damaged", damaged.as_str(), Some("backup-age-identity")),
            ] {
                apply(
                    &cluster,
                    &cluster_yaml(
                        namespace,
                        name,
                        1,
                        "3.5.1",
                        &restore_yaml(&moto, key, identity),
                    ),
                );
            }
            restore_and_compare(
                &cluster,
                &moto,
                namespace,
                "restored",
                "3.5.1",
                3,
                &key,
                "backup-age-identity",
                revision,
            )
            .await;
            restore_fails(
                &cluster,
                namespace,
                "wrong-key",
                "WrongIdentity",
                "other recipients",
            )
            .await;
            restore_fails(
                &cluster,
                namespace,
                "no-key",
                "EncryptedSnapshot",
                "ageIdentitySecretRef",
            )
            .await;
            restore_fails(
                &cluster,
                namespace,
                "damaged",
                "NotASnapshot",
                "age layer is damaged",
            )
            .await;
        })
    };

    // gzip-pvc: the claim's file is what gzip reads; verified by a restore from the claim.
    let claim_dir = cluster
        .kubelet
        .claim_dir(namespace, "backups")
        .expect("the claim's directory");
    let g = check_decoded(
        &cluster,
        namespace,
        "gzip-pvc",
        "3.5.1",
        "Restore",
        ("Gzip", false),
        None,
        |out| {
            std::fs::copy(claim_dir.join("codec/gzip-pvc.db"), out).unwrap();
        },
    )
    .await;
    assert_eq!(
        g.status.as_ref().unwrap().revision,
        Some(revision),
        "the same data, the same revision"
    );
    no_agent_left(&cluster, namespace, &g).await;

    // mismatched: refused before anything is written.
    let m = wait_phase(&cluster, namespace, "mismatched", "Failed").await;
    let (_, reason, message) = ready_condition(&m);
    assert_eq!(reason, "EncryptionSecretInvalid", "{message}");
    assert!(
        message.contains("belongs to none of the recipients"),
        "{message}"
    );
    assert!(m.status.as_ref().unwrap().artifact.is_none());
    assert!(!leaks_key(&message), "{message}");
    wait_event(
        &cluster.client(),
        namespace,
        Some("EtcdSnapshot"),
        "mismatched",
        Some("Warning"),
        "EncryptionSecretInvalid",
        LIMIT,
    )
    .await;
    println!("{namespace}: mismatched: {message}");

    // sealed-pvc: its verification read it with the stranger's identity.
    let f = wait_phase(&cluster, namespace, "sealed-pvc", "Failed").await;
    let status = f.status.clone().unwrap();
    let (_, reason, message) = ready_condition(&f);
    assert_eq!(reason, "VerificationFailed", "{message}");
    assert_eq!(status.verified, Some(false));
    assert!(
        message.contains("none of the age identities") || message.contains("WrongIdentity"),
        "{message}"
    );
    let artifact = status
        .artifact
        .unwrap_or_else(|| panic!("the failed artifact is named: {message}"));
    assert_eq!(artifact.uri, "pvc://backups/sealed/sealed-pvc.db");
    assert!(
        claim_dir.join("sealed/sealed-pvc.db").is_file(),
        "the file the failed snapshot names is on the claim"
    );
    assert!(status.verification.is_some());
    wait_event(
        &cluster.client(),
        namespace,
        Some("EtcdSnapshot"),
        "sealed-pvc",
        Some("Warning"),
        "VerificationFailed",
        LIMIT,
    )
    .await;
    no_agent_left(&cluster, namespace, &f).await;
    println!("{namespace}: sealed-pvc: {message}");

    restores.await.unwrap();
}

async fn codec_34(cluster: Arc<Cluster>, moto: Arc<Moto>, keys: Arc<(Keys, Keys)>) {
    let namespace = "codec-34";
    let ours = &keys.0;
    create_namespace(&cluster.client(), namespace).await;
    apply(&cluster, &cluster_yaml(namespace, "etcd", 1, "3.4.23", ""));
    credentials_secret(&cluster, namespace, &moto);
    apply(
        &cluster,
        &secret_yaml(namespace, "backup-age", "recipients", &ours.recipient),
    );
    apply(
        &cluster,
        &secret_yaml(namespace, "backup-age-identity", "identity", &ours.identity),
    );
    wait_available(&cluster, namespace, "etcd", 1).await;
    write_some(&cluster, namespace, "codec").await;
    apply(
        &cluster,
        &snapshot_yaml(
            namespace,
            "gzip-age",
            &s3_destination(&moto, namespace),
            &format!(
                "  compression: Gzip\n{}  verify: Restore\n",
                age_spec(Some("backup-age-identity"))
            ),
        ),
    );
    let s = check_decoded(
        &cluster,
        namespace,
        "gzip-age",
        "3.4.23",
        "Restore",
        ("Gzip", true),
        Some(&ours.file),
        |out| moto.download(BUCKET, &format!("{namespace}/gzip-age.db"), out),
    )
    .await;
    no_agent_left(&cluster, namespace, &s).await;
    let revision = s.status.unwrap().revision.unwrap();
    restore_and_compare(
        &cluster,
        &moto,
        namespace,
        "restored",
        "3.4.23",
        1,
        &format!("{namespace}/gzip-age.db"),
        "backup-age-identity",
        revision,
    )
    .await;
}

#[test]
fn base64_is_the_standard_encoding() {
    assert_eq!(base64(b""), "");
    assert_eq!(base64(b"f"), "Zg==");
    assert_eq!(base64(b"fo"), "Zm8=");
    assert_eq!(base64(b"foo"), "Zm9v");
    assert_eq!(base64(b"foobar"), "Zm9vYmFy");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn e2e_snapshot_codec() {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let keys = Arc::new((keygen(dir.path(), "ours"), keygen(dir.path(), "stranger")));
    let cluster = Arc::new(start_cluster(3).await);
    cluster.deploy_operator(1).await;
    let moto = Arc::new(blocking(|| Moto::start(&cluster, dir.path(), BUCKET)));
    let v35 = tokio::spawn(codec_35(cluster.clone(), moto.clone(), keys.clone()));
    let v34 = tokio::spawn(codec_34(cluster.clone(), moto.clone(), keys.clone()));
    v35.await.unwrap();
    v34.await.unwrap();
    // Nothing of a failed or finished snapshot left in the store half-written.
    assert_eq!(blocking(|| moto.unfinished_uploads(BUCKET)), 0);
    let (ok, _, _) = blocking(|| kubectl(&cluster, &["get", "etcdsnapshots", "-A"]));
    assert!(ok);
    println!(
        "snapshot codec: {:.0} s in all",
        started.elapsed().as_secs_f64()
    );
}
