//! Every manifest of `examples/`, applied with kubectl the way its header says and waited on
//! until it did what it promises, in one sandbox (3 nodes, the cert-manager stand-in, the
//! operator deployed from `deploy/`), each example in its own namespace.
//!
//! The files are applied as written, with two kinds of change only, each made by a function
//! below that fails if the example no longer has the field it changes: the placeholders a
//! user must fill in (credentials, an age key pair, a password is kept as written) get the
//! test's values, and the stores' addresses point at the emulators (moto for S3, fake-gcs-server
//! for GCS, Azurite for Azure) in the cluster network. The schedule's cron is made minutely so
//! that its first snapshot comes within a minute instead of at the next full hour.
//!
//! - `etcdcluster.yaml` (namespace `ex-backups`): Available with 3 members, a key written. On
//!   it, in turn: `snapshot-s3.yaml` (zstd and age, Complete and verified, the object in the
//!   bucket), `snapshot-pvc.yaml`, `snapshot-gcs.yaml`, `snapshot-azure.yaml` (Complete, each
//!   object where the artifact says), `snapshot-schedule.yaml` (a first Complete snapshot,
//!   `lastSuccessfulTime`), `defrag.yaml` (the run Complete, the policy Scheduled) and
//!   `restore.yaml` (a new cluster from the S3 snapshot, Available, `restoredFrom` naming it,
//!   the key there).
//! - At the same time, one after another in their namespaces (each deleted after its check):
//!   `tls-secrets.yaml` (the Secrets made with openssl as its header says; etcdctl with a client
//!   certificate answers over TLS), `tls-cert-manager.yaml`, `tls-operator-issued.yaml`,
//!   `auth.yaml` (`status.authEnabled`), `memory.yaml` (no PVC), `production.yaml` (members on
//!   three nodes, the PodDisruptionBudget, auth on) and `quorum-recovery.yaml`.
//!
//! A file in `examples/` this test does not apply fails it.

use etcd_operator_e2e_support as support;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_operator_api::{EtcdDefrag, EtcdDefragPolicy, EtcdSnapshot, EtcdSnapshotSchedule};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::ListParams;
use kube_sandbox::controllers::TimeScale;
use serde_json::Value;
use support::certs::{etcdctl_tls, make_ca, make_leaf, tls_files};
use support::cluster::{Cluster, start_cluster_with};
use support::moto::Moto;
use support::snapshots::{wait_available, wait_phase};
use support::stores::{Azurite, FakeGcs, Place, service_account_key};
use support::{create_namespace, eventually, get_cluster, kubectl, kubectl_with_stdin, repo_root};

const LIMIT: Duration = Duration::from_secs(300);

/// The examples this test applies; every file of `examples/` must be one of them.
const COVERED: &[&str] = &[
    "etcdcluster.yaml",
    "snapshot-s3.yaml",
    "snapshot-pvc.yaml",
    "snapshot-gcs.yaml",
    "snapshot-azure.yaml",
    "snapshot-schedule.yaml",
    "defrag.yaml",
    "restore.yaml",
    "tls-secrets.yaml",
    "tls-cert-manager.yaml",
    "tls-operator-issued.yaml",
    "auth.yaml",
    "memory.yaml",
    "production.yaml",
    "quorum-recovery.yaml",
];

fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

/// The documents of `examples/<name>`.
fn example(name: &str) -> Vec<Value> {
    let path = repo_root().join("examples").join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).expect("the example is valid YAML"))
        .filter(|v: &Value| !v.is_null())
        .collect()
}

/// The document of `kind` named `name`.
fn doc<'a>(docs: &'a mut [Value], kind: &str, name: &str) -> &'a mut Value {
    docs.iter_mut()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("the example has no {kind} {name}"))
}

/// Replaces the value at `pointer`, which must be there (the example changed otherwise).
fn replace(value: &mut Value, pointer: &str, new: impl Into<Value>) {
    let shown = value.to_string();
    let slot = value
        .pointer_mut(pointer)
        .unwrap_or_else(|| panic!("the example has nothing at {pointer}: {shown}"));
    *slot = new.into();
}

/// Every `s3` location in `value` pointed at moto: its endpoint (which must be set),
/// moto's region and path-style addressing (moto answers on an IP address).
fn point_s3_at(value: &mut Value, moto: &Moto) -> usize {
    let mut found = 0;
    match value {
        Value::Object(map) => {
            if let Some(s3) = map.get_mut("s3") {
                replace(s3, "/endpoint", moto.url.clone());
                s3["region"] = "us-east-1".into();
                s3["forcePathStyle"] = true.into();
                found += 1;
            }
            for (key, child) in map.iter_mut() {
                if key != "s3" {
                    found += point_s3_at(child, moto);
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                found += point_s3_at(item, moto);
            }
        }
        _ => {}
    }
    found
}

/// `kubectl apply -n NS -f -` of the documents.
fn apply(cluster: &Cluster, namespace: &str, docs: &[Value]) {
    let text: String = docs
        .iter()
        .map(|d| format!("---\n{}", serde_yaml::to_string(d).unwrap()))
        .collect();
    let (ok, _, stderr) = blocking(|| {
        kubectl_with_stdin(cluster, &["-n", namespace, "apply", "-f", "-"], Some(&text))
    });
    assert!(ok, "kubectl apply of an example into {namespace}: {stderr}");
}

fn must_kubectl(cluster: &Cluster, args: &[&str]) -> String {
    let (ok, out, stderr) = blocking(|| kubectl(cluster, args));
    assert!(ok, "kubectl {args:?}: {stderr}");
    out
}

/// A generic Secret from literals, as the examples' headers create them.
fn create_secret(cluster: &Cluster, namespace: &str, name: &str, data: &[(&str, &str)]) {
    let mut args = vec![
        "-n".to_string(),
        namespace.to_string(),
        "create".into(),
        "secret".into(),
        "generic".into(),
        name.to_string(),
    ];
    for (key, value) in data {
        args.push(format!("--from-literal={key}={value}"));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    must_kubectl(cluster, &args);
}

fn run(program: &str, args: &[&str]) -> String {
    let out = blocking(|| std::process::Command::new(program).args(args).output())
        .unwrap_or_else(|e| panic!("{program}: {e} (scripts/install-deps.sh installs it)"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// An age key pair as `age-keygen` makes it: (recipient, identity line).
fn age_key_pair(dir: &Path) -> (String, String) {
    let file = dir.join("age-key.txt");
    run("age-keygen", &["-o", file.to_str().unwrap()]);
    let recipient = run("age-keygen", &["-y", file.to_str().unwrap()])
        .trim()
        .to_string();
    let identity = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .find(|l| l.starts_with("AGE-SECRET-KEY-1"))
        .expect("age-keygen wrote an identity")
        .to_string();
    (recipient, identity)
}

fn snapshot_line(s: &EtcdSnapshot) -> String {
    let status = s.status.clone().unwrap_or_default();
    format!(
        "{}: {:?}, verified {:?}, {} bytes, revision {:?}, {}",
        s.metadata.name.clone().unwrap_or_default(),
        status.phase,
        status.verified,
        status
            .artifact
            .as_ref()
            .and_then(|a| a.size_bytes)
            .unwrap_or_default(),
        status.revision,
        status.artifact.map(|a| a.uri).unwrap_or_default()
    )
}

/// A snapshot example applied: Complete, verified, its artifact at `uri`.
async fn expect_snapshot(cluster: &Cluster, namespace: &str, name: &str, uri: &str) {
    let s = wait_phase(cluster, namespace, name, "Complete").await;
    let status = s.status.clone().unwrap();
    assert_eq!(status.verified, Some(true), "{name}: {status:?}");
    assert_eq!(
        status.artifact.as_ref().map(|a| a.uri.as_str()),
        Some(uri),
        "{name}"
    );
    println!("{}", snapshot_line(&s));
}

/// The backup, defragmentation and restore examples on `etcdcluster.yaml`'s cluster.
async fn backups(cluster: Arc<Cluster>) {
    let ns = "ex-backups";
    let started = Instant::now();
    create_namespace(&cluster.client(), ns).await;
    apply(&cluster, ns, &example("etcdcluster.yaml"));
    wait_available(&cluster, ns, "example", 3).await;
    blocking(|| cluster.put(ns, "example", "greeting", "written before the snapshot"));
    println!(
        "etcdcluster.yaml: Available with 3 members after {:.0} s",
        started.elapsed().as_secs_f64()
    );

    let dir = tempfile::tempdir().unwrap();
    let moto = blocking(|| Moto::start(&cluster, dir.path(), "etcd-backups"));

    // snapshot-s3.yaml: the credentials and the age key pair filled in, the store moto.
    let (recipient, identity) = blocking(|| age_key_pair(dir.path()));
    let mut docs = example("snapshot-s3.yaml");
    let credentials = doc(&mut docs, "Secret", "s3-credentials");
    replace(
        credentials,
        "/stringData/AWS_ACCESS_KEY_ID",
        moto.key_id.clone(),
    );
    replace(
        credentials,
        "/stringData/AWS_SECRET_ACCESS_KEY",
        moto.secret.clone(),
    );
    let age = doc(&mut docs, "Secret", "etcd-backup-age");
    replace(age, "/stringData/recipients", recipient);
    replace(age, "/stringData/identity", identity);
    assert_eq!(point_s3_at(&mut docs[2], &moto), 1);
    apply(&cluster, ns, &docs);
    let key = "prod/example/etcd-before-upgrade.db";
    expect_snapshot(
        &cluster,
        ns,
        "etcd-before-upgrade",
        &format!("s3://etcd-backups/{key}"),
    )
    .await;
    let s = Api::<EtcdSnapshot>::namespaced(cluster.client(), ns)
        .get("etcd-before-upgrade")
        .await
        .unwrap();
    let status = s.status.unwrap();
    assert_eq!(
        status.compression.map(|c| format!("{c:?}")).as_deref(),
        Some("Zstd")
    );
    assert_eq!(
        status.encryption.map(|e| e.method).as_deref(),
        Some("age"),
        "encrypted with age"
    );
    let head = blocking(|| moto.head("etcd-backups", key)).expect("the object is in the bucket");
    println!("snapshot-s3.yaml: the object {key} is in the bucket: {head}");

    // snapshot-pvc.yaml as written.
    apply(&cluster, ns, &example("snapshot-pvc.yaml"));
    expect_snapshot(
        &cluster,
        ns,
        "etcd-to-pvc",
        "pvc://etcd-backups/example/etcd-to-pvc.db",
    )
    .await;

    // snapshot-gcs.yaml: the Secret its header creates, the endpoint fake-gcs-server's.
    let place = Place::Network(cluster.network.clone());
    let gcs = blocking(|| FakeGcs::start(&place, dir.path(), 4443, &["my-etcd-backups"]));
    let account = service_account_key(dir.path());
    create_secret(
        &cluster,
        ns,
        "gcs-credentials",
        &[("GOOGLE_SERVICE_ACCOUNT_KEY", &account)],
    );
    let mut docs = example("snapshot-gcs.yaml");
    let snapshot = doc(&mut docs, "EtcdSnapshot", "etcd-to-gcs");
    assert!(snapshot.pointer("/spec/destination/gcs/bucket").is_some());
    snapshot["spec"]["destination"]["gcs"]["endpoint"] = gcs.url.clone().into();
    apply(&cluster, ns, &docs);
    expect_snapshot(
        &cluster,
        ns,
        "etcd-to-gcs",
        "gs://my-etcd-backups/prod/example/etcd-to-gcs.db",
    )
    .await;
    assert!(
        blocking(|| gcs.head("my-etcd-backups", "prod/example/etcd-to-gcs.db")).is_some(),
        "the GCS object is there"
    );

    // snapshot-azure.yaml: the Secret its header creates, Azurite's account and endpoint.
    let azurite = blocking(|| Azurite::start(&place, dir.path(), 10000, &["etcd-backups"]));
    create_secret(
        &cluster,
        ns,
        "azure-credentials",
        &[("AZURE_STORAGE_ACCOUNT_KEY", &azurite.key)],
    );
    let mut docs = example("snapshot-azure.yaml");
    let snapshot = doc(&mut docs, "EtcdSnapshot", "etcd-to-azure");
    replace(
        snapshot,
        "/spec/destination/azure/account",
        azurite.account.clone(),
    );
    snapshot["spec"]["destination"]["azure"]["endpoint"] = azurite.url.clone().into();
    apply(&cluster, ns, &docs);
    expect_snapshot(
        &cluster,
        ns,
        "etcd-to-azure",
        &format!(
            "azure://{}/etcd-backups/prod/example/etcd-to-azure.db",
            azurite.account
        ),
    )
    .await;
    assert!(
        blocking(|| azurite.head("etcd-backups", "prod/example/etcd-to-azure.db")).is_some(),
        "the Azure blob is there"
    );

    // snapshot-schedule.yaml: minutely (its first tick within a minute), the store moto.
    let mut docs = example("snapshot-schedule.yaml");
    let schedule = doc(&mut docs, "EtcdSnapshotSchedule", "example-hourly");
    replace(schedule, "/spec/schedule", "* * * * *");
    assert_eq!(point_s3_at(schedule, &moto), 1);
    apply(&cluster, ns, &docs);
    let schedules: Api<EtcdSnapshotSchedule> = Api::namespaced(cluster.client(), ns);
    let snapshots: Api<EtcdSnapshot> = Api::namespaced(cluster.client(), ns);
    eventually("the schedule's first Complete snapshot", LIMIT, || async {
        let s = schedules
            .get("example-hourly")
            .await
            .map_err(|e| e.to_string())?;
        let status = s.status.unwrap_or_default();
        let stamped = snapshots
            .list(
                &ListParams::default()
                    .labels("etcd-operator.cozystack.io/snapshot-schedule=example-hourly"),
            )
            .await
            .map_err(|e| e.to_string())?;
        let lines: Vec<String> = stamped.items.iter().map(snapshot_line).collect();
        match (&status.last_successful_time, &status.newest_verified) {
            (Some(_), Some(newest))
                if stamped
                    .items
                    .iter()
                    .any(|s| s.metadata.name.as_ref() == Some(newest)) =>
            {
                println!("snapshot-schedule.yaml: {lines:?}, newest verified {newest}");
                Ok(())
            }
            _ => Err(format!("status {status:?}, snapshots {lines:?}")),
        }
    })
    .await;

    // defrag.yaml as written: the run Complete, the policy scheduled.
    apply(&cluster, ns, &example("defrag.yaml"));
    let defrags: Api<EtcdDefrag> = Api::namespaced(cluster.client(), ns);
    eventually("example-now Complete", LIMIT, || async {
        let d = defrags
            .get("example-now")
            .await
            .map_err(|e| e.to_string())?;
        let status = d.status.unwrap_or_default();
        match status.phase.map(|p| format!("{p:?}")).as_deref() {
            Some("Complete") => {
                assert_eq!(status.defragmented, Some(3), "every member: {status:?}");
                Ok(())
            }
            Some("Failed") => panic!("example-now failed: {status:?}"),
            _ => Err(format!("{status:?}")),
        }
    })
    .await;
    let policies: Api<EtcdDefragPolicy> = Api::namespaced(cluster.client(), ns);
    eventually("example-weekly Scheduled", LIMIT, || async {
        let p = policies
            .get("example-weekly")
            .await
            .map_err(|e| e.to_string())?;
        let conditions = p.status.and_then(|s| s.conditions).unwrap_or_default();
        conditions
            .iter()
            .find(|c| c.type_ == "Active" && c.status == "True" && c.reason == "Scheduled")
            .map(|_| ())
            .ok_or(format!("{conditions:?}"))
    })
    .await;
    println!("defrag.yaml: example-now Complete on 3 members, example-weekly Scheduled");

    // What `kubectl get` shows of them: the category, the short names, the new columns.
    kubectl_get_shows_the_columns(&cluster, ns);

    // restore.yaml: the S3 object of snapshot-s3.yaml, decrypted with its identity.
    let mut docs = example("restore.yaml");
    assert_eq!(point_s3_at(&mut docs[0], &moto), 1);
    apply(&cluster, ns, &docs);
    wait_available(&cluster, ns, "example-restored", 3).await;
    let restored = get_cluster(&cluster.client(), ns, "example-restored")
        .await
        .status
        .and_then(|s| s.restored_from)
        .expect("status.restoredFrom");
    assert_eq!(restored.uri, format!("s3://etcd-backups/{key}"));
    let value = blocking(|| cluster.get(ns, "example-restored", "greeting")).unwrap();
    assert_eq!(value.as_deref(), Some("written before the snapshot"));
    println!(
        "restore.yaml: Available from {} at revision {:?}, the key there; backups done in {:.0} s",
        restored.uri,
        restored.revision,
        started.elapsed().as_secs_f64()
    );
}

/// `kubectl get` of the category and by short name, default and wide: every column the CRDs
/// add answers the questions a user asks (is it available, who leads, in which phase is each
/// member, how big and how verified is each snapshot), filled in for these objects.
fn kubectl_get_shows_the_columns(cluster: &Cluster, ns: &str) {
    let all = must_kubectl(cluster, &["-n", ns, "get", "etcd-operator"]);
    println!("kubectl get etcd-operator:\n{all}");
    for kind in [
        "etcdcluster.etcd-operator.cozystack.io/example",
        "etcdmember.etcd-operator.cozystack.io/example-0",
        "etcdsnapshot.etcd-operator.cozystack.io/etcd-before-upgrade",
        "etcdsnapshotschedule.etcd-operator.cozystack.io/example-hourly",
        "etcddefrag.etcd-operator.cozystack.io/example-now",
        "etcddefragpolicy.etcd-operator.cozystack.io/example-weekly",
    ] {
        assert!(all.contains(kind), "the category lists {kind}:\n{all}");
    }
    let header = |text: &str| {
        text.lines()
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let row = |text: &str, name: &str| {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no row {name} in:\n{text}"))
            .split_whitespace()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    // Clusters: AVAILABLE and LEADER by default, the progress reason and cluster ID when wide.
    let clusters = must_kubectl(cluster, &["-n", ns, "get", "etcdc", "example"]);
    assert_eq!(
        header(&clusters),
        [
            "NAME",
            "VERSION",
            "REPLICAS",
            "READY",
            "AVAILABLE",
            "LEADER",
            "AGE"
        ],
        "{clusters}"
    );
    let example = row(&clusters, "example");
    assert_eq!(example[4], "True", "{clusters}");
    assert!(example[5].starts_with("example-"), "a leader: {clusters}");
    let wide = must_kubectl(
        cluster,
        &["-n", ns, "get", "etcdc", "example", "-o", "wide"],
    );
    assert!(
        header(&wide).ends_with(&["PROGRESS".to_string(), "CLUSTER".into(), "ID".into()]),
        "{wide}"
    );
    // Members: PHASE; wide: voter, member ID, recreations.
    let members = must_kubectl(
        cluster,
        &[
            "-n",
            ns,
            "get",
            "etcdm",
            "-o",
            "wide",
            "-l",
            "etcd-operator.cozystack.io/cluster=example",
        ],
    );
    println!("kubectl get etcdm -o wide:\n{members}");
    assert_eq!(
        header(&members),
        [
            "NAME",
            "CLUSTER",
            "VERSION",
            "RUNNING",
            "READY",
            "PHASE",
            "AGE",
            "VOTER",
            "MEMBER",
            "ID",
            "RECREATED"
        ],
        "{members}"
    );
    let member = row(&members, "example-0");
    assert_eq!(
        (member[5].as_str(), member[7].as_str()),
        ("Ready", "true"),
        "{members}"
    );
    // Snapshots: VERIFIED, SIZE, REVISION; wide: the member, the reason, the object.
    let snapshots = must_kubectl(cluster, &["-n", ns, "get", "etcdsnap", "-o", "wide"]);
    println!("kubectl get etcdsnap -o wide:\n{snapshots}");
    assert_eq!(
        header(&snapshots),
        [
            "NAME", "CLUSTER", "PHASE", "VERIFIED", "SIZE", "REVISION", "AGE", "MEMBER", "REASON",
            "ARTIFACT"
        ],
        "{snapshots}"
    );
    let s3 = row(&snapshots, "etcd-before-upgrade");
    assert_eq!(
        (s3[2].as_str(), s3[3].as_str()),
        ("Complete", "true"),
        "{snapshots}"
    );
    assert!(
        s3[4].parse::<u64>().is_ok_and(|size| size > 0),
        "a size: {snapshots}"
    );
    assert!(
        s3[5].parse::<u64>().is_ok_and(|revision| revision > 0),
        "a revision: {snapshots}"
    );
    assert_eq!(
        s3[9], "s3://etcd-backups/prod/example/etcd-before-upgrade.db",
        "{snapshots}"
    );
}

/// Waits for `name` in `namespace` to be Available with 3 members, prints how long it took.
async fn available(cluster: &Cluster, file: &str, namespace: &str, name: &str, started: Instant) {
    wait_available(cluster, namespace, name, 3).await;
    println!(
        "{file}: {namespace}/{name} Available with 3 members after {:.0} s",
        started.elapsed().as_secs_f64()
    );
}

async fn member_pods(cluster: &Cluster, namespace: &str, name: &str) -> Vec<Pod> {
    Api::<Pod>::namespaced(cluster.client(), namespace)
        .list(&ListParams::default().labels(&format!("etcd-operator.cozystack.io/cluster={name}")))
        .await
        .unwrap()
        .items
}

async fn auth_enabled(cluster: &Cluster, namespace: &str, name: &str) {
    eventually(
        &format!("{namespace}/{name} authEnabled"),
        LIMIT,
        || async {
            let c = get_cluster(&cluster.client(), namespace, name).await;
            match c.status.as_ref().and_then(|s| s.auth_enabled) {
                Some(true) => Ok(()),
                other => Err(format!("authEnabled {other:?}")),
            }
        },
    )
    .await;
}

/// The cluster examples, one after another, each namespace deleted after its check.
async fn clusters(cluster: Arc<Cluster>) {
    // tls-secrets.yaml: the Secrets made as its header says.
    let ns = "ex-tls";
    let started = Instant::now();
    create_namespace(&cluster.client(), ns).await;
    let certs = tempfile::tempdir().unwrap();
    let d = certs.path();
    let sans = format!(
        "DNS:*.etcd-tls.{ns}.svc,DNS:*.etcd-tls.{ns}.svc.cluster.local,DNS:etcd-tls-client.{ns}.svc,DNS:etcd-tls-client.{ns}.svc.cluster.local,DNS:localhost,IP:127.0.0.1"
    );
    make_ca(d, "ca");
    make_leaf(
        d,
        "ca",
        "server",
        "etcd-tls",
        Some(&sans),
        "serverAuth,clientAuth",
    );
    make_leaf(
        d,
        "ca",
        "peer",
        "etcd-tls-peer",
        Some(&sans),
        "serverAuth,clientAuth",
    );
    make_leaf(
        d,
        "ca",
        "operator-client",
        "etcd-operator",
        None,
        "clientAuth",
    );
    for leaf in ["server", "peer", "operator-client"] {
        let mut args: Vec<String> = [
            "-n",
            ns,
            "create",
            "secret",
            "generic",
            &format!("etcd-tls-{leaf}"),
            "--type=kubernetes.io/tls",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for (key, path) in tls_files(d, leaf, "ca") {
            args.push(format!("--from-file={key}={}", path.display()));
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        must_kubectl(&cluster, &args);
    }
    apply(&cluster, ns, &example("tls-secrets.yaml"));
    available(&cluster, "tls-secrets.yaml", ns, "etcd-tls", started).await;
    let endpoint = format!("https://etcd-tls-client.{ns}.svc:2379");
    let health = etcdctl_tls(
        &cluster,
        &endpoint,
        d,
        Some("ca"),
        Some("operator-client"),
        &["endpoint", "health"],
    );
    assert!(
        health.as_deref().is_ok_and(|h| h.contains("is healthy")),
        "etcdctl over mutual TLS: {health:?}"
    );
    let refused = etcdctl_tls(
        &cluster,
        &endpoint,
        d,
        Some("ca"),
        None,
        &["endpoint", "health"],
    );
    assert!(refused.is_err(), "no client certificate, yet: {refused:?}");
    delete_namespace(&cluster, ns);

    // tls-cert-manager.yaml as written.
    let ns = "ex-cert-manager";
    let started = Instant::now();
    create_namespace(&cluster.client(), ns).await;
    apply(&cluster, ns, &example("tls-cert-manager.yaml"));
    available(&cluster, "tls-cert-manager.yaml", ns, "etcd-cm", started).await;
    let certificates = must_kubectl(&cluster, &["-n", ns, "get", "certificates", "-o", "name"]);
    for name in ["etcd-cm-server", "etcd-cm-operator-client", "etcd-cm-peer"] {
        assert!(certificates.contains(name), "{name} in {certificates}");
    }
    delete_namespace(&cluster, ns);

    // tls-operator-issued.yaml as written.
    let ns = "ex-issued";
    let started = Instant::now();
    create_namespace(&cluster.client(), ns).await;
    apply(&cluster, ns, &example("tls-operator-issued.yaml"));
    available(
        &cluster,
        "tls-operator-issued.yaml",
        ns,
        "etcd-issued",
        started,
    )
    .await;
    must_kubectl(&cluster, &["-n", ns, "get", "secret", "etcd-issued-ca"]);
    delete_namespace(&cluster, ns);

    // auth.yaml as written (its password too).
    let ns = "ex-auth";
    let started = Instant::now();
    create_namespace(&cluster.client(), ns).await;
    apply(&cluster, ns, &example("auth.yaml"));
    available(&cluster, "auth.yaml", ns, "etcd-auth", started).await;
    auth_enabled(&cluster, ns, "etcd-auth").await;
    println!("auth.yaml: authEnabled");
    delete_namespace(&cluster, ns);

    // memory.yaml: members on a tmpfs, no claim.
    let ns = "ex-memory";
    let started = Instant::now();
    create_namespace(&cluster.client(), ns).await;
    apply(&cluster, ns, &example("memory.yaml"));
    available(&cluster, "memory.yaml", ns, "etcd-memory", started).await;
    for pod in member_pods(&cluster, ns, "etcd-memory").await {
        let volumes = pod.spec.unwrap().volumes.unwrap_or_default();
        assert!(
            volumes.iter().all(|v| v.persistent_volume_claim.is_none()),
            "a memory-backed member mounts a claim: {volumes:?}"
        );
        assert!(
            volumes
                .iter()
                .any(|v| v.empty_dir.as_ref().and_then(|e| e.medium.as_deref()) == Some("Memory")),
            "a memory-backed member without a tmpfs: {volumes:?}"
        );
    }
    delete_namespace(&cluster, ns);

    // production.yaml as written: three nodes, the PodDisruptionBudget, auth.
    let ns = "ex-production";
    let started = Instant::now();
    create_namespace(&cluster.client(), ns).await;
    apply(&cluster, ns, &example("production.yaml"));
    available(&cluster, "production.yaml", ns, "etcd-prod", started).await;
    auth_enabled(&cluster, ns, "etcd-prod").await;
    let nodes: BTreeSet<String> = member_pods(&cluster, ns, "etcd-prod")
        .await
        .into_iter()
        .filter_map(|p| p.spec.and_then(|s| s.node_name))
        .collect();
    assert_eq!(nodes.len(), 3, "one member per node: {nodes:?}");
    let pdbs = Api::<PodDisruptionBudget>::namespaced(cluster.client(), ns)
        .list(&ListParams::default())
        .await
        .unwrap();
    assert_eq!(pdbs.items.len(), 1, "the operator's PodDisruptionBudget");
    println!("production.yaml: members on {nodes:?}, a PodDisruptionBudget, auth on");
    delete_namespace(&cluster, ns);

    // quorum-recovery.yaml as written: Available, the opt-in kept.
    let ns = "ex-recovery";
    let started = Instant::now();
    create_namespace(&cluster.client(), ns).await;
    apply(&cluster, ns, &example("quorum-recovery.yaml"));
    available(
        &cluster,
        "quorum-recovery.yaml",
        ns,
        "etcd-recovery",
        started,
    )
    .await;
    let spec = get_cluster(&cluster.client(), ns, "etcd-recovery")
        .await
        .spec;
    let mode = spec
        .quorum_recovery
        .and_then(|q| q.mode)
        .map(|m| format!("{m:?}"));
    assert_eq!(mode.as_deref(), Some("Automatic"));
    delete_namespace(&cluster, ns);
}

fn delete_namespace(cluster: &Cluster, namespace: &str) {
    must_kubectl(cluster, &["delete", "namespace", namespace, "--wait=false"]);
}

#[test]
fn every_example_is_applied_by_this_test() {
    let files: BTreeSet<String> = std::fs::read_dir(repo_root().join("examples"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let covered: BTreeSet<String> = COVERED.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        files, covered,
        "every file of examples/ is applied by e2e_examples (and only those)"
    );
    // One etcd version across the examples, written once per file as a quoted string (a
    // bare 3.5 would be a YAML number), so moving them to another version is one edit each.
    let mut versions = BTreeSet::new();
    for file in COVERED {
        let text = std::fs::read_to_string(repo_root().join("examples").join(file)).unwrap();
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| l.trim_start().starts_with("version:"))
            .collect();
        for doc in example(file) {
            if doc["kind"] == "EtcdCluster" {
                let version = doc["spec"]["version"]
                    .as_str()
                    .expect("a string")
                    .to_string();
                assert!(
                    lines.iter().any(|l| l.contains(&format!("\"{version}\""))),
                    "{file}: spec.version is quoted"
                );
                versions.insert(version);
            }
        }
        assert!(
            lines.len() <= 1,
            "{file}: the version is in one place: {lines:?}"
        );
    }
    assert_eq!(
        versions.len(),
        1,
        "the examples run one etcd version: {versions:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn e2e_examples() {
    let started = Instant::now();
    let cluster = Arc::new(start_cluster_with(3, TimeScale::REAL, true).await);
    cluster.deploy_operator(1).await;
    let backups = tokio::spawn(backups(cluster.clone()));
    let clusters = tokio::spawn(clusters(cluster.clone()));
    backups.await.unwrap();
    clusters.await.unwrap();
    println!(
        "examples: all {} applied and checked in {:.0} s",
        COVERED.len(),
        started.elapsed().as_secs_f64()
    );
}
