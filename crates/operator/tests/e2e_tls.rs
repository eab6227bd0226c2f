//! TLS from user Secrets, end to end: certificates made with `openssl` (independently of the
//! operator's own checks), mutual TLS on the client and the peer ports, on etcd 3.5.1 and 3.4.23 in
//! one sandbox at the same time: bootstrap 3, scale 3 → 5 → 3, a member's Pod lost and healed, data
//! kept throughout; plaintext, a missing client certificate and a client certificate from another
//! CA are refused by etcd (the version matrix: user Secrets on 3.5.1 and 3.4.23, cert-manager on
//! the default 3.6, operator-issued on the newest 3.7). And bad Secrets: missing, of the wrong
//! type, a key that is not the certificate's, a certificate from another CA, names that do not
//! cover the members: each is reported with the Secret's name and the problem, no Pod starts, and
//! the cluster proceeds by itself once the Secret is fixed. cert-manager's Certificates (through
//! the sandbox's stand-in), and operator-issued certificates renewed every 70 s with a TLS client
//! workload writing throughout, past the first certificates' end.

use etcd_operator_e2e_support as support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use support::certs::{
    etcdctl_tls, make_ca, make_leaf, member_sans, secret_data, tls_files, verifies,
};
use support::cluster::Cluster;
use support::healing::{OperatorDeployment, start_healing_cluster_with_cert_manager};
use support::{
    condition, create_namespace, create_root_secret, eventually, get_cluster, kubectl,
    kubectl_retrying_blocking, members, progressing,
};

const LIMIT: Duration = Duration::from_secs(240);

/// `kubectl create secret generic NAME --type=TYPE --from-file=...`.
fn create_secret(
    cluster: &Cluster,
    namespace: &str,
    name: &str,
    kind: &str,
    files: &[(&str, PathBuf)],
) {
    let mut args: Vec<String> = vec![
        "-n".into(),
        namespace.into(),
        "create".into(),
        "secret".into(),
        "generic".into(),
        name.into(),
        format!("--type={kind}"),
    ];
    for (key, path) in files {
        args.push(format!("--from-file={key}={}", path.display()));
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    kubectl_retrying(cluster, &refs);
}

/// Deletes the Secret `name` if it is there, then creates it anew.
fn replace_secret(
    cluster: &Cluster,
    namespace: &str,
    name: &str,
    kind: &str,
    files: &[(&str, PathBuf)],
) {
    kubectl_retrying(
        cluster,
        &[
            "-n",
            namespace,
            "delete",
            "secret",
            name,
            "--ignore-not-found",
        ],
    );
    create_secret(cluster, namespace, name, kind, files);
}

/// kubectl, tried again on a transport error (a loaded 2-core machine can stall a handshake).
fn kubectl_retrying(cluster: &Cluster, args: &[&str]) {
    // Blocking: hand this worker's other tasks (the in-process API server's among them) over.
    tokio::task::block_in_place(|| kubectl_retrying_blocking(cluster, args))
}

struct TlsCluster {
    cluster: Arc<Cluster>,
    namespace: &'static str,
    dir: tempfile::TempDir,
    /// `--user` for etcdctl, when its client certificate names no etcd user.
    user: Option<String>,
}

impl TlsCluster {
    fn service(&self) -> String {
        format!("https://etcd-client.{}.svc:2379", self.namespace)
    }

    fn member(&self, name: &str) -> String {
        format!("https://{name}.etcd.{}.svc:2379", self.namespace)
    }

    fn etcdctl(&self, endpoint: &str, args: &[&str]) -> Result<String, String> {
        let user = self.user.as_ref().map(|u| format!("--user={u}"));
        let args: Vec<&str> = user
            .iter()
            .map(String::as_str)
            .chain(args.iter().copied())
            .collect();
        etcdctl_tls(
            &self.cluster,
            endpoint,
            self.dir.path(),
            Some("ca"),
            Some("client"),
            &args,
        )
    }

    /// etcd's member list over TLS: (name, hex ID, learner, peer URL).
    fn etcd_members(&self) -> Result<Vec<(String, String, bool, String)>, String> {
        let out = self.etcdctl(&self.service(), &["member", "list", "-w", "json"])?;
        let list: serde_json::Value =
            serde_json::from_str(&out).map_err(|e| format!("{e}: {out}"))?;
        let mut members: Vec<_> = list["members"]
            .as_array()
            .ok_or_else(|| format!("no members in {out}"))?
            .iter()
            .map(|m| {
                (
                    m["name"].as_str().unwrap_or_default().to_string(),
                    format!("{:x}", m["ID"].as_u64().unwrap_or_default()),
                    m["isLearner"].as_bool().unwrap_or(false),
                    m["peerURLs"][0].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect();
        members.sort();
        Ok(members)
    }

    /// Converged on `n` Ready members, and etcd's member list (asked over TLS) agrees with
    /// the EtcdMembers, every peer URL https.
    async fn wait_converged(&self, n: i32) {
        let client = self.cluster.client();
        eventually(
            &format!("{} converged on {n}", self.namespace),
            LIMIT,
            || async {
                let c = get_cluster(&client, self.namespace, "etcd").await;
                let ready = c.status.as_ref().and_then(|s| s.ready_members);
                if ready != Some(n)
                    || condition(&c, "Available").as_deref() != Some("True")
                    || condition(&c, "Progressing").as_deref() != Some("False")
                {
                    return Err(format!(
                        "ready {ready:?}, conditions {:?}",
                        c.status.and_then(|s| s.conditions)
                    ));
                }
                let listed = self.etcd_members()?;
                let recorded: Vec<(String, String)> = members(&client, self.namespace, "etcd")
                    .await
                    .iter()
                    .map(|m| {
                        (
                            m.metadata.name.clone().unwrap_or_default(),
                            m.status
                                .clone()
                                .unwrap_or_default()
                                .member_id
                                .unwrap_or_default(),
                        )
                    })
                    .collect();
                let agree = listed.len() == n as usize
                    && listed.iter().all(|(name, id, learner, peer)| {
                        !learner
                            && peer.starts_with("https://")
                            && recorded.contains(&(name.clone(), id.clone()))
                    });
                agree
                    .then_some(())
                    .ok_or_else(|| format!("etcd lists {listed:?}, EtcdMembers {recorded:?}"))
            },
        )
        .await;
    }

    fn scale(&self, n: i32) {
        tokio::task::block_in_place(|| self.cluster.scale(self.namespace, "etcd", n));
    }

    /// The UID and the etcd container's restart count of each of the three members' Pods.
    async fn pods(&self) -> Vec<(Option<String>, i32)> {
        let mut pods = Vec::new();
        for m in ["etcd-0", "etcd-1", "etcd-2"] {
            let pod = self.cluster.member_pod(self.namespace, m).await;
            let restarts = pod
                .as_ref()
                .and_then(|p| p.status.as_ref())
                .and_then(|s| s.container_statuses.as_ref())
                .map(|c| c.iter().map(|c| c.restart_count).sum())
                .unwrap_or_default();
            pods.push((pod.and_then(|p| p.metadata.uid), restarts));
        }
        pods
    }

    /// etcd refuses plaintext, a client without a certificate, and the certificate `stranger`
    /// (from another CA), even with root's password if `user` is set.
    fn assert_refusals(&self, stranger: &str) {
        let (cluster, namespace, d) = (&self.cluster, self.namespace, self.dir.path());
        let user = self.user.as_ref().map(|u| format!("--user={u}"));
        let args: Vec<&str> = user
            .iter()
            .map(String::as_str)
            .chain(["get", "sentinel"])
            .collect();
        let plaintext = format!("http://etcd-client.{namespace}.svc:2379");
        assert!(
            etcdctl_tls(cluster, &plaintext, d, None, None, &args).is_err(),
            "{namespace}: plaintext refused"
        );
        assert!(
            etcdctl_tls(cluster, &self.service(), d, Some("ca"), None, &args).is_err(),
            "{namespace}: no client certificate: refused under mutual TLS"
        );
        assert!(
            etcdctl_tls(
                cluster,
                &self.service(),
                d,
                Some("ca"),
                Some(stranger),
                &args
            )
            .is_err(),
            "{namespace}: a client certificate from another CA ({stranger}): refused"
        );
    }

    /// Every member's Pod exists, is not being deleted and is Ready.
    async fn pods_ready(&self) -> bool {
        for m in ["etcd-0", "etcd-1", "etcd-2"] {
            let pod = self.cluster.member_pod(self.namespace, m).await;
            if !pod.is_some_and(|p| {
                p.metadata.deletion_timestamp.is_none() && support::cluster::pod_ready(&p)
            }) {
                return false;
            }
        }
        true
    }

    /// The UIDs of the three members' Pods.
    async fn pod_uids(&self) -> Vec<Option<String>> {
        self.pods().await.into_iter().map(|(uid, _)| uid).collect()
    }

    /// `member`'s Pod deleted; waits for its new Pod to be Ready and the cluster converged on 3.
    async fn lose_and_heal(&self, member: &str) {
        let (cluster, namespace) = (&self.cluster, self.namespace);
        let lost = cluster
            .member_pod(namespace, member)
            .await
            .and_then(|p| p.metadata.uid);
        cluster.delete_member_pod(namespace, member).await;
        eventually(&format!("{namespace}: {member} back"), LIMIT, || async {
            let pod = cluster
                .member_pod(namespace, member)
                .await
                .ok_or("no Pod")?;
            (pod.metadata.uid != lost
                && pod.metadata.deletion_timestamp.is_none()
                && support::cluster::pod_ready(&pod))
            .then_some(())
            .ok_or("the new Pod is not there and Ready yet".to_string())
        })
        .await;
        self.wait_converged(3).await;
    }
}

/// How a test writes the new root password into the Secret `etcd-root`.
#[derive(Clone, Copy, Debug)]
enum PasswordPatch {
    /// `kubectl patch secret --type merge -p '{"data":{"password":"<base64>"}}'`
    Data,
    /// `kubectl patch secret --type merge -p '{"stringData":{"password":"<text>"}}'`
    StringData,
}

/// The root password changed in the Secret `etcd-root` from `old` to `new` (written `how`):
/// etcd takes the new password and refuses the old one, one more `RootPasswordChanged` Event
/// says so, and neither password appears in the cluster's status, its Events or the operator's
/// log.
async fn change_root_password(tls: &TlsCluster, old: &str, new: &str, how: PasswordPatch) {
    let (cluster, namespace) = (&tls.cluster, tls.namespace);
    let announced = |events: &[(String, String)]| {
        events
            .iter()
            .filter(|(reason, _)| reason == "RootPasswordChanged")
            .count()
    };
    let before = announced(&cluster.events(namespace).await);
    let patch = match how {
        PasswordPatch::Data => {
            // ByteString serializes as base64, as Secret data wants.
            let encoded =
                serde_json::to_value(k8s_openapi::ByteString(new.as_bytes().to_vec())).unwrap();
            format!(
                r#"{{"data":{{"password":"{}"}}}}"#,
                encoded.as_str().unwrap()
            )
        }
        PasswordPatch::StringData => format!(r#"{{"stringData":{{"password":"{new}"}}}}"#),
    };
    tokio::task::block_in_place(|| {
        kubectl_retrying_blocking(
            cluster,
            &[
                "-n",
                namespace,
                "patch",
                "secret",
                "etcd-root",
                "--type",
                "merge",
                "-p",
                &patch,
            ],
        )
    });
    let new_root = format!("--user=root:{new}");
    eventually(
        &format!("{namespace}: the new root password ({how:?}) applied"),
        LIMIT,
        || async {
            tls.etcdctl(&tls.service(), &[&new_root, "user", "list"])
                .map(|_| ())
        },
    )
    .await;
    assert!(
        tls.etcdctl(
            &tls.service(),
            &[&format!("--user=root:{old}"), "user", "list"]
        )
        .is_err(),
        "{namespace}: the old root password is refused"
    );
    let events = eventually(
        &format!("{namespace}: an Event that the root password changed"),
        LIMIT,
        || async {
            let events = cluster.events(namespace).await;
            (announced(&events) > before)
                .then_some(events)
                .ok_or_else(|| format!("{before} RootPasswordChanged Events, no new one"))
        },
    )
    .await;
    let leaked = |text: &str| text.contains(old) || text.contains(new);
    assert!(
        events.iter().all(|(_, m)| !leaked(m)),
        "{namespace}: no Event carries a password"
    );
    let status = serde_json::to_string(
        &get_cluster(&cluster.client(), namespace, "etcd")
            .await
            .status,
    )
    .unwrap();
    assert!(!leaked(&status), "{namespace}: no password in the status");
    let pods = kube::Api::<k8s_openapi::api::core::v1::Pod>::namespaced(
        cluster.client(),
        support::cluster::OPERATOR_NAMESPACE,
    );
    for pod in cluster.operator_pods().await {
        let name = pod.metadata.name.unwrap_or_default();
        let log = pods
            .logs(&name, &Default::default())
            .await
            .expect("the operator's log");
        assert!(!leaked(&log), "{namespace}: no password in {name}'s log");
    }
}

/// With authentication on (`spec.auth`, root password from the Secret `etcd-root`).
fn auth_cluster_yaml(namespace: &str, replicas: i32, version: &str) -> String {
    tls_cluster_yaml(namespace, replicas, version)
        + "  auth:\n    enabled: true\n    rootCredentialsSecretRef:\n      name: etcd-root\n"
}

const ROOT_PASSWORD: &str = "correct-horse-battery";

fn tls_cluster_yaml(namespace: &str, replicas: i32, version: &str) -> String {
    format!(
        "apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdCluster\nmetadata:\n  name: etcd\n  namespace: {namespace}\nspec:\n  replicas: {replicas}\n  version: \"{version}\"\n  tls:\n    client:\n      serverSecretRef:\n        name: etcd-server\n      operatorClientSecretRef:\n        name: etcd-operator-client\n    peer:\n      secretRef:\n        name: etcd-peer\n"
    )
}

/// Certificates for `namespace` in a new directory: `ca`, `server`, `peer`, `client` (the
/// operator's and etcdctl's), and from another CA `stranger` (a client certificate).
fn certificates(namespace: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    make_ca(d, "ca");
    make_ca(d, "other-ca");
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
    make_leaf(d, "other-ca", "stranger", "root", None, "clientAuth");
    // A server certificate for another member only, for the bad-input checks.
    make_leaf(
        d,
        "ca",
        "narrow",
        "etcd",
        Some(&format!("DNS:etcd-9.etcd.{namespace}.svc")),
        "serverAuth,clientAuth",
    );
    dir
}

fn create_good_secrets(cluster: &Cluster, namespace: &str, dir: &Path) {
    create_secret(
        cluster,
        namespace,
        "etcd-server",
        "kubernetes.io/tls",
        &tls_files(dir, "server", "ca"),
    );
    create_secret(
        cluster,
        namespace,
        "etcd-peer",
        "kubernetes.io/tls",
        &tls_files(dir, "peer", "ca"),
    );
    create_secret(
        cluster,
        namespace,
        "etcd-operator-client",
        "kubernetes.io/tls",
        &tls_files(dir, "client", "ca"),
    );
}

/// Bootstrap, scale 3 → 5 → 3 and a lost Pod, with mutual TLS on both ports.
async fn lifecycle(cluster: Arc<Cluster>, namespace: &'static str, version: &'static str) {
    create_namespace(&cluster.client(), namespace).await;
    let tls = TlsCluster {
        cluster: cluster.clone(),
        namespace,
        dir: certificates(namespace),
        user: None,
    };
    create_good_secrets(&cluster, namespace, tls.dir.path());
    tokio::task::block_in_place(|| {
        create_root_secret(&cluster, namespace, "etcd-root", ROOT_PASSWORD)
    });
    tokio::task::block_in_place(|| cluster.apply(&auth_cluster_yaml(namespace, 3, version)));
    tls.wait_converged(3).await;
    let c = get_cluster(&cluster.client(), namespace, "etcd").await;
    assert_eq!(
        condition(&c, "CertificatesValid").as_deref(),
        Some("True"),
        "{namespace}: certificates far from expiry: {:?}",
        c.status.map(|s| s.conditions)
    );
    // The operator's metrics say how long each certificate has left.
    let pods = cluster.operator_pods().await;
    let metrics = operator_metrics(&cluster, &pods[0])
        .await
        .expect("/metrics answers");
    let line = metrics
        .lines()
        .find(|l| {
            l.starts_with("etcd_operator_certificate_expiry_seconds{")
                && l.contains(&format!("namespace=\"{namespace}\""))
                && l.contains("secret=\"etcd-peer\"")
        })
        .unwrap_or_else(|| panic!("{namespace}: no expiry series for etcd-peer in\n{metrics}"));
    let seconds: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    // openssl made the leaves for 30 days (`certificates` above): about that much is left.
    assert!(
        (29.0 * 86_400.0..=30.0 * 86_400.0).contains(&seconds),
        "{namespace}: {line}"
    );
    eventually(
        &format!("{namespace}: authentication enabled"),
        LIMIT,
        || async {
            let c = get_cluster(&cluster.client(), namespace, "etcd").await;
            (c.status.and_then(|s| s.auth_enabled) == Some(true))
                .then_some(())
                .ok_or_else(|| "status.authEnabled not yet true".to_string())
        },
    )
    .await;
    let root = format!("--user=root:{ROOT_PASSWORD}");
    tls.etcdctl(&tls.service(), &[&root, "user", "list"])
        .expect("the root password authenticates: authentication is on");
    assert!(
        tls.etcdctl(&tls.service(), &["--user=root:wrong", "get", "sentinel"])
            .is_err(),
        "a wrong password is refused"
    );
    // The password changed in the Secret: the operator authenticates with the one etcd still
    // has, changes it, and from then on the new one works and the old one is refused. On 3.5
    // through `stringData`, as `kubectl patch --type merge -p '{"stringData":...}'` sends it
    // (issue 32), on 3.4 through `data`.
    let new_password = format!("{ROOT_PASSWORD}-rotated");
    let how = if version.starts_with("3.4") {
        PasswordPatch::Data
    } else {
        PasswordPatch::StringData
    };
    change_root_password(&tls, ROOT_PASSWORD, &new_password, how).await;
    let put = tls
        .etcdctl(&tls.service(), &["put", "sentinel", "present"])
        .unwrap();
    assert!(put.contains("OK"), "{put}");

    // etcd refuses what it must refuse.
    tls.assert_refusals("stranger");
    let status = tls
        .etcdctl(&tls.member("etcd-0"), &["endpoint", "status", "-w", "json"])
        .unwrap();
    assert!(
        status.contains(&format!("\"version\":\"{version}\"")),
        "{status}"
    );

    tls.scale(5);
    tls.wait_converged(5).await;
    tls.scale(3);
    tls.wait_converged(3).await;

    let before = members(&cluster.client(), namespace, "etcd").await;
    cluster.delete_member_pod(namespace, "etcd-1").await;
    eventually("etcd-1 back as the same member", LIMIT, || async {
        let pod = cluster
            .member_pod(namespace, "etcd-1")
            .await
            .ok_or("no Pod")?;
        support::cluster::pod_ready(&pod)
            .then_some(())
            .ok_or("not ready")?;
        tls.etcdctl(
            &tls.member("etcd-1"),
            &["get", "sentinel", "--consistency=s", "--print-value-only"],
        )
        .map(|v| v.trim() == "present")?
        .then_some(())
        .ok_or_else(|| "no sentinel".to_string())
    })
    .await;
    tls.wait_converged(3).await;
    let after = members(&cluster.client(), namespace, "etcd").await;
    let ids = |ms: &[etcd_operator_api::EtcdMember]| {
        ms.iter()
            .map(|m| {
                (
                    m.metadata.name.clone(),
                    m.status.clone().unwrap_or_default().member_id,
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ids(&after),
        ids(&before),
        "{namespace}: healed with the same member IDs"
    );
    for m in ["etcd-0", "etcd-1", "etcd-2"] {
        let value = tls
            .etcdctl(
                &tls.member(m),
                &["get", "sentinel", "--consistency=s", "--print-value-only"],
            )
            .unwrap();
        assert_eq!(value.trim(), "present", "{namespace}: {m} kept the data");
    }

    renew_server_leaf(&tls).await;
    if version == "3.5.1" {
        rotate_user_ca(&tls).await;
    }
}

/// Replaces the Secret `name` (type kubernetes.io/tls) with the files of `dir`: `leaf`.crt and
/// .key, and `ca` as ca.crt (`kubectl apply` of a client-side dry run, as a user would).
fn apply_tls_secret(
    cluster: &Cluster,
    namespace: &str,
    name: &str,
    dir: &Path,
    leaf: &str,
    ca: &str,
) {
    let mut args: Vec<String> = vec![
        "-n".into(),
        namespace.into(),
        "create".into(),
        "secret".into(),
        "generic".into(),
        name.into(),
        "--type=kubernetes.io/tls".into(),
        "--dry-run=client".into(),
        "-o".into(),
        "yaml".into(),
    ];
    for (key, path) in tls_files(dir, leaf, ca) {
        args.push(format!("--from-file={key}={}", path.display()));
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let (ok, manifest, stderr) = tokio::task::block_in_place(|| kubectl(cluster, &refs));
    assert!(ok, "{stderr}");
    let (ok, _, stderr) = tokio::task::block_in_place(|| {
        support::kubectl_with_stdin(cluster, &["apply", "-f", "-"], Some(&manifest))
    });
    assert!(ok, "{stderr}");
}

/// CA rotation of user Secrets, done the way docs/security.md tells a user, with a TLS client
/// workload running: (1) both CAs in `ca.crt` of the server and peer Secrets, leaves unchanged:
/// the operator restarts every Pod, one at a time, so etcd trusts both; (2) leaves (and the
/// operator's and the client's certificates) from the new CA: no restart; (3) the old CA out of
/// `ca.crt`: every Pod restarted again. Same member IDs, nothing lost, a certificate of the old
/// CA refused at the end.
async fn rotate_user_ca(tls: &TlsCluster) {
    let (cluster, namespace, d) = (&tls.cluster, tls.namespace, tls.dir.path());
    let started = std::time::Instant::now();
    let ids_before = tls.etcd_members().expect("etcd answers");
    let all_restarted = |before: Vec<Option<String>>, phase: &'static str| async move {
        eventually(
            &format!("{namespace}: {phase}: every Pod restarted"),
            Duration::from_secs(420),
            || async {
                let now = tls.pod_uids().await;
                if now.iter().zip(&before).any(|(a, b)| a.is_none() || a == b) {
                    return Err(format!("not all restarted: {now:?}"));
                }
                // All started to trust the same CAs (the server and the peer Secret change one
                // after the other; none restarted between the two).
                let mut trusted = Vec::new();
                for m in ["etcd-0", "etcd-1", "etcd-2"] {
                    trusted.push(
                        cluster
                            .member_pod(namespace, m)
                            .await
                            .and_then(|p| p.metadata.annotations)
                            .and_then(|a| a.get("etcd-operator.cozystack.io/trusted-ca").cloned()),
                    );
                }
                if trusted.iter().any(Option::is_none) || trusted.windows(2).any(|w| w[0] != w[1]) {
                    return Err(format!("trusted CAs differ: {trusted:?}"));
                }
                let c = get_cluster(&cluster.client(), namespace, "etcd").await;
                (tls.pods_ready().await
                    && c.status.as_ref().and_then(|s| s.ready_members) == Some(3)
                    && condition(&c, "Available").as_deref() == Some("True"))
                .then_some(())
                .ok_or("not all Ready".to_string())
            },
        )
        .await;
    };
    let secure = support::workload::Secure {
        ca_pem: std::fs::read(d.join("ca.crt")).unwrap(),
        identity: Some((
            std::fs::read(d.join("client.crt")).unwrap(),
            std::fs::read(d.join("client.key")).unwrap(),
        )),
        credentials: None,
    };
    let shared = Arc::new(std::sync::Mutex::new(secure));
    let workload = support::workload::Workload::start_shared(
        cluster.network.clone(),
        namespace,
        "etcd",
        "user-ca",
        Some(shared.clone()),
    );
    let root = format!("--user=root:{ROOT_PASSWORD}-rotated");
    shared.lock().unwrap().credentials =
        Some(("root".to_string(), format!("{ROOT_PASSWORD}-rotated")));

    // (1) Trust both.
    make_ca(d, "ca2");
    let bundle = [
        std::fs::read(d.join("ca.crt")).unwrap(),
        std::fs::read(d.join("ca2.crt")).unwrap(),
    ]
    .concat();
    std::fs::write(d.join("bundle.crt"), &bundle).unwrap();
    shared.lock().unwrap().ca_pem = bundle.clone();
    let before = tls.pod_uids().await;
    apply_tls_secret(cluster, namespace, "etcd-server", d, "server2", "bundle");
    apply_tls_secret(cluster, namespace, "etcd-peer", d, "peer", "bundle");
    all_restarted(before, "both CAs trusted").await;

    // (2) Leaves from the new CA; no restart.
    let sans = member_sans(namespace);
    make_leaf(
        d,
        "ca2",
        "server3",
        "etcd",
        Some(&sans),
        "serverAuth,clientAuth",
    );
    make_leaf(
        d,
        "ca2",
        "peer3",
        "etcd-peer",
        Some(&sans),
        "serverAuth,clientAuth",
    );
    make_leaf(d, "ca2", "client3", "root", None, "clientAuth");
    let before = tls.pod_uids().await;
    shared.lock().unwrap().identity = Some((
        std::fs::read(d.join("client3.crt")).unwrap(),
        std::fs::read(d.join("client3.key")).unwrap(),
    ));
    apply_tls_secret(
        cluster,
        namespace,
        "etcd-operator-client",
        d,
        "client3",
        "bundle",
    );
    apply_tls_secret(cluster, namespace, "etcd-server", d, "server3", "bundle");
    apply_tls_secret(cluster, namespace, "etcd-peer", d, "peer3", "bundle");
    let host = format!("etcd-0.etcd.{namespace}.svc:2379");
    let new = file_serial(d, "server3");
    eventually(
        &format!("{namespace}: the new CA's leaf served"),
        LIMIT,
        || async {
            let serial = served_serial_with(cluster, &host, d, "client3", "bundle")?;
            (serial == new)
                .then_some(())
                .ok_or(format!("still {serial}"))
        },
    )
    .await;
    assert_eq!(
        tls.pod_uids().await,
        before,
        "{namespace}: leaves switched without a restart"
    );

    // (3) The old CA out.
    shared.lock().unwrap().ca_pem = std::fs::read(d.join("ca2.crt")).unwrap();
    apply_tls_secret(
        cluster,
        namespace,
        "etcd-operator-client",
        d,
        "client3",
        "ca2",
    );
    apply_tls_secret(cluster, namespace, "etcd-server", d, "server3", "ca2");
    apply_tls_secret(cluster, namespace, "etcd-peer", d, "peer3", "ca2");
    all_restarted(before, "the old CA dropped").await;
    println!(
        "{namespace}: user-Secret CA rotation of 3 members (both restarts) took {:.0} s",
        started.elapsed().as_secs_f64()
    );
    let report = workload.stop().await;
    println!("{namespace}: {}", report.summary());
    report.assert_no_loss();

    for (from, to) in [
        ("client.crt", "oldclient.crt"),
        ("client.key", "oldclient.key"),
        ("ca2.crt", "ca.crt"),
        ("client3.crt", "client.crt"),
        ("client3.key", "client.key"),
    ] {
        std::fs::copy(d.join(from), d.join(to)).unwrap();
    }
    tls.wait_converged(3).await;
    assert_eq!(
        tls.etcd_members().unwrap(),
        ids_before,
        "{namespace}: same members"
    );
    assert!(
        etcdctl_tls(
            cluster,
            &tls.service(),
            d,
            Some("ca"),
            Some("oldclient"),
            &[&root, "get", "sentinel"]
        )
        .is_err(),
        "{namespace}: a client certificate of the old CA is refused"
    );
    let value = tls
        .etcdctl(
            &tls.service(),
            &[&root, "get", "sentinel", "--print-value-only"],
        )
        .unwrap();
    assert_eq!(value.trim(), "present", "{namespace}: data kept");
}

/// The serial of the certificate `endpoint` (host:port) serves, asked with openssl from inside
/// the cluster network (with `dir`'s client.crt, client.key and ca.crt).
fn served_serial(cluster: &Cluster, host_port: &str, dir: &Path) -> Result<String, String> {
    served_serial_with(cluster, host_port, dir, "client", "ca")
}

/// [`served_serial`] presenting `client`.crt/.key and trusting `ca`.crt.
fn served_serial_with(
    cluster: &Cluster,
    host_port: &str,
    dir: &Path,
    client: &str,
    ca: &str,
) -> Result<String, String> {
    let mut command = cluster.network.command("sh").map_err(|e| e.to_string())?;
    command.args([
        "-c",
        "openssl s_client -connect \"$0\" -cert \"$1/$2.crt\" -key \"$1/$2.key\" -CAfile \"$1/$3.crt\" </dev/null 2>/dev/null | openssl x509 -noout -serial",
        host_port,
    ]);
    command.arg(dir).arg(client).arg(ca);
    let out = tokio::task::block_in_place(|| command.output()).map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if out.status.success() && text.starts_with("serial=") {
        Ok(text)
    } else {
        Err(format!("{text} {}", String::from_utf8_lossy(&out.stderr)))
    }
}

fn file_serial(dir: &Path, name: &str) -> String {
    let out = Command::new("openssl")
        .args(["x509", "-noout", "-serial", "-in"])
        .arg(dir.join(format!("{name}.crt")))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Leaf renewal: the server Secret gets a new certificate from the same CA; the kubelet updates
/// the mounted files, and etcd serves the new certificate from its next handshake on, with no
/// Pod restarted and the clients (the operator among them) working throughout.
async fn renew_server_leaf(tls: &TlsCluster) {
    let (cluster, namespace, d) = (&tls.cluster, tls.namespace, tls.dir.path());
    let before = tls.pods().await;
    let old = file_serial(d, "server");
    tokio::task::block_in_place(|| {
        make_leaf(
            d,
            "ca",
            "server2",
            "etcd",
            Some(&member_sans(namespace)),
            "serverAuth,clientAuth",
        )
    });
    let new = file_serial(d, "server2");
    assert_ne!(old, new);
    let host = format!("etcd-0.etcd.{namespace}.svc:2379");
    assert_eq!(
        served_serial(cluster, &host, d).as_deref(),
        Ok(old.as_str())
    );
    // kubectl apply of the Secret with the renewed leaf (same name, same CA).
    apply_tls_secret(cluster, namespace, "etcd-server", d, "server2", "ca");
    eventually(
        &format!("{namespace}: etcd-0 serves the renewed certificate"),
        LIMIT,
        || async {
            let serial = served_serial(cluster, &host, d)?;
            (serial == new)
                .then_some(())
                .ok_or(format!("still {serial}"))
        },
    )
    .await;
    let put = tls
        .etcdctl(&tls.service(), &["put", "after-renewal", "yes"])
        .unwrap();
    assert!(put.contains("OK"), "{put}");
    tls.wait_converged(3).await;
    assert_eq!(
        tls.pods().await,
        before,
        "{namespace}: no Pod restarted or replaced for a renewed leaf"
    );
    println!("{namespace}: renewed server leaf served without a restart");
}

/// An operator-issued cluster: both listeners `operatorIssued`, mutual TLS, auth on, leaves of
/// three minutes renewed after 70 s (1m50s before they end).
fn issued_cluster_yaml(namespace: &str, replicas: i32, version: &str) -> String {
    format!(
        "apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdCluster\nmetadata:\n  name: etcd\n  namespace: {namespace}\nspec:\n  replicas: {replicas}\n  version: \"{version}\"\n  tls:\n    client:\n      operatorIssued:\n        certificateDuration: 3m\n        renewBefore: 1m50s\n    peer:\n      operatorIssued:\n        certificateDuration: 3m\n        renewBefore: 1m50s\n  auth:\n    enabled: true\n    rootCredentialsSecretRef:\n      name: etcd-root\n"
    )
}

/// `openssl x509 -noout <args>` of a PEM certificate.
fn x509(pem: &[u8], args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cert.pem");
    std::fs::write(&path, pem).unwrap();
    let out = Command::new("openssl")
        .args(["x509", "-noout", "-in"])
        .arg(&path)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Operator-issued certificates (the extension): the operator makes the cluster's CA and one
/// certificate per member (owned by its EtcdMember) and its own; checked with openssl, not
/// with the code under test. Bootstrap 3 with mutual TLS on both ports and auth, plaintext and
/// a foreign certificate refused, scale 3 → 5 → 3 (new members get their own certificates, the
/// removed members' go with them), a member's Pod lost and healed, and short-lived leaves
/// renewed again and again without a Pod restart while a TLS client with credentials writes
/// throughout, past the first leaves' expiry, losing nothing.
async fn issued_lifecycle(cluster: Arc<Cluster>, namespace: &'static str, version: &'static str) {
    create_namespace(&cluster.client(), namespace).await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    tokio::task::block_in_place(|| {
        create_root_secret(&cluster, namespace, "etcd-root", ROOT_PASSWORD)
    });
    tokio::task::block_in_place(|| cluster.apply(&issued_cluster_yaml(namespace, 3, version)));
    let ca = {
        let mut found = None;
        eventually(&format!("{namespace}: the CA Secret"), LIMIT, || {
            let got = secret_data(&cluster, namespace, "etcd-ca");
            let ok = got.is_some();
            found = got;
            async move { ok.then_some(()).ok_or("no Secret etcd-ca".to_string()) }
        })
        .await;
        found.unwrap()
    };
    let (ca_object, ca_data) = ca;
    assert_eq!(ca_object["type"], "kubernetes.io/tls");
    assert_eq!(
        ca_object["metadata"]["ownerReferences"][0]["kind"], "EtcdCluster",
        "the CA goes with the cluster"
    );
    let ca_text = x509(&ca_data["tls.crt"], &["-text"]);
    assert!(
        ca_text.contains("CA:TRUE") && ca_text.contains("prime256v1"),
        "{namespace}: an ECDSA P-256 CA: {ca_text}"
    );
    // The test's own client certificate (CN root), signed with openssl by the cluster's CA,
    // and a stranger from another CA.
    std::fs::write(d.join("ca.crt"), &ca_data["tls.crt"]).unwrap();
    std::fs::write(d.join("ca.key"), &ca_data["tls.key"]).unwrap();
    make_leaf(d, "ca", "client", "root", None, "clientAuth");
    make_ca(d, "other-ca");
    make_leaf(d, "other-ca", "stranger", "root", None, "clientAuth");
    let tls = TlsCluster {
        cluster: cluster.clone(),
        namespace,
        dir,
        user: None,
    };
    let d = tls.dir.path();
    tls.wait_converged(3).await;

    // Each member has its own certificate, owned by its EtcdMember, valid for its own name
    // only (and the client Service), chaining to the CA; etcd serves it.
    let check_member_secrets = |names: &'static [&'static str]| {
        let (cluster, tls) = (cluster.clone(), &tls);
        async move {
            let recorded = members(&cluster.client(), namespace, "etcd").await;
            for m in names {
                let (object, data) = secret_data(&cluster, namespace, &format!("{m}-tls"))
                    .unwrap_or_else(|| panic!("{namespace}: Secret {m}-tls"));
                let owner = &object["metadata"]["ownerReferences"][0];
                let uid = recorded
                    .iter()
                    .find(|r| r.metadata.name.as_deref() == Some(m))
                    .and_then(|r| r.metadata.uid.clone());
                assert_eq!(owner["kind"], "EtcdMember", "{m}");
                assert_eq!(
                    owner["uid"].as_str(),
                    uid.as_deref(),
                    "{m}: owned by its member"
                );
                let sans = x509(&data["tls.crt"], &["-ext", "subjectAltName"]);
                assert!(
                    sans.contains(&format!("DNS:{m}.etcd.{namespace}.svc,"))
                        && sans.contains(&format!("DNS:etcd-client.{namespace}.svc"))
                        && !sans.contains('*'),
                    "{m}: {sans}"
                );
                let other = if *m == "etcd-0" { "etcd-1" } else { "etcd-0" };
                assert!(!sans.contains(&format!("DNS:{other}.")), "{m}: {sans}");
                let leaf = tls.dir.path().join(format!("{m}-leaf.crt"));
                std::fs::write(&leaf, &data["tls.crt"]).unwrap();
                let verify = Command::new("openssl")
                    .arg("verify")
                    .arg("-CAfile")
                    .arg(tls.dir.path().join("ca.crt"))
                    .arg(&leaf)
                    .output()
                    .unwrap();
                assert!(
                    verify.status.success(),
                    "{m}: {}",
                    String::from_utf8_lossy(&verify.stdout)
                );
            }
        }
    };
    check_member_secrets(&["etcd-0", "etcd-1", "etcd-2"]).await;

    eventually(
        &format!("{namespace}: authentication enabled"),
        LIMIT,
        || async {
            let c = get_cluster(&cluster.client(), namespace, "etcd").await;
            (c.status.and_then(|s| s.auth_enabled) == Some(true))
                .then_some(())
                .ok_or_else(|| "status.authEnabled not yet true".to_string())
        },
    )
    .await;
    let put = tls
        .etcdctl(&tls.service(), &["put", "sentinel", "present"])
        .unwrap();
    assert!(put.contains("OK"), "{put}");
    tls.assert_refusals("stranger");
    // A changed root password is applied with operator-issued certificates too.
    let issued_password = format!("{ROOT_PASSWORD}-issued");
    change_root_password(
        &tls,
        ROOT_PASSWORD,
        &issued_password,
        PasswordPatch::StringData,
    )
    .await;

    // The client workload (TLS, the test's certificate, root's password) from here to the end.
    let secure = support::workload::Secure {
        ca_pem: std::fs::read(d.join("ca.crt")).unwrap(),
        identity: Some((
            std::fs::read(d.join("client.crt")).unwrap(),
            std::fs::read(d.join("client.key")).unwrap(),
        )),
        credentials: Some(("root".to_string(), issued_password.clone())),
    };
    let shared = Arc::new(std::sync::Mutex::new(secure));
    let workload = support::workload::Workload::start_shared(
        cluster.network.clone(),
        namespace,
        "etcd",
        "issued",
        Some(shared.clone()),
    );
    let first_serial = served_serial(&cluster, &format!("etcd-0.etcd.{namespace}.svc:2379"), d)
        .expect("etcd-0 serves its certificate");
    let first_expiry = x509(
        &secret_data(&cluster, namespace, "etcd-0-tls").unwrap().1["tls.crt"],
        &["-enddate"],
    );

    tls.scale(5);
    tls.wait_converged(5).await;
    check_member_secrets(&["etcd-3", "etcd-4"]).await;
    tls.scale(3);
    tls.wait_converged(3).await;
    for m in ["etcd-3", "etcd-4"] {
        eventually(
            &format!("{namespace}: Secret {m}-tls goes with its member"),
            LIMIT,
            || async {
                secret_data(&cluster, namespace, &format!("{m}-tls"))
                    .is_none()
                    .then_some(())
                    .ok_or("still there".to_string())
            },
        )
        .await;
    }
    tls.lose_and_heal("etcd-1").await;

    // Renewals: the leaves are renewed every 70 s. From here, no Pod restarts;
    // etcd-0 serves a newer certificate than at the start, and the cluster runs past the
    // first certificates' end.
    let before = tls.pods().await;
    let not_after = |text: &str| {
        let date = text.trim().trim_start_matches("notAfter=").to_string();
        let out = Command::new("date")
            .args(["-u", "-d", &date, "+%s"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse::<u64>()
            .unwrap()
    };
    let first_end = not_after(&first_expiry);
    eventually(
        &format!("{namespace}: past the first certificates' end, served renewed"),
        Duration::from_secs(420),
        || async {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs();
            let serial = served_serial(&cluster, &format!("etcd-0.etcd.{namespace}.svc:2379"), d)?;
            if serial == first_serial {
                return Err(format!("etcd-0 still serves {serial}"));
            }
            (now > first_end + 10).then_some(()).ok_or(format!(
                "{} s until the first leaves end",
                first_end + 10 - now.min(first_end + 10)
            ))
        },
    )
    .await;
    tls.wait_converged(3).await;
    let after = tls.pods().await;
    if after != before {
        // What ended the containers: their last state and the end of their previous run.
        let mut why = String::new();
        for m in ["etcd-0", "etcd-1", "etcd-2"] {
            let pod = cluster.member_pod(namespace, m).await;
            let last = pod
                .and_then(|p| p.status)
                .and_then(|s| s.container_statuses)
                .map(|c| format!("{:?}", c.iter().map(|c| &c.last_state).collect::<Vec<_>>()));
            let (_, log, _) = tokio::task::block_in_place(|| {
                kubectl(
                    &cluster,
                    &["-n", namespace, "logs", m, "--previous", "--tail=25"],
                )
            });
            why.push_str(&format!("--- {m}: {last:?}\n{log}\n"));
        }
        let events = cluster.events(namespace).await;
        panic!(
            "{namespace}: Pods restarted or replaced through the renewals: before {before:?}, after {after:?}\n{why}\nevents: {events:#?}"
        );
    }
    let events = cluster.events(namespace).await;
    let renewals = events
        .iter()
        .filter(|(reason, m)| reason == "CertificateIssued" && m.contains("renewal due"))
        .count();
    assert!(renewals >= 3, "{namespace}: renewals recorded: {events:?}");
    let c = get_cluster(&cluster.client(), namespace, "etcd").await;
    assert_eq!(
        condition(&c, "CertificatesValid").as_deref(),
        Some("True"),
        "{namespace}: renewed in time, nothing expiring: {:?}",
        c.status.map(|s| s.conditions)
    );
    let value = tls
        .etcdctl(&tls.service(), &["get", "sentinel", "--print-value-only"])
        .unwrap();
    assert_eq!(value.trim(), "present");
    println!(
        "{namespace}: operator-issued certificates renewed {renewals} times without a restart"
    );

    rotate_issued_ca(&tls, &shared, &ca_data["tls.crt"]).await;
    let report = workload.stop().await;
    println!("{namespace}: {}", report.summary());
    report.assert_no_loss();
}

/// CA rotation on request (the `rotate-ca` annotation) with the workload running: the new CA
/// beside the old, every Pod restarted to trust both (one at a time), the leaves issued again
/// from the new CA, the old CA dropped and the Pods restarted again; the members keep their IDs
/// and data. The workload follows the CA Secret as a client re-reading its files would: it
/// trusts the bundle as soon as it changes, and takes a client certificate from the new CA once
/// the members' certificates come from it. At the end a client certificate of the old CA is
/// refused.
async fn rotate_issued_ca(
    tls: &TlsCluster,
    shared: &support::workload::SharedSecure,
    old_ca: &[u8],
) {
    let (cluster, namespace, d) = (&tls.cluster, tls.namespace, tls.dir.path().to_path_buf());
    let started = std::time::Instant::now();
    let ids_before = tls.etcd_members().expect("etcd answers");
    let uids_before = tls.pod_uids().await;
    kubectl_retrying(
        cluster,
        &[
            "-n",
            namespace,
            "annotate",
            "etcdcluster",
            "etcd",
            "etcd-operator.cozystack.io/rotate-ca=first",
        ],
    );
    // The client side of the rotation, as a user's client would do it.
    let stop = tokio_util::sync::CancellationToken::new();
    let refresher = tokio::spawn(support::certs::follow_ca_secret(
        cluster.clone(),
        namespace,
        shared.clone(),
        d.clone(),
        old_ca.to_vec(),
        stop.clone(),
    ));
    eventually(
        &format!("{namespace}: the CA rotated, the old one dropped, every Pod restarted"),
        Duration::from_secs(600),
        || async {
            let (_, ca) = secret_data(cluster, namespace, "etcd-ca").ok_or("no CA Secret")?;
            if ca["tls.crt"] == old_ca {
                return Err("not started".to_string());
            }
            if ca.contains_key("previous.crt") || ca["ca.crt"] != ca["tls.crt"] {
                return Err("rotation in progress".to_string());
            }
            for m in ["etcd-0", "etcd-1", "etcd-2"] {
                let (_, data) = secret_data(cluster, namespace, &format!("{m}-tls"))
                    .ok_or(format!("no Secret {m}-tls"))?;
                if data["ca.crt"] != ca["tls.crt"]
                    || !verifies(&data["tls.crt"], &ca["tls.crt"], &d)
                {
                    return Err(format!("{m}-tls not yet from the new CA alone"));
                }
            }
            let now = tls.pod_uids().await;
            if now
                .iter()
                .zip(&uids_before)
                .any(|(a, b)| a.is_none() || a == b)
            {
                return Err(format!("Pods not all restarted: {now:?}"));
            }
            let c = get_cluster(&cluster.client(), namespace, "etcd").await;
            (tls.pods_ready().await
                && c.status.as_ref().and_then(|s| s.ready_members) == Some(3)
                && condition(&c, "Available").as_deref() == Some("True"))
            .then_some(())
            .ok_or("not all Ready".to_string())
        },
    )
    .await;
    stop.cancel();
    refresher.await.unwrap();
    println!(
        "{namespace}: CA rotation of 3 members took {:.0} s",
        started.elapsed().as_secs_f64()
    );
    // From here etcdctl uses the new CA and a client certificate from it; one from the old CA
    // is refused.
    for (from, to) in [
        ("client.crt", "oldclient.crt"),
        ("client.key", "oldclient.key"),
        ("newca.crt", "ca.crt"),
        ("client2.crt", "client.crt"),
        ("client2.key", "client.key"),
    ] {
        std::fs::copy(d.join(from), d.join(to)).unwrap();
    }
    tls.wait_converged(3).await;
    assert_eq!(
        tls.etcd_members().unwrap(),
        ids_before,
        "{namespace}: the same members, restarted on their data"
    );
    assert!(
        etcdctl_tls(
            cluster,
            &tls.service(),
            &d,
            Some("ca"),
            Some("oldclient"),
            &["get", "sentinel"]
        )
        .is_err(),
        "{namespace}: a client certificate of the dropped CA is refused"
    );
    let value = tls
        .etcdctl(&tls.service(), &["get", "sentinel", "--print-value-only"])
        .unwrap();
    assert_eq!(
        value.trim(),
        "present",
        "{namespace}: data kept through the rotation"
    );
    let events = cluster.events(namespace).await;
    for said in [
        "a new CA (the rotation starts",
        "the CA alone (the rotation ends",
    ] {
        assert!(
            events
                .iter()
                .any(|(r, m)| r == "CertificateIssued" && m.contains(said)),
            "{namespace}: an Event says {said:?}: {events:?}"
        );
    }
}

/// On the default version (the newest 3.6).
fn cert_manager_cluster_yaml(namespace: &str, replicas: i32) -> String {
    let version = support::DEFAULT_VERSION;
    format!(
        "apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdCluster\nmetadata:\n  name: etcd\n  namespace: {namespace}\nspec:\n  replicas: {replicas}\n  version: \"{version}\"\n  tls:\n    client:\n      certManager:\n        serverIssuerRef:\n          name: ca\n        operatorClientIssuerRef:\n          name: ca\n    peer:\n      certManager:\n        issuerRef:\n          name: ca\n"
    )
}

/// A Certificate in `namespace` as JSON, if it exists.
fn certificate_json(cluster: &Cluster, namespace: &str, name: &str) -> Option<serde_json::Value> {
    let (ok, out, _) = tokio::task::block_in_place(|| {
        kubectl(
            cluster,
            &["-n", namespace, "get", "certificate", name, "-o", "json"],
        )
    });
    ok.then(|| serde_json::from_str(&out).ok()).flatten()
}

/// Certificates from cert-manager (the sandbox's stand-in): an Issuer missing is reported and
/// nothing starts; once the CA Issuer exists the operator's Certificates are issued, the
/// cluster bootstraps on them with mutual TLS on both ports, and scales 3 → 5 → 3; a
/// Certificate edited by hand is patched back.
async fn cert_manager_lifecycle(cluster: Arc<Cluster>) {
    let namespace = "tls-cm";
    create_namespace(&cluster.client(), namespace).await;
    // With authentication too: the operator's client certificate names no etcd user, so every
    // call of the test's etcdctl and workload carries root's password.
    tokio::task::block_in_place(|| {
        create_root_secret(&cluster, namespace, "etcd-root", ROOT_PASSWORD);
        cluster.apply(
            &(cert_manager_cluster_yaml(namespace, 3)
                + "  auth:\n    enabled: true\n    rootCredentialsSecretRef:\n      name: etcd-root\n"),
        )
    });
    eventually("the missing Issuer reported", LIMIT, || async {
        let (reason, message) = progressing(&cluster.client(), namespace, "etcd").await;
        (reason == "InvalidSecret" && message.contains("Issuer ca not found in namespace tls-cm"))
            .then_some(())
            .ok_or(format!("{reason}: {message}"))
    })
    .await;
    for name in ["etcd-server", "etcd-operator-client", "etcd-peer"] {
        let certificate = certificate_json(&cluster, namespace, name)
            .unwrap_or_else(|| panic!("the operator created Certificate {name}"));
        let owner = &certificate["metadata"]["ownerReferences"][0];
        assert_eq!(
            owner["kind"], "EtcdCluster",
            "{name} is owned by the cluster"
        );
        assert_eq!(certificate["spec"]["secretName"], format!("{name}-tls"));
    }
    assert!(
        cluster.member_pod(namespace, "etcd-0").await.is_none(),
        "no Pod starts without certificates"
    );

    // The usual cert-manager chain: a self-signed ClusterIssuer makes a CA, an Issuer signs with it.
    let chain = format!(
        "apiVersion: cert-manager.io/v1\nkind: ClusterIssuer\nmetadata:\n  name: tls-cm-selfsigned\nspec:\n  selfSigned: {{}}\n---\napiVersion: cert-manager.io/v1\nkind: Certificate\nmetadata:\n  name: tls-cm-ca\n  namespace: {namespace}\nspec:\n  isCA: true\n  commonName: tls-cm-ca\n  secretName: tls-cm-ca\n  issuerRef:\n    name: tls-cm-selfsigned\n    kind: ClusterIssuer\n---\napiVersion: cert-manager.io/v1\nkind: Issuer\nmetadata:\n  name: ca\n  namespace: {namespace}\nspec:\n  ca:\n    secretName: tls-cm-ca\n"
    );
    tokio::task::block_in_place(|| cluster.apply(&chain));

    // etcdctl's material from the operator client's Secret, as issued.
    let dir = tempfile::tempdir().unwrap();
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(cluster.client(), namespace);
    let secret = eventually("the operator client Secret issued", LIMIT, || async {
        secrets
            .get_opt("etcd-operator-client-tls")
            .await
            .ok()
            .flatten()
            .ok_or("not yet".to_string())
    })
    .await;
    let data = secret.data.unwrap_or_default();
    for (key, file) in [
        ("ca.crt", "ca.crt"),
        ("tls.crt", "client.crt"),
        ("tls.key", "client.key"),
    ] {
        std::fs::write(dir.path().join(file), &data[key].0).unwrap();
    }
    let mut tls = TlsCluster {
        cluster: cluster.clone(),
        namespace,
        dir,
        user: Some(format!("root:{ROOT_PASSWORD}")),
    };
    tls.wait_converged(3).await;
    // A changed root password is applied with cert-manager's certificates too.
    let cm_password = format!("{ROOT_PASSWORD}-cm");
    change_root_password(&tls, ROOT_PASSWORD, &cm_password, PasswordPatch::StringData).await;
    tls.user = Some(format!("root:{cm_password}"));
    tls.etcdctl(&tls.service(), &["put", "cm-key", "kept"])
        .unwrap();
    // Plaintext is refused: the client port serves TLS only.
    let plain = etcdctl_tls(
        &cluster,
        &format!("http://etcd-client.{namespace}.svc:2379"),
        tls.dir.path(),
        None,
        None,
        &["get", "cm-key"],
    );
    assert!(plain.is_err(), "plaintext refused: {plain:?}");

    // A hand edit of a Certificate's names is patched back.
    tokio::task::block_in_place(|| {
        kubectl_retrying_blocking(
            &cluster,
            &[
                "-n",
                namespace,
                "patch",
                "certificate",
                "etcd-server",
                "--type",
                "merge",
                "-p",
                r#"{"spec":{"dnsNames":["only.example"]}}"#,
            ],
        )
    });
    eventually("the hand edit patched back", LIMIT, || async {
        let spec = certificate_json(&cluster, namespace, "etcd-server")
            .map(|c| c["spec"]["dnsNames"].clone())
            .unwrap_or_default();
        spec.as_array()
            .is_some_and(|names| {
                names
                    .iter()
                    .any(|n| n == &format!("*.etcd.{namespace}.svc"))
            })
            .then_some(())
            .ok_or(format!("dnsNames {spec}"))
    })
    .await;

    tls.scale(5);
    tls.wait_converged(5).await;
    tls.scale(3);
    tls.wait_converged(3).await;
    let got = tls
        .etcdctl(&tls.service(), &["get", "cm-key", "--print-value-only"])
        .unwrap();
    assert_eq!(got.trim(), "kept");
    // Plaintext, no certificate and a certificate from another CA are refused.
    make_ca(tls.dir.path(), "other-ca");
    make_leaf(
        tls.dir.path(),
        "other-ca",
        "stranger",
        "root",
        None,
        "clientAuth",
    );
    tls.assert_refusals("stranger");
    // A member's Pod lost and healed on its data, the same member.
    let ids = tls.etcd_members().unwrap();
    tls.lose_and_heal("etcd-1").await;
    assert_eq!(
        tls.etcd_members().unwrap(),
        ids,
        "{namespace}: healed as the same member"
    );
    println!(
        "{namespace}: cert-manager certificates: bootstrap 3 with auth, 3 -> 5 -> 3, hand edit undone, a lost Pod healed"
    );
    cert_manager_renewals(&tls).await;
}

/// cert-manager renewals: the three Certificates get a lifetime of 80 s, renewed 50 s before
/// their end (fields the operator leaves alone; the stand-in has no
/// minimum, and its renewals reach the Pods' volumes on the Secret's event); with a TLS client
/// workload running (re-reading the operator client Secret it presents, as a client that reloads
/// its files would), the cluster runs past the first short certificates' end on renewed ones, no
/// Pod restarted, nothing lost.
async fn cert_manager_renewals(tls: &TlsCluster) {
    let (cluster, namespace, d) = (&tls.cluster, tls.namespace, tls.dir.path().to_path_buf());
    for name in ["etcd-server", "etcd-peer", "etcd-operator-client"] {
        kubectl_retrying(
            cluster,
            &[
                "-n",
                namespace,
                "patch",
                "certificate",
                name,
                "--type",
                "merge",
                "-p",
                r#"{"spec":{"duration":"1m20s","renewBefore":"50s"}}"#,
            ],
        );
    }
    let lifetime = |pem: &[u8]| {
        let start = not_after_seconds(&x509(pem, &["-startdate"]).replace("notBefore=", ""));
        let end = not_after_seconds(&x509(pem, &["-enddate"]).replace("notAfter=", ""));
        (start, end)
    };
    let mut first_end = 0;
    eventually(
        &format!("{namespace}: short certificates issued"),
        LIMIT,
        || {
            let got = secret_data(cluster, namespace, "etcd-server-tls");
            let (start, end) = got
                .as_ref()
                .map(|(_, data)| lifetime(&data["tls.crt"]))
                .unwrap_or((0, u64::MAX));
            first_end = end;
            async move {
                (end - start <= 300)
                    .then_some(())
                    .ok_or(format!("still {} s", end.saturating_sub(start)))
            }
        },
    )
    .await;
    let refresh = |shared: &support::workload::SharedSecure| {
        if let Some((_, data)) = secret_data(cluster, namespace, "etcd-operator-client-tls") {
            std::fs::write(d.join("client.crt"), &data["tls.crt"]).unwrap();
            std::fs::write(d.join("client.key"), &data["tls.key"]).unwrap();
            shared.lock().unwrap().identity =
                Some((data["tls.crt"].clone(), data["tls.key"].clone()));
        }
    };
    let shared = Arc::new(std::sync::Mutex::new(support::workload::Secure {
        ca_pem: std::fs::read(d.join("ca.crt")).unwrap(),
        identity: None,
        credentials: tls
            .user
            .as_ref()
            .and_then(|u| u.split_once(':'))
            .map(|(u, p)| (u.to_string(), p.to_string())),
    }));
    refresh(&shared);
    let workload = support::workload::Workload::start_shared(
        cluster.network.clone(),
        namespace,
        "etcd",
        "cm-renewals",
        Some(shared.clone()),
    );
    let host = format!("etcd-0.etcd.{namespace}.svc:2379");
    let first_serial = served_serial(cluster, &host, &d).expect("etcd-0 serves");
    let before = tls.pods().await;
    eventually(
        &format!("{namespace}: past the first short certificates' end, served renewed"),
        Duration::from_secs(420),
        || async {
            refresh(&shared);
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs();
            let serial = served_serial(cluster, &host, &d)?;
            if serial == first_serial {
                return Err(format!("etcd-0 still serves {serial}"));
            }
            (now > first_end + 10)
                .then_some(())
                .ok_or(format!("{} s to go", (first_end + 10).saturating_sub(now)))
        },
    )
    .await;
    tls.wait_converged(3).await;
    let report = workload.stop().await;
    println!("{namespace}: {}", report.summary());
    report.assert_no_loss();
    assert_eq!(
        tls.pods().await,
        before,
        "{namespace}: no Pod restarted for cert-manager's renewals"
    );
    let got = tls
        .etcdctl(&tls.service(), &["get", "cm-key", "--print-value-only"])
        .unwrap();
    assert_eq!(got.trim(), "kept");
    println!(
        "{namespace}: cert-manager renewals served past the first certificates' end without a restart"
    );
}

/// Seconds since the epoch of an openssl date (`Dec  2 03:04:05 2026 GMT`).
fn not_after_seconds(date: &str) -> u64 {
    let out = Command::new("date")
        .args(["-u", "-d", date.trim(), "+%s"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("a date: {date:?}"))
}

/// `GET /metrics` of an operator Pod, through the cluster network.
async fn operator_metrics(
    cluster: &Cluster,
    pod: &k8s_openapi::api::core::v1::Pod,
) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let ip = pod.status.as_ref()?.pod_ip.clone()?;
    let mut stream = cluster.network.connect_host(&ip, 8080).await.ok()?;
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: operator\r\n\r\n")
        .await
        .ok()?;
    let mut response = String::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_string(&mut response))
        .await
        .ok()?
        .ok()?;
    Some(response)
}

/// Each bad Secret is reported by name with its problem while no Pod starts; fixed, the
/// cluster bootstraps by itself.
async fn bad_secrets(cluster: Arc<Cluster>) {
    let namespace = "tls-bad";
    create_namespace(&cluster.client(), namespace).await;
    let dir = certificates(namespace);
    let d = dir.path();
    tokio::task::block_in_place(|| cluster.apply(&tls_cluster_yaml(namespace, 1, "3.5.1")));
    let expect = |needle: String| {
        let cluster = cluster.clone();
        async move {
            eventually(&format!("the status says {needle:?}"), LIMIT, || async {
                let (reason, message) = progressing(&cluster.client(), namespace, "etcd").await;
                (reason == "InvalidSecret" && message.contains(&needle))
                    .then_some(())
                    .ok_or(format!("{reason}: {message}"))
            })
            .await;
            let pods = cluster.member_pod(namespace, "etcd-0").await;
            assert!(
                pods.is_none(),
                "no Pod on a broken configuration ({needle})"
            );
        }
    };
    expect("Secret etcd-server (client-API server certificate) not found".into()).await;

    // Each step (re)places the Secrets it names, then the status must say its sentence.
    let tls_type = "kubernetes.io/tls";
    let mismatched = vec![
        ("tls.crt", d.join("server.crt")),
        ("tls.key", d.join("peer.key")),
        ("ca.crt", d.join("ca.crt")),
    ];
    type Secrets = Vec<(&'static str, &'static str, Vec<(&'static str, PathBuf)>)>;
    let steps: Vec<(Secrets, &str)> = vec![
        (
            vec![("etcd-server", "Opaque", tls_files(d, "server", "ca"))],
            "Secret etcd-server (client-API server certificate) has type Opaque",
        ),
        (
            vec![("etcd-server", tls_type, mismatched)],
            "tls.key does not belong to the certificate in tls.crt",
        ),
        (
            vec![("etcd-server", tls_type, tls_files(d, "server", "other-ca"))],
            "not signed by the CA",
        ),
        (
            vec![
                ("etcd-server", tls_type, tls_files(d, "narrow", "ca")),
                ("etcd-peer", tls_type, tls_files(d, "peer", "ca")),
                (
                    "etcd-operator-client",
                    tls_type,
                    tls_files(d, "stranger", "ca"),
                ),
            ],
            "is not valid for etcd-0.etcd.tls-bad.svc (its names: etcd-9.etcd.tls-bad.svc)",
        ),
        // With the server's CA usable, the operator's certificate is checked against it.
        (
            vec![("etcd-server", tls_type, tls_files(d, "server", "ca"))],
            "Secret etcd-operator-client (operator client certificate): the certificate is not signed by the CA",
        ),
    ];
    for (secrets, needle) in steps {
        for (name, kind, files) in &secrets {
            replace_secret(&cluster, namespace, name, kind, files);
        }
        expect(needle.into()).await;
    }
    replace_secret(
        &cluster,
        namespace,
        "etcd-operator-client",
        tls_type,
        &tls_files(d, "client", "ca"),
    );
    let tls = TlsCluster {
        cluster: cluster.clone(),
        namespace,
        dir,
        user: None,
    };
    tls.wait_converged(1).await;
    let events = cluster.events(namespace).await;
    assert!(
        events
            .iter()
            .any(|(reason, m)| reason == "InvalidSecret" && m.contains("not found")),
        "a Warning Event named the problem: {events:?}"
    );
}

/// The sandbox and the operator for one half of this file's scenarios. The scenarios are split
/// over two tests (two sandboxes, run side by side by nextest) so that neither runs near the
/// suite's 10-minute limit on a loaded 2-core machine (all five in one took 420 s alone).
async fn sandbox() -> Arc<Cluster> {
    let cluster = Arc::new(start_healing_cluster_with_cert_manager(3).await);
    cluster
        .deploy_operator_with(&OperatorDeployment::repairing())
        .await;
    cluster
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn e2e_tls_from_user_secrets() {
    let started = std::time::Instant::now();
    let cluster = sandbox().await;
    let v35 = tokio::spawn(lifecycle(cluster.clone(), "tls-35", "3.5.1"));
    let v34 = tokio::spawn(lifecycle(cluster.clone(), "tls-34", "3.4.23"));
    let bad = tokio::spawn(bad_secrets(cluster.clone()));
    v35.await.unwrap();
    v34.await.unwrap();
    bad.await.unwrap();
    println!(
        "tls, user Secrets: {:.0} s in all",
        started.elapsed().as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn e2e_tls_from_cert_manager_and_operator_issued() {
    let started = std::time::Instant::now();
    let cluster = sandbox().await;
    let cm = tokio::spawn(cert_manager_lifecycle(cluster.clone()));
    let issued = tokio::spawn(issued_lifecycle(
        cluster.clone(),
        "tls-issued",
        support::NEWEST_37,
    ));
    cm.await.unwrap();
    issued.await.unwrap();
    println!(
        "tls, cert-manager and operator-issued: {:.0} s in all",
        started.elapsed().as_secs_f64()
    );
}
