//! The `kubectl etcdop` commands added for a user's day two (the `kubectl-etcd` crate run
//! in-process with the arguments a user types), against clusters the operator runs in one
//! sandbox, each answer checked independently (etcdctl inside the cluster network, the API):
//!
//! - `hashkv` on a plaintext 3-member 3.5.1 cluster: every member's hash equals the one
//!   etcdctl's `endpoint hashkv` reports at the same revision;
//! - `snapshot save FILE`: the file is a snapshot etcdutl reads, with the printed SHA-256;
//! - `check perf --load s --duration 5s`: puts were made and measured, the verdict matches the
//!   exit code, and every key it wrote is gone;
//! - `promote-member`: a voter and an unknown member refused; a learner that has not caught up
//!   refused with what etcd said (and removed after);
//! - `report`: the files a support request needs, member logs among them, no private key, no
//!   root password (the TLS cluster's);
//! - `certificate` on an operator-issued mutual-TLS cluster with authentication (3.5.1): files
//!   and a Secret; etcdctl with that certificate (CN root, no password) writes a key, proving
//!   the CA signed it and etcd took its CN as the user; refused on a cluster without
//!   operator-issued TLS;
//! - `recover-quorum --wait`: on a healthy cluster it returns at once (nothing to recover); on
//!   a cluster whose two of three volumes were wiped it returns once the recovery completed
//!   and the cluster is Available again, saying what may have been lost.

use etcd_operator_e2e_support as support;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde_json::Value;
use support::cluster::{Cluster, ETCDCTL};
use support::healing::{OperatorDeployment, start_healing_cluster};
use support::snapshot_tool::ETCDUTL_35;
use support::{create_namespace, create_root_secret, eventually, get_cluster};

const LIMIT: Duration = Duration::from_secs(300);
const ROOT_PASSWORD: &str = "etcdop-test-password";

/// `kubectl etcdop <args>` against the sandbox: exit code, stdout, stderr.
async fn plugin(cluster: &Cluster, namespace: &str, args: &[&str]) -> (i32, String, String) {
    let kubeconfig = cluster.kubeconfig_path().display().to_string();
    let mut argv: Vec<String> = [
        "kubectl-etcdop",
        "--kubeconfig",
        &kubeconfig,
        "-n",
        namespace,
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    argv.extend(args.iter().map(|a| a.to_string()));
    let started = Instant::now();
    // The binary's roomy stack (src/main.rs): the plugin's futures nest deeply in debug builds.
    let outcome = tokio::task::block_in_place(|| {
        std::thread::Builder::new()
            .stack_size(32 * 1024 * 1024)
            .spawn(move || {
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .unwrap()
                    .block_on(kubectl_etcd::run(argv))
            })
            .unwrap()
            .join()
            .unwrap()
    });
    println!(
        "{namespace}: kubectl etcdop {} -> {} in {:.1} s",
        args.join(" "),
        outcome.code,
        started.elapsed().as_secs_f64()
    );
    (outcome.code, outcome.stdout, outcome.stderr)
}

async fn plugin_json(cluster: &Cluster, namespace: &str, args: &[&str]) -> (i32, Value) {
    let mut args = args.to_vec();
    args.extend(["-o", "json"]);
    let (code, out, err) = plugin(cluster, namespace, &args).await;
    let value = serde_json::from_str(&out)
        .unwrap_or_else(|e| panic!("{namespace}: {args:?} printed no JSON ({e}): {out}{err}"));
    (code, value)
}

fn etcdctl(
    cluster: &Cluster,
    endpoint: &str,
    extra: &[String],
    args: &[&str],
) -> Result<String, String> {
    let mut command = cluster
        .network
        .command(ETCDCTL)
        .map_err(|e| e.to_string())?;
    command
        .arg(format!("--endpoints={endpoint}"))
        .arg("--dial-timeout=3s")
        .arg("--command-timeout=10s")
        .args(extra);
    let out =
        tokio::task::block_in_place(|| command.args(args).output()).map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn yaml(namespace: &str, name: &str, replicas: i32, extra: &str) -> String {
    format!(
        "apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdCluster\nmetadata:\n  name: {name}\n  namespace: {namespace}\nspec:\n  replicas: {replicas}\n  version: \"3.5.1\"\n{extra}"
    )
}

/// hashkv, snapshot save, check perf, promote-member, report, recover-quorum --wait (healthy).
async fn plaintext(cluster: Arc<Cluster>) {
    let ns = "op-plain";
    create_namespace(&cluster.client(), ns).await;
    tokio::task::block_in_place(|| cluster.apply(&yaml(ns, "etcd", 3, "")));
    cluster.wait_converged(ns, "etcd", 3, LIMIT).await;
    for i in 0..20 {
        tokio::task::block_in_place(|| cluster.put(ns, "etcd", &format!("key-{i}"), "value"));
    }

    // hashkv: the same hashes etcdctl reports, member by member, at the plugin's revision.
    let (code, hashes) = plugin_json(&cluster, ns, &["hashkv"]).await;
    assert_eq!(code, 0, "{hashes}");
    assert_eq!(hashes["consistent"], true, "{hashes}");
    let revision = hashes["revision"].as_i64().unwrap();
    let members = hashes["members"].as_array().unwrap();
    assert_eq!(members.len(), 3, "{hashes}");
    for member in members {
        let name = member["name"].as_str().unwrap();
        let url = format!("http://{name}.etcd.{ns}.svc:2379");
        let out = etcdctl(
            &cluster,
            &url,
            &[],
            &[
                "endpoint",
                "hashkv",
                &format!("--rev={revision}"),
                "-w",
                "json",
            ],
        )
        .unwrap_or_else(|e| panic!("etcdctl endpoint hashkv at {name}: {e}"));
        let theirs: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            theirs[0]["HashKV"]["hash"].as_u64(),
            member["hash"].as_u64(),
            "{name}: etcdctl {out} against {member}"
        );
    }
    let (_, table, _) = plugin(&cluster, ns, &["hashkv"]).await;
    println!("{table}");
    assert!(
        table.contains("consistent: 3 members have the same keyspace"),
        "{table}"
    );

    // snapshot save: etcdutl reads the file, its SHA-256 is the one printed.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("etcd.db");
    let (code, saved) =
        plugin_json(&cluster, ns, &["snapshot", "save", file.to_str().unwrap()]).await;
    assert_eq!(code, 0, "{saved}");
    let bytes = std::fs::read(&file).unwrap();
    let sha: String = ring::digest::digest(&ring::digest::SHA256, &bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(saved["sha256"].as_str(), Some(sha.as_str()));
    let status = tokio::task::block_in_place(|| {
        std::process::Command::new(ETCDUTL_35)
            .args(["snapshot", "status", file.to_str().unwrap(), "-w", "json"])
            .output()
            .unwrap()
    });
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let status: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert!(status["totalKey"].as_u64().unwrap() >= 20, "{status}");

    // check perf: measured, judged as the exit code says, cleaned up.
    let (code, perf) = plugin_json(
        &cluster,
        ns,
        &["check", "perf", "--load", "s", "--duration", "5s"],
    )
    .await;
    println!("{ns}: check perf {perf}");
    assert!(code == 0 || code == 6, "{perf}");
    assert_eq!(perf["passed"], code == 0, "{perf}");
    assert!(perf["puts"].as_u64().unwrap() > 100, "{perf}");
    assert_eq!(perf["deletedKeys"], perf["puts"], "{perf}");
    let left = etcdctl(
        &cluster,
        &format!("http://etcd-client.{ns}.svc:2379"),
        &[],
        &[
            "get",
            kubectl_etcd::ops::PERF_PREFIX,
            "--prefix",
            "--keys-only",
        ],
    )
    .unwrap();
    assert!(left.trim().is_empty(), "check perf left keys: {left}");

    // promote-member: a voter, a stranger and a learner that has not caught up are refused.
    let (code, _, err) = plugin(&cluster, ns, &["promote-member", "--member", "etcd-0"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("is a voter already"), "{err}");
    let (code, _, err) = plugin(&cluster, ns, &["promote-member", "--member", "nobody"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("no member named or numbered nobody"), "{err}");
    let (code, added) = plugin_json(
        &cluster,
        ns,
        &[
            "add-member",
            "--peer-url",
            &format!("http://stranger.etcd.{ns}.svc:2380"),
        ],
    )
    .await;
    assert_eq!(code, 0, "{added}");
    let id = added["id"].as_str().unwrap().to_string();
    let (code, _, err) = plugin(&cluster, ns, &["promote-member", "--member", &id]).await;
    assert_eq!(code, 1, "a learner that never started was promoted");
    assert!(err.contains("caught up"), "{err}");
    let (code, out, err) = plugin(&cluster, ns, &["remove-member", "--member", &id]).await;
    assert_eq!(code, 0, "{out}{err}");

    // certificate: only for a cluster whose CA the operator keeps.
    let (code, _, err) = plugin(
        &cluster,
        ns,
        &[
            "certificate",
            "--common-name",
            "x",
            "--out-dir",
            dir.path().join("x").to_str().unwrap(),
        ],
    )
    .await;
    assert_eq!(code, 1);
    assert!(err.contains("has no operator-issued client TLS"), "{err}");

    // recover-quorum --wait on a cluster whose majority serves: nothing to do, returns.
    let (code, out, err) = plugin(
        &cluster,
        ns,
        &["recover-quorum", "--wait", "--timeout", "2m"],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("nothing was recovered"), "{out}");

    // report: what a support request needs.
    let report = dir.path().join("report");
    let (code, out, err) =
        plugin(&cluster, ns, &["report", "--dir", report.to_str().unwrap()]).await;
    assert_eq!(code, 0, "{out}{err}");
    check_report(&report, &["etcd-0", "etcd-1", "etcd-2"], None);
}

/// Every file a report must have, member logs among them, and no secret in any.
fn check_report(dir: &Path, members: &[&str], password: Option<&str>) {
    for file in [
        "etcdcluster.yaml",
        "etcdmembers.yaml",
        "pods.yaml",
        "persistentvolumeclaims.yaml",
        "services.yaml",
        "events.tsv",
        "etcd-status.json",
        "etcd-health.json",
        "README.txt",
    ] {
        assert!(dir.join(file).exists(), "{} has {file}", dir.display());
    }
    let cluster: Value =
        serde_yaml::from_str(&std::fs::read_to_string(dir.join("etcdcluster.yaml")).unwrap())
            .unwrap();
    assert_eq!(cluster["kind"], "EtcdCluster");
    let status: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("etcd-status.json")).unwrap())
            .unwrap();
    assert_eq!(
        status["members"].as_array().map(Vec::len),
        Some(members.len()),
        "{status}"
    );
    let logs: Vec<String> = std::fs::read_dir(dir.join("logs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for member in members {
        assert!(
            logs.iter()
                .any(|l| l.starts_with(&format!("{member}-etcd"))),
            "{member}'s etcd log in {logs:?}"
        );
    }
    let events = std::fs::read_to_string(dir.join("events.tsv")).unwrap();
    assert!(events.contains("EtcdCluster/"), "{events}");
    for entry in walk(dir) {
        let text = String::from_utf8_lossy(&std::fs::read(&entry).unwrap()).into_owned();
        assert!(
            !text.contains("PRIVATE KEY-----"),
            "{} holds a private key",
            entry.display()
        );
        if let Some(password) = password {
            assert!(
                !text.contains(password),
                "{} holds the root password",
                entry.display()
            );
        }
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// certificate (files and a Secret) on an operator-issued mutual-TLS cluster with auth, and
/// the report of such a cluster.
async fn issued(cluster: Arc<Cluster>) {
    let ns = "op-tls";
    create_namespace(&cluster.client(), ns).await;
    tokio::task::block_in_place(|| create_root_secret(&cluster, ns, "etcd-root", ROOT_PASSWORD));
    tokio::task::block_in_place(|| {
        cluster.apply(&yaml(
            ns,
            "etcd",
            1,
            "  tls:\n    client:\n      operatorIssued: {}\n    peer:\n      operatorIssued: {}\n  auth:\n    enabled: true\n    rootCredentialsSecretRef:\n      name: etcd-root\n",
        ))
    });
    // Converged by the status (the membership check of wait_converged speaks plaintext).
    support::snapshots::wait_available(&cluster, ns, "etcd", 1).await;
    eventually("authEnabled", LIMIT, || async {
        let c = get_cluster(&cluster.client(), ns, "etcd").await;
        c.status
            .and_then(|s| s.auth_enabled)
            .filter(|a| *a)
            .map(|_| ())
            .ok_or("not yet".to_string())
    })
    .await;

    let dir = tempfile::tempdir().unwrap();
    let files = dir.path().join("root");
    let (code, out, err) = plugin(
        &cluster,
        ns,
        &[
            "certificate",
            "--common-name",
            "root",
            "--out-dir",
            files.to_str().unwrap(),
            "--duration",
            "1h",
        ],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("certificate for CN=root"), "{out}");
    let mode = std::fs::metadata(files.join("tls.key"))
        .unwrap()
        .permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o600
    );
    // etcd trusts it and takes its CN as the user: root writes without a password.
    let tls = |d: &Path| {
        vec![
            format!("--cacert={}", d.join("ca.crt").display()),
            format!("--cert={}", d.join("tls.crt").display()),
            format!("--key={}", d.join("tls.key").display()),
        ]
    };
    let endpoint = format!("https://etcd-client.{ns}.svc:2379");
    let put = etcdctl(
        &cluster,
        &endpoint,
        &tls(&files),
        &["put", "issued-by", "etcdop"],
    );
    assert!(put.as_deref().is_ok_and(|o| o.contains("OK")), "{put:?}");
    // Without a client certificate etcd refuses the handshake.
    let bare = vec![format!("--cacert={}", files.join("ca.crt").display())];
    assert!(etcdctl(&cluster, &endpoint, &bare, &["get", "issued-by"]).is_err());

    // Into a Secret, read back through the API.
    let (code, out, err) = plugin(
        &cluster,
        ns,
        &[
            "certificate",
            "--common-name",
            "app",
            "--secret",
            "app-etcd-client",
        ],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    let secret = support::certs::secret_data(&cluster, ns, "app-etcd-client").expect("the Secret");
    assert_eq!(secret.0["type"], "kubernetes.io/tls");
    for key in ["tls.crt", "tls.key", "ca.crt"] {
        assert!(secret.1.get(key).is_some_and(|v| !v.is_empty()), "{key}");
    }

    // The report of a TLS cluster with auth holds neither keys nor the password.
    let report = dir.path().join("report");
    let (code, out, err) =
        plugin(&cluster, ns, &["report", "--dir", report.to_str().unwrap()]).await;
    assert_eq!(code, 0, "{out}{err}");
    check_report(&report, &["etcd-0"], Some(ROOT_PASSWORD));
}

/// recover-quorum --wait through a real recovery: two of three volumes wiped.
async fn recovery(cluster: Arc<Cluster>) {
    let ns = "op-recover";
    create_namespace(&cluster.client(), ns).await;
    tokio::task::block_in_place(|| cluster.apply(&yaml(ns, "etcd", 3, "")));
    cluster.wait_converged(ns, "etcd", 3, LIMIT).await;
    cluster.move_leader_to(ns, "etcd", "etcd-0").await;
    tokio::task::block_in_place(|| cluster.put(ns, "etcd", "before", "the loss"));
    for m in ["etcd-1", "etcd-2"] {
        cluster
            .kubelet
            .wipe_claim(ns, &format!("data-{m}"))
            .unwrap();
        cluster
            .kubelet
            .signal_container(ns, m, None, Signal::SIGKILL)
            .unwrap();
    }
    eventually("quorum lost", LIMIT, || async {
        let c = get_cluster(&cluster.client(), ns, "etcd").await;
        (support::condition(&c, "Available").as_deref() == Some("False"))
            .then_some(())
            .ok_or("still Available".to_string())
    })
    .await;
    let started = Instant::now();
    let (code, out, err) = plugin(
        &cluster,
        ns,
        &["recover-quorum", "--wait", "--timeout", "5m"],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("completed"), "{out}");
    assert!(out.contains("may have been lost"), "{out}");
    println!(
        "{ns}: {} ({:.0} s)",
        out.trim(),
        started.elapsed().as_secs_f64()
    );
    // It returned with the cluster Available and the data of the survivor there.
    let c = get_cluster(&cluster.client(), ns, "etcd").await;
    assert_eq!(support::condition(&c, "Available").as_deref(), Some("True"));
    let value = tokio::task::block_in_place(|| cluster.get(ns, "etcd", "before")).unwrap();
    assert_eq!(value.as_deref(), Some("the loss"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn e2e_kubectl_etcdop() {
    let started = Instant::now();
    let cluster = Arc::new(start_healing_cluster(3).await);
    cluster
        .deploy_operator_with(&OperatorDeployment::repairing())
        .await;
    let plain = tokio::spawn(plaintext(cluster.clone()));
    let tls = tokio::spawn(issued(cluster.clone()));
    let recover = tokio::spawn(recovery(cluster.clone()));
    plain.await.unwrap();
    tls.await.unwrap();
    recover.await.unwrap();
    println!(
        "kubectl etcdop: {:.0} s in all",
        started.elapsed().as_secs_f64()
    );
}
