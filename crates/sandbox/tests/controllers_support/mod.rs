//! What the scheduler and controller tests share: a sandbox with the control plane started on
//! its admin client, polling, and the node agent's part played by hand (Pod phases and
//! readiness through `pods/status`, Lease renewals, Ready posts, finishing terminating Pods).

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use kube_sandbox::controllers::{self, ControlPlaneHandle, ControlPlaneOptions, TimeScale};
use kube_sandbox::{Sandbox, SandboxOptions};
use serde_json::json;

/// A sandbox (3 nodes) with the scheduler and controllers running on it.
pub struct ControlPlane {
    pub control_plane: ControlPlaneHandle,
    pub sandbox: Sandbox,
    pub dir: tempfile::TempDir,
}

impl ControlPlane {
    pub fn client(&self) -> Client {
        self.sandbox.client()
    }

    pub fn pods(&self) -> Api<Pod> {
        Api::default_namespaced(self.client())
    }
}

/// Lifecycle durations a hundred times shorter: 50s grace → 0.5s, 300s eviction → 3s.
pub fn fast() -> TimeScale {
    TimeScale::new(0.01).expect("a valid scale")
}

pub async fn start(options: ControlPlaneOptions) -> ControlPlane {
    let dir = tempfile::tempdir().expect("temporary directory");
    let sandbox = Sandbox::start(SandboxOptions::new(dir.path()))
        .await
        .expect("sandbox starts");
    let control_plane = controllers::start(sandbox.client(), options);
    ControlPlane {
        control_plane,
        sandbox,
        dir,
    }
}

/// Polls `check` every 50ms until it gives a value, for up to `seconds`.
pub async fn eventually<T, F, Fut>(what: &str, seconds: u64, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(seconds);
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {seconds}s waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub fn pod_from(value: serde_json::Value) -> Pod {
    serde_json::from_value(value).expect("a Pod")
}

/// The Pod's condition of `type_` as (status, reason, message).
pub fn condition(pod: &Pod, type_: &str) -> Option<(String, String, String)> {
    let condition = pod
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)?;
    Some((
        condition.status.clone(),
        condition.reason.clone().unwrap_or_default(),
        condition.message.clone().unwrap_or_default(),
    ))
}

pub fn node_of(pod: &Pod) -> Option<String> {
    pod.spec
        .as_ref()?
        .node_name
        .clone()
        .filter(|n| !n.is_empty())
}

/// Pods of the namespace matching `selector`, sorted by name.
pub async fn list(api: &Api<Pod>, selector: &str) -> Vec<Pod> {
    let mut pods = api
        .list(&ListParams::default().labels(selector))
        .await
        .expect("list Pods")
        .items;
    pods.sort_by_key(|p| p.name_any());
    pods
}

/// Plays the node agent: the Pod's phase, and its Ready condition.
pub async fn set_phase(api: &Api<Pod>, name: &str, phase: &str, ready: bool) {
    let now = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let status = if ready { "True" } else { "False" };
    let patch = json!({"status": {"phase": phase, "conditions": [
        {"type": "Ready", "status": status, "lastTransitionTime": now},
        {"type": "ContainersReady", "status": status, "lastTransitionTime": now},
    ]}});
    api.patch_status(name, &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .unwrap_or_else(|e| panic!("status of {name}: {e}"));
}

/// Plays the node agent for every Pod of the namespace: bound Pending Pods start and become
/// Ready, Pods being deleted finish (deleted with grace 0).
pub async fn run_bound_pods(api: &Api<Pod>) {
    for pod in api
        .list(&ListParams::default())
        .await
        .expect("list Pods")
        .items
    {
        if pod.metadata.deletion_timestamp.is_some() {
            let _ = api
                .delete(&pod.name_any(), &DeleteParams::default().grace_period(0))
                .await;
        } else if node_of(&pod).is_some()
            && pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Pending")
        {
            set_phase(api, &pod.name_any(), "Running", true).await;
        }
    }
}

/// Finishes the Pods of the namespace that are being deleted, as their node agent would.
pub async fn finish_terminating(api: &Api<Pod>) {
    for pod in api
        .list(&ListParams::default())
        .await
        .expect("list Pods")
        .items
    {
        if pod.metadata.deletion_timestamp.is_some() {
            let _ = api
                .delete(&pod.name_any(), &DeleteParams::default().grace_period(0))
                .await;
        }
    }
}

/// A background node agent for a namespace, running [`run_bound_pods`] every 50ms until dropped.
pub struct FakeKubelet(tokio::task::JoinHandle<()>);

impl FakeKubelet {
    pub fn start(api: Api<Pod>) -> Self {
        Self(tokio::spawn(async move {
            loop {
                run_bound_pods(&api).await;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }))
    }
}

impl Drop for FakeKubelet {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Renews the Lease of `node` in `kube-node-lease` (creating it the first time).
pub async fn renew_lease(client: &Client, node: &str) {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": node, "namespace": "kube-node-lease"},
        "spec": {"holderIdentity": node, "leaseDurationSeconds": 40},
    }))
    .expect("a Lease");
    let mut lease = match leases.get_opt(node).await.expect("get Lease") {
        Some(existing) => existing,
        None => leases
            .create(&PostParams::default(), &lease)
            .await
            .expect("create Lease"),
    };
    lease.spec.get_or_insert_with(Default::default).renew_time =
        Some(MicroTime(jiff::Timestamp::now()));
    leases
        .replace(node, &PostParams::default(), &lease)
        .await
        .expect("renew Lease");
}

/// Posts the node's Ready=True, as a node agent does when it (re)starts.
pub async fn post_ready(client: &Client, node: &str) {
    let nodes: Api<Node> = Api::all(client.clone());
    let now = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let patch = json!({"status": {"conditions": [{
        "type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
        "lastHeartbeatTime": now, "lastTransitionTime": now,
    }]}});
    nodes
        .patch_status(node, &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .expect("post Ready");
}

/// Node agents' heartbeats: renews every listed node's Lease every 100ms; a node taken out of
/// the set goes silent.
pub struct Heartbeats {
    pub alive: Arc<Mutex<BTreeSet<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Heartbeats {
    pub async fn start(client: Client, nodes: &[&str]) -> Self {
        let alive: Arc<Mutex<BTreeSet<String>>> =
            Arc::new(Mutex::new(nodes.iter().map(|n| n.to_string()).collect()));
        for node in nodes {
            renew_lease(&client, node).await;
        }
        let beating = alive.clone();
        let task = tokio::spawn(async move {
            loop {
                let nodes: Vec<String> = beating
                    .lock()
                    .expect("heartbeat set")
                    .iter()
                    .cloned()
                    .collect();
                for node in nodes {
                    renew_lease(&client, &node).await;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        Self { alive, task }
    }

    pub fn stop(&self, node: &str) {
        self.alive.lock().expect("heartbeat set").remove(node);
    }

    pub fn resume(&self, node: &str) {
        self.alive
            .lock()
            .expect("heartbeat set")
            .insert(node.to_string());
    }
}

impl Drop for Heartbeats {
    fn drop(&mut self) {
        self.task.abort();
    }
}
