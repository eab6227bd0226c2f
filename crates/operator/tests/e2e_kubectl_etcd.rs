//! `kubectl etcd` (the `kubectl-etcd` crate, run in-process with the arguments a user types)
//! against clusters the operator runs in one sandbox: a plaintext etcd 3.5.1 cluster and an
//! operator-issued mutual-TLS cluster with authentication on etcd 3.4.23. The plugin reaches
//! the members only through the API server's `pods/portforward` and finds TLS and credentials
//! from the cluster's Secrets; every answer is compared with etcdctl's view from inside the
//! cluster network (with the test's own client certificate, made with openssl).

use etcd_operator_e2e_support as support;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::certs::{make_leaf, secret_data};
use support::cluster::{Cluster, ETCDCTL, start_cluster};
use support::moto::Moto;
use support::{create_namespace, eventually, get_cluster};

const LIMIT: Duration = Duration::from_secs(240);
const ROOT_PASSWORD: &str = "plugin-test-password";

/// How etcdctl reaches one of the clusters.
struct Etcdctl {
    cluster: Arc<Cluster>,
    namespace: &'static str,
    /// `--cacert/--cert/--key/--user` for the TLS cluster.
    tls: Option<tempfile::TempDir>,
}

impl Etcdctl {
    fn scheme(&self) -> &str {
        if self.tls.is_some() { "https" } else { "http" }
    }

    fn member_url(&self, member: &str) -> String {
        format!(
            "{}://{member}.etcd.{}.svc:2379",
            self.scheme(),
            self.namespace
        )
    }

    fn service(&self) -> String {
        format!(
            "{}://etcd-client.{}.svc:2379",
            self.scheme(),
            self.namespace
        )
    }

    fn run(&self, endpoints: &str, args: &[&str]) -> Result<String, String> {
        let mut command = self
            .cluster
            .network
            .command(ETCDCTL)
            .map_err(|e| e.to_string())?;
        command
            .arg(format!("--endpoints={endpoints}"))
            .arg("--dial-timeout=3s")
            .arg("--command-timeout=10s");
        if let Some(dir) = &self.tls {
            let d = dir.path();
            command
                .arg(format!("--cacert={}", d.join("ca.crt").display()))
                .arg(format!("--cert={}", d.join("client.crt").display()))
                .arg(format!("--key={}", d.join("client.key").display()))
                .arg(format!("--user=root:{ROOT_PASSWORD}"));
        }
        let out = tokio::task::block_in_place(|| command.args(args).output())
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    fn json(&self, endpoints: &str, args: &[&str]) -> Value {
        let mut args = args.to_vec();
        args.extend(["-w", "json"]);
        let out = self
            .run(endpoints, &args)
            .unwrap_or_else(|e| panic!("{}: etcdctl {args:?}: {e}", self.namespace));
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("etcdctl JSON {out}: {e}"))
    }

    /// etcdctl's member list: hex ID → (name, learner).
    fn members(&self) -> Vec<(String, String, bool)> {
        let list = self.json(&self.service(), &["member", "list"]);
        let mut members: Vec<(String, String, bool)> = list["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    format!("{:x}", m["ID"].as_u64().unwrap()),
                    m["name"].as_str().unwrap_or_default().to_string(),
                    m["isLearner"].as_bool().unwrap_or(false),
                )
            })
            .collect();
        members.sort();
        members
    }

    /// The leader's hex ID as member `member` reports it.
    fn leader_at(&self, member: &str) -> String {
        let status = self.json(&self.member_url(member), &["endpoint", "status"]);
        format!("{:x}", status[0]["Status"]["leader"].as_u64().unwrap())
    }

    /// The current revision.
    fn revision(&self) -> i64 {
        let status = self.json(&self.service(), &["endpoint", "status"]);
        status[0]["Status"]["header"]["revision"].as_i64().unwrap()
    }
}

/// `kubectl etcd <args>` against the sandbox: exit code, stdout, stderr.
async fn plugin(cluster: &Cluster, namespace: &str, args: &[&str]) -> (i32, String, String) {
    let kubeconfig = cluster.kubeconfig_path().display().to_string();
    let mut argv: Vec<String> = ["kubectl-etcd", "--kubeconfig", &kubeconfig, "-n", namespace]
        .iter()
        .map(|a| a.to_string())
        .collect();
    argv.extend(args.iter().map(|a| a.to_string()));
    let started = Instant::now();
    // On a thread of its own with the stack the binary gives its workers (src/main.rs): the
    // plugin's futures nest deeper than a test thread's 2 MiB allows in a debug build.
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
    println!(
        "{namespace}: kubectl etcd {} -> {} in {:?}",
        args.join(" "),
        outcome.code,
        started.elapsed()
    );
    (outcome.code, outcome.stdout, outcome.stderr)
}

/// `kubectl etcd <args> -o json`, which must succeed.
async fn plugin_json(cluster: &Cluster, namespace: &str, args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.extend(["-o", "json"]);
    let (code, out, err) = plugin(cluster, namespace, &args).await;
    assert_eq!(code, 0, "{namespace}: kubectl etcd {args:?}: {err}{out}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{namespace}: {args:?} JSON: {e}: {out}"))
}

fn cluster_yaml(namespace: &str, version: &str, secure: bool) -> String {
    let mut yaml = format!(
        "apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdCluster\nmetadata:\n  name: etcd\n  namespace: {namespace}\nspec:\n  replicas: 3\n  version: \"{version}\"\n"
    );
    if secure {
        yaml.push_str("  tls:\n    client:\n      operatorIssued: {}\n    peer:\n      operatorIssued: {}\n  auth:\n    enabled: true\n    rootCredentialsSecretRef:\n      name: etcd-root\n");
    }
    yaml
}

async fn create(
    cluster: &Arc<Cluster>,
    namespace: &'static str,
    version: &str,
    secure: bool,
) -> Etcdctl {
    create_namespace(&cluster.client(), namespace).await;
    let mut tls = None;
    if secure {
        tokio::task::block_in_place(|| {
            support::create_root_secret(cluster, namespace, "etcd-root", ROOT_PASSWORD)
        });
    }
    tokio::task::block_in_place(|| cluster.apply(&cluster_yaml(namespace, version, secure)));
    if secure {
        let (_, ca) = eventually(&format!("{namespace}: the CA Secret"), LIMIT, || {
            let got = secret_data(cluster, namespace, "etcd-ca");
            async move { got.ok_or("no Secret etcd-ca".to_string()) }
        })
        .await;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ca.crt"), &ca["tls.crt"]).unwrap();
        std::fs::write(dir.path().join("ca.key"), &ca["tls.key"]).unwrap();
        make_leaf(dir.path(), "ca", "client", "root", None, "clientAuth");
        tls = Some(dir);
    }
    Etcdctl {
        cluster: cluster.clone(),
        namespace,
        tls,
    }
}

/// Waits until the EtcdCluster reports three Ready members (Available, not Progressing) and
/// etcdctl (with TLS and root's password where the cluster has them) lists three started voters.
async fn converged(etcdctl: &Etcdctl) {
    let client = etcdctl.cluster.client();
    let ns = etcdctl.namespace;
    eventually(
        &format!("{ns}/etcd to converge on 3 members"),
        LIMIT,
        || async {
            let cluster = get_cluster(&client, ns, "etcd").await;
            let status = cluster.status.clone().unwrap_or_default();
            let available = support::condition(&cluster, "Available");
            let progressing = support::condition(&cluster, "Progressing");
            if status.ready_members != Some(3)
                || available.as_deref() != Some("True")
                || progressing.as_deref() != Some("False")
            {
                return Err(format!(
                    "ready {:?}, Available {available:?}, Progressing {progressing:?}",
                    status.ready_members
                ));
            }
            let listed = etcdctl.run(&etcdctl.service(), &["member", "list", "-w", "json"])?;
            let listed: Value = serde_json::from_str(&listed).map_err(|e| e.to_string())?;
            let started = listed["members"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|m| {
                    m["name"].as_str().is_some_and(|n| !n.is_empty()) && m["isLearner"] != true
                })
                .count();
            (started == 3)
                .then_some(())
                .ok_or(format!("etcdctl lists {started} started voters: {listed}"))
        },
    )
    .await;
}

fn sha256_hex(path: &Path) -> String {
    let data = std::fs::read(path).unwrap();
    ring::digest::digest(&ring::digest::SHA256, &data)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The commands every cluster answers, each compared with etcdctl.
async fn common_commands(etcdctl: &Etcdctl, version: &str) {
    let cluster = &etcdctl.cluster;
    let ns = etcdctl.namespace;
    let expected = etcdctl.members();
    assert_eq!(expected.len(), 3, "{ns}: {expected:?}");

    // status: one row per member, IDs and the leader as etcdctl sees them.
    let status = plugin_json(cluster, ns, &["status"]).await;
    let rows = status["members"].as_array().unwrap();
    let mut ids: Vec<(String, String, bool)> = rows
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap().to_string(),
                r["name"].as_str().unwrap().to_string(),
                r["learner"].as_bool().unwrap(),
            )
        })
        .collect();
    ids.sort();
    assert_eq!(ids, expected, "{ns}: status shows etcd's members");
    let leaders: Vec<&Value> = rows.iter().filter(|r| r["leader"] == true).collect();
    assert_eq!(leaders.len(), 1, "{ns}: one leader: {status}");
    let leader_name = leaders[0]["name"].as_str().unwrap().to_string();
    assert_eq!(
        leaders[0]["id"].as_str().unwrap(),
        etcdctl.leader_at(&leader_name),
        "{ns}: the leader etcdctl sees"
    );
    for row in rows {
        assert_eq!(row["version"], version, "{ns}: {row}");
        assert_eq!(row["podPhase"], "Running", "{ns}: {row}");
        assert!(row["dbSize"].as_i64().unwrap() > 0, "{ns}: {row}");
        assert!(row["raftTerm"].as_u64().unwrap() > 0, "{ns}: {row}");
        assert!(row["error"].is_null(), "{ns}: {row}");
        assert!(row["quotaPercent"].as_f64().unwrap() < 100.0);
    }
    // The table: a header and three rows, every column starting where its header does.
    let (code, table, err) = plugin(cluster, ns, &["status"]).await;
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 4, "{table}");
    let column = lines[0].find("VERSION").unwrap();
    for line in &lines[1..] {
        assert_eq!(&line[column..column + version.len()], version, "{table}");
    }
    // --member: one row.
    let one = plugin_json(cluster, ns, &["status", "--member", &leader_name]).await;
    assert_eq!(one["members"].as_array().unwrap().len(), 1);

    // members: etcd's list with each EtcdMember.
    let members = plugin_json(cluster, ns, &["members"]).await;
    let mut listed: Vec<(String, String, bool)> = members["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            assert_eq!(m["etcdMember"], m["name"]);
            (
                m["id"].as_str().unwrap().to_string(),
                m["name"].as_str().unwrap().to_string(),
                m["learner"].as_bool().unwrap(),
            )
        })
        .collect();
    listed.sort();
    assert_eq!(listed, expected, "{ns}: members");

    // health: all three voters healthy, exit 0.
    let (code, out, err) = plugin(cluster, ns, &["health"]).await;
    assert_eq!(code, 0, "{ns}: {out}{err}");
    assert!(
        out.contains("Healthy: 3 of 3 voters healthy, quorum is 2"),
        "{out}"
    );

    // compact to the current revision: etcdctl can no longer read an older one.
    for i in 0..5 {
        etcdctl
            .run(&etcdctl.service(), &["put", "plugin-key", &format!("v{i}")])
            .unwrap();
    }
    let revision = etcdctl.revision();
    let compacted = plugin_json(cluster, ns, &["compact"]).await;
    assert_eq!(
        compacted["compactedRevision"], revision,
        "{ns}: {compacted}"
    );
    let old = etcdctl.run(
        &etcdctl.service(),
        &["get", "plugin-key", &format!("--rev={}", revision - 2)],
    );
    assert!(
        old.as_ref().is_err_and(|e| e.contains("compacted")),
        "{ns}: an old revision is gone after compact: {old:?}"
    );
    let (code, _, err) = plugin(
        cluster,
        ns,
        &["compact", "--revision", &(revision + 1000).to_string()],
    )
    .await;
    assert_eq!(code, 1);
    assert!(err.contains("in the future"), "{err}");

    // defrag: every member, the leader last.
    let defrag = plugin_json(cluster, ns, &["defrag"]).await;
    let order: Vec<&str> = defrag["defragmented"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(order.len(), 3, "{defrag}");
    assert_eq!(
        order[2], leader_name,
        "{ns}: the leader is defragmented last"
    );

    // alarms: none, as etcdctl says.
    let alarms = plugin_json(cluster, ns, &["alarm", "list"]).await;
    assert_eq!(alarms["alarms"], serde_json::json!([]));
    assert_eq!(
        etcdctl
            .run(&etcdctl.service(), &["alarm", "list"])
            .unwrap()
            .trim(),
        ""
    );

    // snapshot: written atomically, its SHA-256 printed; etcdctl reads it as a snapshot.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("backup.db");
    let saved = plugin_json(cluster, ns, &["snapshot", file.to_str().unwrap()]).await;
    assert_eq!(
        saved["sha256"],
        sha256_hex(&file),
        "{ns}: the printed hash is the file's"
    );
    assert_eq!(saved["sizeBytes"], std::fs::metadata(&file).unwrap().len());
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "{ns}: no temporary file left: {names:?}");
    // etcd's own tool reads the file (etcdctl 3.6 has no `snapshot status`: it prints its help
    // and exits 0; etcdutl has it).
    let checked = tokio::task::block_in_place(|| {
        support::snapshot_tool::snapshot_status(support::DEFAULT_VERSION, &file)
    });
    assert!(checked["totalKey"].as_u64().unwrap() > 0, "{checked}");
    let (code, _, err) = plugin(cluster, ns, &["snapshot", file.to_str().unwrap()]).await;
    assert_eq!(code, 1, "an existing file is not overwritten silently");
    assert!(!err.is_empty());

    // forfeit-leadership: another member leads, as etcdctl sees.
    let moved = plugin_json(cluster, ns, &["forfeit-leadership"]).await;
    assert_eq!(moved["from"], leader_name.as_str());
    let to = moved["toID"].as_str().unwrap().to_string();
    eventually(
        &format!("{ns}: the new leader"),
        Duration::from_secs(30),
        || {
            let seen = etcdctl.leader_at(&leader_name);
            let to = to.clone();
            async move { (seen == to).then_some(()).ok_or(format!("leader {seen}")) }
        },
    )
    .await;

    // Errors that say what to do, with exit code 1 (2 for bad usage).
    let (code, _, err) = plugin(cluster, ns, &["status", "nope"]).await;
    assert_eq!(code, 1);
    assert!(
        err.contains("EtcdCluster") && err.contains("kubectl get etcdclusters"),
        "{err}"
    );
    let (code, _, err) = plugin(cluster, ns, &["status", "--member", "ghost"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("no member ghost"), "{err}");
    let (code, _, _) = plugin(cluster, ns, &["no-such-command"]).await;
    assert_eq!(code, 2);
    let yaml = plugin(cluster, ns, &["health", "-o", "yaml"]).await;
    let parsed: Value = serde_yaml::from_str(&yaml.1).unwrap();
    assert_eq!(parsed["health"], "Healthy");
}

/// `snapshot create`: an EtcdSnapshot to S3 (moto in the cluster network) made, waited for,
/// and its artifact printed as the EtcdSnapshot's status has it. Returns the S3 server (and
/// its directory), which `restore` reads from next.
async fn snapshot_create(etcdctl: &Etcdctl) -> (Moto, tempfile::TempDir) {
    let cluster = &etcdctl.cluster;
    let ns = etcdctl.namespace;
    // Keys for the restore to bring back.
    for i in 0..10 {
        etcdctl
            .run(
                &etcdctl.service(),
                &["put", &format!("/backup/{i}"), &format!("value-{i}")],
            )
            .unwrap_or_else(|e| panic!("{ns}: put: {e}"));
    }
    let dir = tempfile::tempdir().unwrap();
    let moto = tokio::task::block_in_place(|| Moto::start(cluster, dir.path(), "plugin-backups"));
    let (ok, _, err) = tokio::task::block_in_place(|| {
        support::kubectl(
            cluster,
            &[
                "-n",
                ns,
                "create",
                "secret",
                "generic",
                "s3-creds",
                &format!("--from-literal=AWS_ACCESS_KEY_ID={}", moto.key_id),
                &format!("--from-literal=AWS_SECRET_ACCESS_KEY={}", moto.secret),
            ],
        )
    });
    assert!(ok, "{err}");
    let created = plugin_json(
        cluster,
        ns,
        &[
            "snapshot",
            "create",
            "first",
            "--cluster",
            "etcd",
            "--s3-bucket",
            "plugin-backups",
            "--s3-endpoint",
            &moto.url,
            "--s3-secret",
            "s3-creds",
            "--s3-key",
            "plugin/",
            "--s3-region",
            "us-east-1",
            "--s3-force-path-style",
            "--timeout",
            "3m",
        ],
    )
    .await;
    assert_eq!(created["phase"], "Complete", "{created}");
    let snapshots: kube::Api<etcd_operator_api::EtcdSnapshot> =
        kube::Api::namespaced(cluster.client(), ns);
    let stored = snapshots
        .get("first")
        .await
        .unwrap()
        .status
        .unwrap()
        .artifact
        .unwrap();
    assert_eq!(created["artifact"]["uri"], stored.uri.as_str());
    assert!(
        stored.uri.starts_with("s3://plugin-backups/"),
        "{}",
        stored.uri
    );
    assert_eq!(
        created["artifact"]["checksum"],
        stored.checksum.unwrap().as_str()
    );
    // Without a destination: usage advice, nothing created.
    let (code, _, err) = plugin(cluster, ns, &["snapshot", "create", "second"]).await;
    assert_eq!(code, 1);
    assert!(
        err.contains("--pvc") && err.contains("--s3-bucket"),
        "{err}"
    );
    assert!(snapshots.get_opt("second").await.unwrap().is_none());
    (moto, dir)
}

/// `restore`: a new cluster from snapshot `first` of the TLS+auth cluster, with its TLS and
/// auth carried over (operator-issued certificates for the new names, the same root user),
/// Available with `status.restoredFrom`, holding exactly the source's keys at the snapshot's
/// revision; the refusals say what to do and create nothing.
async fn restore_from_snapshot(etcdctl: &Etcdctl) {
    let cluster = &etcdctl.cluster;
    let ns = etcdctl.namespace;
    let dry = plugin(
        cluster,
        ns,
        &[
            "restore",
            "copy",
            "--from-snapshot",
            "first",
            "--dry-run",
            "-o",
            "yaml",
        ],
    )
    .await;
    assert_eq!(dry.0, 0, "{}", dry.2);
    let manifest: Value = serde_yaml::from_str(&dry.1).unwrap();
    assert_eq!(manifest["kind"], "EtcdCluster");
    assert_eq!(manifest["spec"]["version"], "3.4.23");
    let key = manifest["spec"]["bootstrap"]["restore"]["source"]["s3"]["key"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        key.starts_with("plugin/") && key.ends_with("first.db"),
        "{key}"
    );
    let clusters: kube::Api<etcd_operator_api::EtcdCluster> =
        kube::Api::namespaced(cluster.client(), ns);
    assert!(
        clusters.get_opt("copy").await.unwrap().is_none(),
        "dry run created nothing"
    );

    let restored = plugin_json(
        cluster,
        ns,
        &[
            "restore",
            "restored",
            "--from-snapshot",
            "first",
            "--replicas",
            "1",
            "--timeout",
            "4m",
        ],
    )
    .await;
    let artifact_uri = format!("s3://plugin-backups/{key}");
    assert_eq!(
        restored["restoredFrom"]["uri"],
        artifact_uri.as_str(),
        "{restored}"
    );
    let revision = restored["restoredFrom"]["revision"]
        .as_i64()
        .unwrap_or_else(|| panic!("a revision: {restored}"));
    let spec = clusters.get("restored").await.unwrap().spec;
    assert!(
        spec.tls
            .as_ref()
            .and_then(|t| t.client.as_ref())
            .is_some_and(|c| c.operator_issued.is_some()),
        "TLS carried over: {spec:?}"
    );
    assert_eq!(spec.replicas, Some(1));

    // The new cluster's own CA, a client certificate for root, and root's password from the
    // snapshot: its keys are the source's at the snapshot's revision.
    let (_, ca) = eventually(&format!("{ns}: the CA Secret of restored"), LIMIT, || {
        let got = secret_data(cluster, ns, "restored-ca");
        async move { got.ok_or("no Secret restored-ca".to_string()) }
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ca.crt"), &ca["tls.crt"]).unwrap();
    std::fs::write(dir.path().join("ca.key"), &ca["tls.key"]).unwrap();
    make_leaf(dir.path(), "ca", "client", "root", None, "clientAuth");
    let copy = Etcdctl {
        cluster: cluster.clone(),
        namespace: ns,
        tls: Some(dir),
    };
    let keys = |e: &Etcdctl, endpoint: &str, rev: Option<i64>| {
        let mut args = vec!["get", "", "--prefix", "--keys-only"];
        let rev = rev.map(|r| format!("--rev={r}"));
        if let Some(r) = &rev {
            args.push(r);
        }
        let got = e.json(endpoint, &args);
        let mut keys: Vec<String> = got["kvs"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|kv| {
                // etcdctl's JSON gives keys in base64, as a ByteString reads them.
                let key: k8s_openapi::ByteString = serde_json::from_value(kv["key"].clone())
                    .unwrap_or_else(|e| panic!("a key in base64: {kv}: {e}"));
                String::from_utf8_lossy(&key.0).into_owned()
            })
            .collect();
        keys.sort();
        (got["header"]["revision"].as_i64(), keys)
    };
    let endpoint = format!("https://restored-0.restored.{ns}.svc:2379");
    let (restored_revision, restored_keys) = keys(&copy, &endpoint, None);
    let (_, source_keys) = keys(etcdctl, &etcdctl.service(), Some(revision));
    assert_eq!(restored_revision, Some(revision));
    assert!(
        (0..10).all(|i| source_keys.contains(&format!("/backup/{i}"))),
        "{source_keys:?}"
    );
    assert_eq!(restored_keys, source_keys);
    println!(
        "{ns}: restored holds the {} keys of etcd at revision {revision}",
        restored_keys.len()
    );

    // Refusals: nothing created, the message says what to do.
    for (args, says) in [
        (
            vec!["restore", "restored", "--from-snapshot", "first"],
            "already exists",
        ),
        (
            vec!["restore", "x", "--from-snapshot", "ghost"],
            "no etcdsnapshot/ghost",
        ),
        (
            vec!["restore", "etcd", "--from-snapshot", "first"],
            "pick another name",
        ),
    ] {
        let (code, _, err) = plugin(cluster, ns, &args).await;
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    assert!(clusters.get_opt("x").await.unwrap().is_none());
    clusters
        .delete("restored", &Default::default())
        .await
        .unwrap();
}

/// With the operator kept away (pause): a learner added and removed, a lost Pod seen as a
/// minority lost (exit 3) with the member named, then resume heals it.
async fn paused_operations(etcdctl: &Etcdctl) {
    let cluster = &etcdctl.cluster;
    let ns = etcdctl.namespace;
    let (code, out, err) = plugin(cluster, ns, &["pause"]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), "etcdcluster/etcd paused");
    let spec = get_cluster(&cluster.client(), ns, "etcd").await.spec;
    assert_eq!(spec.paused, Some(true));

    let added = plugin_json(
        cluster,
        ns,
        &["add-member", "--peer-url", "http://10.244.250.250:2380"],
    )
    .await;
    let id = added["id"].as_str().unwrap().to_string();
    let members = etcdctl.members();
    assert!(
        members.iter().any(|(i, _, learner)| *i == id && *learner),
        "{members:?}"
    );
    let removed = plugin_json(cluster, ns, &["remove-member", "--member", &id]).await;
    assert_eq!(removed["removed"], id.as_str());
    assert!(etcdctl.members().iter().all(|(i, _, _)| *i != id));

    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(cluster.client(), ns);
    pods.delete("etcd-2", &Default::default()).await.unwrap();
    eventually(&format!("{ns}: etcd-2 gone"), LIMIT, || async {
        match pods.get_opt("etcd-2").await {
            Ok(None) => Ok(()),
            other => Err(format!("{:?}", other.map(|p| p.is_some()))),
        }
    })
    .await;
    let (code, out, err) = plugin(cluster, ns, &["health"]).await;
    assert_eq!(code, 3, "{ns}: minority lost exits 3: {out}{err}");
    assert!(out.contains("MinorityLost: 2 of 3 voters healthy"), "{out}");
    let evidence = out
        .lines()
        .find(|l| l.starts_with("etcd-2"))
        .unwrap_or_default();
    assert!(
        evidence.contains("false") && evidence.contains("no Pod"),
        "{out}"
    );
    let status = plugin_json(cluster, ns, &["status", "--member", "etcd-2"]).await;
    assert_eq!(status["members"][0]["podPhase"], "Missing");

    let (code, out, err) = plugin(cluster, ns, &["resume"]).await;
    assert_eq!((code, out.trim()), (0, "etcdcluster/etcd resumed"), "{err}");
    converged(etcdctl).await;
    let (code, out, _) = plugin(cluster, ns, &["health"]).await;
    assert_eq!(code, 0, "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubectl_etcd_against_plaintext_and_tls_auth_clusters() {
    let started = Instant::now();
    let cluster = Arc::new(start_cluster(3).await);
    cluster.deploy_operator(1).await;
    let (plain, secure) = tokio::join!(
        create(&cluster, "plugin-plain", "3.5.1", false),
        create(&cluster, "plugin-tls", "3.4.23", true),
    );
    tokio::join!(converged(&plain), converged(&secure));
    println!("both clusters converged after {:?}", started.elapsed());
    tokio::join!(
        common_commands(&plain, "3.5.1"),
        common_commands(&secure, "3.4.23")
    );
    // The TLS cluster is reached with the operator's client certificate and root's password
    // from the Secrets: without the password etcd would refuse (auth is on).
    let status = plugin_json(&cluster, "plugin-tls", &["status"]).await;
    assert!(
        status["members"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["error"].is_null())
    );
    let _store = snapshot_create(&secure).await;
    restore_from_snapshot(&secure).await;
    paused_operations(&plain).await;
    println!("done after {:?}", started.elapsed());
}
