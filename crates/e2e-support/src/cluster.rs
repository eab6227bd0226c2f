//! A whole sandbox cluster with nodes that run Pods as processes (root only), the project's
//! CRDs, and the operator deployed the way users deploy it: `kubectl apply` of the files in
//! `deploy/`, its image mapped to the `etcd-operator` binary just built, running in a Pod with
//! in-cluster configuration under the RBAC of `deploy/rbac/`.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Client};
use kube_sandbox::controllers::TimeScale;
use kube_sandbox::kubelet::Kubelet;
use kube_sandbox::network::ClusterNetwork;
use kube_sandbox::runtime::ImageMap;
use kube_sandbox::{Sandbox, SandboxOptions};
use serde_json::json;

use super::{TestSandbox, eventually_explained, kubectl, repo_root};

/// The operator's image, as `deploy/operator/deployment.yaml` names it.
pub const OPERATOR_IMAGE: &str = "ghcr.io/etcd-operator-rs/etcd-operator";
/// The namespace the operator is deployed into.
pub const OPERATOR_NAMESPACE: &str = "etcd-operator-system";
/// etcdctl of the suite's default version (3.6.17), run inside the cluster network; it
/// speaks etcd's v3 API to every supported minor (3.4 to 3.7).
pub const ETCDCTL: &str = "/usr/local/lib/etcd-3.6.17/etcdctl";

/// The operator's image mapped to `operator_binary` (the one this build made); the sandbox puts
/// its built-in etcd mappings after it.
pub fn operator_image(operator_binary: &Path) -> ImageMap {
    let yaml = format!(
        "images:\n  - image: \"{OPERATOR_IMAGE}:*\"\n    entrypoint: [/usr/local/bin/etcd-operator]\n    files:\n      /usr/local/bin/etcd-operator: {}\n",
        operator_binary.display()
    );
    ImageMap::from_yaml(&yaml, Path::new("/")).expect("the operator's image map")
}

/// A copy of the operator binary this build made, in `dir`: the shared `target/debug/
/// etcd-operator` is replaced whenever another cargo command builds the package (without the
/// tests' `failpoints` feature), and an operator restarted mid-test would run that one.
fn private_operator_binary(dir: &Path) -> std::path::PathBuf {
    let copy = dir.join("etcd-operator");
    std::fs::copy(super::operator_binary(), &copy).expect("copying the etcd-operator binary");
    copy
}

/// A running cluster. Dropping it stops everything (the sandbox stops its node agents first).
pub struct Cluster {
    /// The node agents: faults (kill, freeze, node crash and shutdown, claims, partitions).
    pub kubelet: KubeletHandle,
    /// The cluster network: connections and lookups inside it.
    pub network: Arc<ClusterNetwork>,
    pub sandbox: TestSandbox,
}

impl std::ops::Deref for Cluster {
    type Target = TestSandbox;
    fn deref(&self) -> &TestSandbox {
        &self.sandbox
    }
}

/// The sandbox's node agents, reached through the sandbox that owns them.
pub struct KubeletHandle(Arc<Sandbox>);

impl std::ops::Deref for KubeletHandle {
    type Target = Kubelet;
    fn deref(&self) -> &Kubelet {
        self.0.kubelet().expect("a sandbox with nodes")
    }
}

/// Starts a cluster of `nodes` nodes (`Sandbox` with nodes, real time) with the CRDs applied
/// from `deploy/crds/`.
pub async fn start_cluster(nodes: usize) -> Cluster {
    start_cluster_scaled(nodes, TimeScale::REAL).await
}

/// [`start_cluster`] with the node agents and node lifecycle on `time_scale` (restart backoff,
/// heartbeats, eviction; probe and grace periods keep their length).
pub async fn start_cluster_scaled(nodes: usize, time_scale: TimeScale) -> Cluster {
    start_cluster_with(nodes, time_scale, false).await
}

/// A sandbox of `nodes` nodes at `time_scale`, with the cert-manager stand-in if asked.
pub async fn start_cluster_with(
    nodes: usize,
    time_scale: TimeScale,
    cert_manager: bool,
) -> Cluster {
    let dir = tempfile::tempdir().expect("temporary directory");
    let operator_binary = private_operator_binary(dir.path());
    let images = operator_image(&operator_binary);
    start_cluster_in(dir, nodes, time_scale, cert_manager, images).await
}

/// A sandbox of `nodes` nodes at real time whose etcd Pods get `env` beside what the operator
/// gives them (e.g. `ETCD_HEARTBEAT_INTERVAL` for the scale benchmark), the operator's image as
/// [`start_cluster`] maps it. Every etcd version with binaries of its own (the sandbox's image
/// map) gets the env; other patches of a minor fall through to the sandbox's map without it.
pub async fn start_cluster_with_etcd_env(nodes: usize, env: &[(&str, String)]) -> Cluster {
    let dir = tempfile::tempdir().expect("temporary directory");
    let operator_binary = private_operator_binary(dir.path());
    let env: String = env
        .iter()
        .map(|(k, v)| format!("      {k}: \"{v}\"\n"))
        .collect();
    let mut etcd = String::from("images:\n");
    for version in ["3.5.1", "3.5.36", "3.6.17", "3.7.4"] {
        let escaped = version.replace('.', "\\.");
        let lib = super::etcd_binaries(version);
        etcd.push_str(&format!(
            "  - imageRegex: '^(.+/)?etcd:v?{escaped}(-\\d+)?$'\n    entrypoint: [/usr/local/bin/etcd]\n    files:\n      /usr/local/bin/etcd: {lib}/etcd\n      /usr/local/bin/etcdctl: {lib}/etcdctl\n      /usr/local/bin/etcdutl: {lib}/etcdutl\n    env:\n{env}"
        ));
    }
    let etcd = ImageMap::from_yaml(&etcd, Path::new("/")).expect("the etcd image map");
    let images = operator_image(&operator_binary).then(etcd);
    start_cluster_in(dir, nodes, TimeScale::REAL, false, images).await
}

/// A sandbox of `nodes` nodes at real time whose etcd Pods, every version, run `sim` (the
/// etcd simulator, `crates/etcd-sim`) in place of etcd, as fronts of the hub at `hub`
/// (`ETCD_SIM_HUB`): issue 29's 1,000 3-member clusters, which 3,000 real etcd processes do not
/// fit one machine for. The operator's image as [`start_cluster`] maps it.
pub async fn start_cluster_with_etcd_sim(nodes: usize, sim: &Path, hub: &str) -> Cluster {
    let dir = tempfile::tempdir().expect("temporary directory");
    let operator_binary = private_operator_binary(dir.path());
    let etcd = format!(
        "images:\n  - imageRegex: '^(.+/)?etcd:.+$'\n    entrypoint: [/usr/local/bin/etcd]\n    files:\n      /usr/local/bin/etcd: {}\n    env:\n      ETCD_SIM_HUB: \"{hub}\"\n",
        sim.display()
    );
    let etcd = ImageMap::from_yaml(&etcd, Path::new("/")).expect("the etcd-sim image map");
    let images = operator_image(&operator_binary).then(etcd);
    start_cluster_in(dir, nodes, TimeScale::REAL, false, images).await
}

/// A sandbox of `nodes` nodes at real time whose images are `images` (then the sandbox's
/// built-in etcd mappings), e.g. the operator's image from an unpacked OCI image.
pub async fn start_cluster_with_images(nodes: usize, images: ImageMap) -> Cluster {
    let dir = tempfile::tempdir().expect("temporary directory");
    start_cluster_in(dir, nodes, TimeScale::REAL, false, images).await
}

async fn start_cluster_in(
    dir: tempfile::TempDir,
    nodes: usize,
    time_scale: TimeScale,
    cert_manager: bool,
    images: ImageMap,
) -> Cluster {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut options = SandboxOptions::cluster(dir.path())
        .nodes(nodes)
        .time_scale(time_scale)
        .images(images)
        .control_plane(super::control_plane());
    if cert_manager {
        options = options.cert_manager();
    }
    let sandbox = Arc::new(
        Sandbox::start(options)
            .await
            .expect("the sandbox starts (the end-to-end tests run as root)"),
    );
    let network = sandbox.network().expect("a cluster network").clone();
    let cluster = Cluster {
        kubelet: KubeletHandle(sandbox.clone()),
        network,
        sandbox: TestSandbox { sandbox, dir },
    };
    let crds = repo_root().join("deploy/crds");
    let (ok, _, stderr) = kubectl(&cluster, &["apply", "-f", crds.to_str().unwrap()]);
    assert!(ok, "kubectl apply -f deploy/crds: {stderr}");
    cluster
}

impl Cluster {
    pub fn client(&self) -> Client {
        self.sandbox.client()
    }

    /// Deploys the operator from `deploy/` (Namespace, RBAC, Deployment, metrics Service) with
    /// `replicas` replicas and waits until they are Ready (the leader with filled caches).
    pub async fn deploy_operator(&self, replicas: i32) {
        let root = repo_root();
        let namespace = root.join("deploy/operator/namespace.yaml");
        let (ok, _, stderr) = kubectl(self, &["apply", "-f", namespace.to_str().unwrap()]);
        assert!(ok, "kubectl apply of the Namespace: {stderr}");
        for dir in ["deploy/rbac", "deploy/operator"] {
            let path = root.join(dir);
            let (ok, _, stderr) = kubectl(self, &["apply", "-f", path.to_str().unwrap()]);
            assert!(ok, "kubectl apply -f {dir}: {stderr}");
        }
        if replicas != 1 {
            self.scale_operator(replicas).await;
        }
        self.wait_operator_ready(replicas).await;
    }

    pub async fn scale_operator(&self, replicas: i32) {
        Api::<Deployment>::namespaced(self.client(), OPERATOR_NAMESPACE)
            .patch(
                "etcd-operator",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": replicas}})),
            )
            .await
            .expect("scaling the operator");
    }

    /// Waits until `replicas` operator Pods are Ready.
    pub async fn wait_operator_ready(&self, replicas: i32) {
        eventually_explained(
            "the operator Pods to be Ready",
            Duration::from_secs(120),
            || async {
                let pods = self.operator_pods().await;
                let ready = pods.iter().filter(|p| pod_ready(p)).count();
                if ready == replicas as usize {
                    Ok(())
                } else {
                    Err(format!(
                        "{ready}/{replicas} ready: {:?}",
                        pods.iter()
                            .map(|p| (
                                &p.metadata.name,
                                p.status.as_ref().map(|s| (&s.phase, &s.container_statuses))
                            ))
                            .collect::<Vec<_>>(),
                    ))
                }
            },
            || async { format!("logs:\n{}", self.operator_logs().await) },
        )
        .await;
    }

    /// The operator's Pods that are not being deleted.
    pub async fn operator_pods(&self) -> Vec<Pod> {
        Api::<Pod>::namespaced(self.client(), OPERATOR_NAMESPACE)
            .list(&ListParams::default().labels("app.kubernetes.io/name=etcd-operator"))
            .await
            .map(|l| l.items)
            .unwrap_or_default()
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect()
    }

    /// The holder of the leader Lease.
    pub async fn lease_holder(&self) -> Option<String> {
        Api::<Lease>::namespaced(self.client(), OPERATOR_NAMESPACE)
            .get_opt("etcd-operator-leader")
            .await
            .ok()
            .flatten()?
            .spec?
            .holder_identity
            .filter(|h| !h.is_empty())
    }

    /// The last lines of every operator Pod's log, for failure messages.
    pub async fn operator_logs(&self) -> String {
        self.operator_log_tail(30).await
    }

    /// The last `lines` lines of every operator Pod's log, each Pod's under a `--- name ---`
    /// line.
    pub async fn operator_log_tail(&self, lines: i64) -> String {
        let mut text = String::new();
        let api = Api::<Pod>::namespaced(self.client(), OPERATOR_NAMESPACE);
        for pod in self.operator_pods().await {
            let name = pod.metadata.name.unwrap_or_default();
            let params = kube::api::LogParams {
                tail_lines: Some(lines),
                ..Default::default()
            };
            let log = api.logs(&name, &params).await.unwrap_or_default();
            text.push_str(&format!("--- {name} ---\n{log}\n"));
        }
        text
    }

    /// Runs etcdctl inside the cluster network against `endpoints`; stdout, or why it failed.
    pub fn etcdctl(&self, endpoints: &str, args: &[&str]) -> Result<String, String> {
        let output = self
            .network
            .command(ETCDCTL)
            .map_err(|e| e.to_string())?
            .arg(format!("--endpoints={endpoints}"))
            .arg("--command-timeout=5s")
            .args(args)
            .output()
            .map_err(|e| format!("running etcdctl: {e}"))?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&output.stderr).into_owned())
        }
    }

    /// Puts up to `count` values of 64 KiB at `endpoints` from inside the cluster network, one
    /// etcdctl per put (blocking). `key` is a shell word in which `$i` is the put's number
    /// (`k$((i % 5))` overwrites five keys). With `until_refused`, the first refused put ends it
    /// well and `Err` means etcd took all `count`; without, every put must succeed.
    pub fn put_64k_values(
        &self,
        endpoints: &str,
        key: &str,
        count: u32,
        until_refused: bool,
    ) -> Result<(), String> {
        let (on_refusal, at_end) = if until_refused {
            ("exit 0", "exit 1")
        } else {
            ("exit 1", "exit 0")
        };
        let script = format!(
            "V=$(head -c 65536 /dev/zero | tr '\\0' x); for i in $(seq 1 {count}); do {ETCDCTL} --endpoints={endpoints} put {key} \"$V\" >/dev/null || {on_refusal}; done; {at_end}"
        );
        let output = tokio::task::block_in_place(|| {
            self.network
                .command("/bin/sh")
                .map_err(|e| e.to_string())?
                .args(["-c", &script])
                .output()
                .map_err(|e| format!("running the fill script: {e}"))
        })?;
        if output.status.success() {
            Ok(())
        } else if until_refused {
            Err(format!(
                "etcd took all {count} values of 64 KiB without refusing one"
            ))
        } else {
            Err(String::from_utf8_lossy(&output.stderr).into_owned())
        }
    }
}

pub fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The client Service URL of cluster `name` in `namespace`.
pub fn client_endpoint(namespace: &str, name: &str) -> String {
    format!("http://{name}-client.{namespace}.svc:2379")
}

impl Cluster {
    /// `etcdctl put` through the client Service; panics unless acknowledged.
    pub fn put(&self, namespace: &str, name: &str, key: &str, value: &str) {
        let endpoint = client_endpoint(namespace, name);
        let out = self
            .etcdctl(&endpoint, &["put", key, value])
            .unwrap_or_else(|e| panic!("put {key} into {namespace}/{name}: {e}"));
        assert!(out.contains("OK"), "put {key}: {out}");
    }

    /// `etcdctl get` (linearizable) through the client Service: the value, if any.
    pub fn get(&self, namespace: &str, name: &str, key: &str) -> Result<Option<String>, String> {
        let endpoint = client_endpoint(namespace, name);
        let out = self.etcdctl(&endpoint, &["get", key, "--print-value-only"])?;
        let value = out.trim_end_matches('\n');
        Ok((!out.is_empty()).then(|| value.to_string()))
    }

    /// etcd's member list as `(name, hex ID, is_learner)`, sorted by name.
    pub fn etcd_members(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Vec<(String, String, bool)>, String> {
        let endpoint = client_endpoint(namespace, name);
        let out = self.etcdctl(&endpoint, &["member", "list", "-w", "json"])?;
        let list: serde_json::Value =
            serde_json::from_str(&out).map_err(|e| format!("{e}: {out}"))?;
        let mut members: Vec<(String, String, bool)> = list["members"]
            .as_array()
            .ok_or_else(|| format!("no members in {out}"))?
            .iter()
            .map(|m| {
                (
                    m["name"].as_str().unwrap_or_default().to_string(),
                    format!("{:x}", m["ID"].as_u64().unwrap_or_default()),
                    m["isLearner"].as_bool().unwrap_or(false),
                )
            })
            .collect();
        members.sort();
        Ok(members)
    }

    /// etcd's member list and the EtcdMembers agree: same names, same IDs, all voters,
    /// `expected` of them.
    pub async fn membership_agrees(
        &self,
        namespace: &str,
        name: &str,
        expected: usize,
    ) -> Result<(), String> {
        let listed = self.etcd_members(namespace, name)?;
        let recorded: Vec<(String, String, bool)> = super::members(&self.client(), namespace, name)
            .await
            .iter()
            .filter(|m| m.spec.dormant != Some(true))
            .map(|m| {
                let status = m.status.clone().unwrap_or_default();
                // Compared as numbers: an ID the reference operator recorded is zero-padded.
                let id = status.member_id.unwrap_or_default();
                let id = u64::from_str_radix(&id, 16).map_or(id, |n| format!("{n:x}"));
                (
                    m.metadata.name.clone().unwrap_or_default(),
                    id,
                    status.is_voter != Some(true),
                )
            })
            .collect();
        if listed.len() == expected && listed == recorded {
            Ok(())
        } else {
            Err(format!(
                "etcd lists {listed:?}, the EtcdMembers say {recorded:?}"
            ))
        }
    }

    /// Applies an EtcdCluster manifest with kubectl.
    pub fn apply(&self, manifest: &str) {
        let (ok, _, stderr) =
            super::kubectl_with_stdin(self, &["apply", "-f", "-"], Some(manifest));
        assert!(ok, "kubectl apply: {stderr}");
    }

    /// `kubectl scale etcdcluster/NAME --replicas=N`.
    pub fn scale(&self, namespace: &str, name: &str, replicas: i32) {
        let (ok, _, stderr) = kubectl(
            self,
            &[
                "-n",
                namespace,
                "scale",
                &format!("etcdcluster/{name}"),
                &format!("--replicas={replicas}"),
            ],
        );
        assert!(ok, "kubectl scale: {stderr}");
    }

    /// Waits until the cluster has converged on `replicas` Ready members (Available, not
    /// Progressing) and etcd's member list agrees with the EtcdMembers.
    pub async fn wait_converged(
        &self,
        namespace: &str,
        name: &str,
        replicas: i32,
        limit: Duration,
    ) {
        let client = self.client();
        eventually_explained(
            &format!("{namespace}/{name} to converge on {replicas} members"),
            limit,
            || async {
                let cluster = super::get_cluster(&client, namespace, name).await;
                let status = cluster.status.clone().unwrap_or_default();
                let available = super::condition(&cluster, "Available");
                let progressing = super::condition(&cluster, "Progressing");
                let converged = status.ready_members == Some(replicas)
                    && progressing.as_deref() == Some("False")
                    && (replicas == 0 || available.as_deref() == Some("True"));
                if !converged {
                    return Err(format!(
                        "conditions {:?}, ready {:?}",
                        status
                            .conditions
                            .unwrap_or_default()
                            .iter()
                            .map(|c| (&c.type_, &c.status, &c.reason, &c.message))
                            .collect::<Vec<_>>(),
                        status.ready_members,
                    ));
                }
                if replicas == 0 {
                    return Ok(());
                }
                self.membership_agrees(namespace, name, replicas as usize)
                    .await
            },
            || async { format!("operator logs:\n{}", self.operator_logs().await) },
        )
        .await;
    }
}
