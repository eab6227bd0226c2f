//! What the self-healing and crash-safety scenarios share: a cluster whose node agents and node
//! lifecycle run on a shortened clock, the operator deployed from `deploy/` with short repair
//! settings (and, for the failpoint matrix, a volume where the test arms crash points), and the
//! faults and facts the scenarios use.

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use kube_sandbox::controllers::TimeScale;
use serde_json::{Value, json};

use super::cluster::{Cluster, OPERATOR_NAMESPACE, start_cluster_scaled};
use super::{eventually, kubectl, kubectl_with_stdin, members, repo_root};

/// The sandbox's clock for these tests: CrashLoopBackOff 1 s doubling to 30 s, node heartbeats
/// every second, a node without heartbeat NotReady after 5 s and its Pods evicted after 30 s.
/// Probe periods and grace periods keep their real length.
pub const TIME_SCALE: f64 = 0.1;

/// The operator's repair settings in these tests: a Pod not ready for 20 s is recreated, and
/// repeated repairs wait 2 s, 4 s, 8 s, ... (production: 180 s and 10 s).
pub const REPAIR_ARGS: &[&str] = &["--not-ready-grace-seconds=20", "--repair-backoff-seconds=2"];

/// Where the operator looks for armed crash points (`ETCD_OPERATOR_FAILPOINTS_DIR`), and the
/// claim that backs it, which the test reaches on this machine.
pub const FAILPOINTS_DIR: &str = "/var/run/etcd-operator/failpoints";
pub const FAILPOINTS_CLAIM: &str = "operator-failpoints";

/// How the operator is deployed for a scenario.
#[derive(Clone, Debug, Default)]
pub struct OperatorDeployment {
    /// Arguments added to those of `deploy/operator/deployment.yaml` (`--flag=value` replaces
    /// the manifest's `--flag`).
    pub extra_args: Vec<String>,
    /// Mount the failpoint claim and point the operator at it.
    pub failpoints: bool,
}

impl OperatorDeployment {
    /// The operator with the short repair settings.
    pub fn repairing() -> Self {
        OperatorDeployment {
            extra_args: REPAIR_ARGS.iter().map(|a| a.to_string()).collect(),
            failpoints: false,
        }
    }
}

/// A cluster of `nodes` nodes on the shortened clocks.
pub async fn start_healing_cluster(nodes: usize) -> Cluster {
    start_cluster_scaled(nodes, TimeScale::new(TIME_SCALE).unwrap()).await
}

/// [`start_healing_cluster`] with the cert-manager stand-in running.
pub async fn start_healing_cluster_with_cert_manager(nodes: usize) -> Cluster {
    super::cluster::start_cluster_with(nodes, TimeScale::new(TIME_SCALE).unwrap(), true).await
}

/// `deploy/operator/deployment.yaml` with `options` applied.
fn deployment_manifest(options: &OperatorDeployment) -> Value {
    let path = repo_root().join("deploy/operator/deployment.yaml");
    let text = std::fs::read_to_string(&path).expect("deploy/operator/deployment.yaml");
    let mut deployment: Value = serde_yaml::from_str(&text).expect("the Deployment parses");
    let container = &mut deployment["spec"]["template"]["spec"]["containers"][0];
    let args = container["args"]
        .as_array_mut()
        .expect("the operator's args");
    // A flag given again replaces the manifest's (clap refuses `--leader-elect` twice).
    for extra in &options.extra_args {
        let flag = extra.split('=').next().unwrap_or(extra);
        args.retain(|a| {
            a.as_str()
                .is_none_or(|a| a != flag && !a.starts_with(&format!("{flag}=")))
        });
        args.push(json!(extra));
    }
    if options.failpoints {
        container["env"]
            .as_array_mut()
            .expect("the operator's env")
            .push(json!({"name": "ETCD_OPERATOR_FAILPOINTS_DIR", "value": FAILPOINTS_DIR}));
        container["volumeMounts"] = json!([{"name": "failpoints", "mountPath": FAILPOINTS_DIR}]);
        deployment["spec"]["template"]["spec"]["volumes"] = json!([{
            "name": "failpoints",
            "persistentVolumeClaim": {"claimName": FAILPOINTS_CLAIM},
        }]);
    }
    deployment
}

/// Fails unless the operator binary the sandbox runs has the crash points compiled in (the
/// `failpoints` feature): a binary built by another cargo command at the wrong moment would
/// pass every point silently and the matrix would wait for crashes that never come.
fn assert_has_crash_points(binary: &std::path::Path) {
    let bytes = std::fs::read(binary).expect("reading the operator binary");
    let marker = b"crash points are live";
    assert!(
        bytes.windows(marker.len()).any(|w| w == marker),
        "{} lacks the failpoints feature: another cargo command rebuilt target/debug/etcd-operator while the tests were built; run the test again",
        binary.display()
    );
}

impl Cluster {
    /// Deploys the operator from `deploy/` (one replica), changed as `options` says, and
    /// waits until it is Ready.
    pub async fn deploy_operator_with(&self, options: &OperatorDeployment) {
        let root = repo_root();
        for file in [
            "deploy/operator/namespace.yaml",
            "deploy/rbac",
            "deploy/operator/metrics_service.yaml",
        ] {
            let path = root.join(file);
            let (ok, _, stderr) = kubectl(self, &["apply", "-f", path.to_str().unwrap()]);
            assert!(ok, "kubectl apply -f {file}: {stderr}");
        }
        if options.failpoints {
            assert_has_crash_points(&self.dir.path().join("etcd-operator"));
            let claim: PersistentVolumeClaim = serde_json::from_value(json!({
                "metadata": {"name": FAILPOINTS_CLAIM},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Mi"}}},
            }))
            .unwrap();
            Api::<PersistentVolumeClaim>::namespaced(self.client(), OPERATOR_NAMESPACE)
                .create(&PostParams::default(), &claim)
                .await
                .expect("the failpoint claim");
            self.runtime()
                .expect("a sandbox with nodes")
                .persistent_volumes()
                .provision(OPERATOR_NAMESPACE, FAILPOINTS_CLAIM)
                .expect("the failpoint directory");
        }
        let manifest = deployment_manifest(options).to_string();
        let (ok, _, stderr) = kubectl_with_stdin(self, &["apply", "-f", "-"], Some(&manifest));
        assert!(ok, "kubectl apply of the operator Deployment: {stderr}");
        self.wait_operator_ready(1).await;
    }

    /// The failpoint directory as this machine sees it.
    pub fn failpoints_dir(&self) -> PathBuf {
        self.runtime()
            .expect("a sandbox with nodes")
            .persistent_volumes()
            .claim_path(OPERATOR_NAMESPACE, FAILPOINTS_CLAIM)
            .expect("the failpoint claim's path")
    }

    /// Arms crash point `name`: the operator exits the next time it passes it (once: it
    /// removes the file as it fires).
    pub fn arm_failpoint(&self, name: &str) {
        std::fs::write(self.failpoints_dir().join(name), b"").expect("arming a failpoint");
    }

    /// The crash points armed and not fired yet.
    pub fn armed_failpoints(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.failpoints_dir())
            .expect("the failpoint directory")
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .collect();
        names.sort();
        names
    }

    /// Restarts of the operator's container, over its Pods.
    pub async fn operator_restarts(&self) -> i32 {
        self.operator_pods()
            .await
            .iter()
            .flat_map(|p| {
                p.status
                    .iter()
                    .flat_map(|s| s.container_statuses.iter().flatten())
            })
            .map(|c| c.restart_count)
            .sum()
    }

    /// Deletes the operator's Pod (its Deployment makes a new one): a fresh restart backoff.
    pub async fn replace_operator_pod(&self) {
        let api = Api::<Pod>::namespaced(self.client(), OPERATOR_NAMESPACE);
        for pod in self.operator_pods().await {
            let name = pod.metadata.name.unwrap_or_default();
            api.delete(&name, &DeleteParams::default().grace_period(0))
                .await
                .expect("deleting the operator Pod");
        }
        self.wait_operator_ready(1).await;
    }

    /// A member's Pod, read now.
    pub async fn member_pod(&self, namespace: &str, member: &str) -> Option<Pod> {
        Api::<Pod>::namespaced(self.client(), namespace)
            .get_opt(member)
            .await
            .expect("reading a Pod")
    }

    /// The name of the member etcd reports as leader.
    pub fn leader(&self, namespace: &str, cluster: &str) -> Result<String, String> {
        let endpoint = super::cluster::client_endpoint(namespace, cluster);
        let out = self.etcdctl(&endpoint, &["endpoint", "status", "-w", "json"])?;
        let status: Value = serde_json::from_str(&out).map_err(|e| format!("{e}: {out}"))?;
        let leader = status[0]["Status"]["leader"]
            .as_u64()
            .ok_or_else(|| format!("no leader in {out}"))?;
        let listed = self.etcd_members(namespace, cluster)?;
        listed
            .into_iter()
            .find(|(_, id, _)| *id == format!("{leader:x}"))
            .map(|(name, _, _)| name)
            .ok_or_else(|| format!("leader {leader:x} is not listed"))
    }

    /// Moves etcd's leadership to `member` (etcdctl move-leader, sent to the current leader).
    pub async fn move_leader_to(&self, namespace: &str, cluster: &str, member: &str) {
        eventually(
            &format!("{member} to lead"),
            Duration::from_secs(60),
            || async {
                let leader = self.leader(namespace, cluster)?;
                if leader == member {
                    return Ok(());
                }
                let ids = self.etcd_members(namespace, cluster)?;
                let id = ids
                    .iter()
                    .find(|(name, _, _)| name == member)
                    .map(|(_, id, _)| id.clone())
                    .ok_or_else(|| format!("{member} is not listed"))?;
                let endpoint = format!("http://{leader}.{cluster}.{namespace}.svc:2379");
                self.etcdctl(&endpoint, &["move-leader", &id]).map(|_| ())?;
                Err("moved; checking".to_string())
            },
        )
        .await;
    }

    /// The member IDs the EtcdMembers record, by name.
    pub async fn recorded_ids(&self, namespace: &str, cluster: &str) -> Vec<(String, String)> {
        members(&self.client(), namespace, cluster)
            .await
            .iter()
            .map(|m| {
                (
                    m.metadata.name.clone().unwrap_or_default(),
                    m.status
                        .as_ref()
                        .and_then(|s| s.member_id.clone())
                        .unwrap_or_default(),
                )
            })
            .collect()
    }

    /// The node a member's Pod runs on.
    pub async fn node_of(&self, namespace: &str, member: &str) -> Option<String> {
        self.member_pod(namespace, member).await?.spec?.node_name
    }
}

impl Cluster {
    /// Deletes a member's Pod as a user would (default grace period).
    pub async fn delete_member_pod(&self, namespace: &str, member: &str) {
        Api::<Pod>::namespaced(self.client(), namespace)
            .delete(member, &DeleteParams::default())
            .await
            .expect("deleting a member's Pod");
    }

    /// The `Ready` condition's reason of each EtcdMember, by name.
    pub async fn member_ready_reasons(
        &self,
        namespace: &str,
        cluster: &str,
    ) -> Vec<(String, String)> {
        members(&self.client(), namespace, cluster)
            .await
            .iter()
            .map(|m| {
                let reason = m
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
                    .map(|c| c.reason.clone())
                    .unwrap_or_default();
                (m.metadata.name.clone().unwrap_or_default(), reason)
            })
            .collect()
    }
}

impl Cluster {
    /// The operator's Events in `namespace` as `(reason, message)`, oldest first.
    pub async fn events(&self, namespace: &str) -> Vec<(String, String)> {
        super::events::oldest_first(super::events::list_events(&self.client(), namespace).await)
            .into_iter()
            .map(|e| (e.reason.unwrap_or_default(), e.message.unwrap_or_default()))
            .collect()
    }
}
