//! Node lifecycle, as kube-controller-manager's node lifecycle, taint eviction and Pod GC
//! controllers run it:
//! - a node is heard from when its Lease in `kube-node-lease` is renewed or its Ready condition's
//!   heartbeat moves; silent for the grace period, its conditions become Unknown
//!   (`NodeStatusUnknown`) and the Pods on it are marked not Ready;
//! - its taints follow its conditions: `node.kubernetes.io/unreachable` (Ready Unknown) or
//!   `not-ready` (Ready False), NoSchedule and NoExecute, and are removed once the node agent
//!   posts Ready=True again;
//! - Pods on a node with NoExecute taints are deleted (gracefully, with a `DisruptionTarget`
//!   condition) when their tolerations run out; a Pod without its own toleration of not-ready or
//!   unreachable tolerates them for the eviction timeout;
//! - Pods bound to a node that no longer exists, and terminating Pods on a NotReady node tainted
//!   `node.kubernetes.io/out-of-service`, are force-deleted.
//!
//! The node agent owns the Ready condition's True: it posts it on start and renews the Lease.

mod eviction;
mod health;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::Store;
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub use eviction::{Eviction, eviction_time};
pub use health::{reconciled_taints, unknown_conditions};

use super::TimeScale;
use super::informer::Informers;
use super::pods::{is_ready, now_rfc3339, pod_condition};
use crate::scheduler::node_name_of;
use crate::scheduler::taints::{NO_EXECUTE, node_condition};

/// The namespace of the node agents' heartbeat Leases, one per node, named as the node.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";
/// The taint an administrator sets to say a node is gone for good (non-graceful node shutdown).
pub const OUT_OF_SERVICE: &str = "node.kubernetes.io/out-of-service";
/// How long a Pod's node must be missing before the Pod GC removes the Pod (a node may be
/// re-registered meanwhile).
const ORPHAN_QUARANTINE: Duration = Duration::from_secs(40);

/// How the node lifecycle runs; `monitor_period` and `grace_period` are real (already scaled)
/// durations, `default_toleration` is in cluster time (scaled like any `tolerationSeconds`).
#[derive(Debug, Clone)]
pub struct NodeLifecycleOptions {
    pub monitor_period: Duration,
    pub grace_period: Duration,
    pub default_toleration: Duration,
    pub time_scale: TimeScale,
}

/// What was last heard from a node, and when (on this controller's clock).
struct Heartbeat {
    ready_heartbeat: Option<Time>,
    lease_renewal: Option<String>,
    heard_at: Instant,
}

struct NodeLifecycle {
    client: Client,
    options: NodeLifecycleOptions,
    recorder: Recorder,
    nodes: Store<Node>,
    leases: Store<Lease>,
    pods: Store<Pod>,
    heartbeats: HashMap<String, Heartbeat>,
    /// When NoExecute taints without `timeAdded` were first seen, by (node, key).
    taints_seen: HashMap<(String, String), Timestamp>,
    /// Pods already evicted, by uid, so a lagging cache does not delete them twice.
    evicted: HashSet<String>,
    /// When Pods bound to a node that does not exist were first seen, by uid.
    orphans_seen: HashMap<String, Instant>,
}

/// Runs the node lifecycle until `token` is cancelled.
pub async fn run_node_lifecycle(
    client: Client,
    options: NodeLifecycleOptions,
    token: CancellationToken,
) {
    let mut informers = Informers::new(&token);
    let nodes = informers.watch(Api::<Node>::all(client.clone()));
    let leases = informers.watch(Api::<Lease>::namespaced(
        client.clone(),
        NODE_LEASE_NAMESPACE,
    ));
    let pods = informers.watch(Api::<Pod>::all(client.clone()));
    if !informers.synced().await {
        return;
    }
    let changed = informers.changed.clone();
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "node-controller".into(),
            instance: None,
        },
    );
    let mut lifecycle = NodeLifecycle {
        client,
        options,
        recorder,
        nodes,
        leases,
        pods,
        heartbeats: HashMap::new(),
        taints_seen: HashMap::new(),
        evicted: HashSet::new(),
        orphans_seen: HashMap::new(),
    };
    loop {
        lifecycle.monitor_nodes().await;
        let next_eviction = lifecycle.evict_pods().await;
        lifecycle.collect_orphans().await;
        let wait = next_eviction.map_or(lifecycle.options.monitor_period, |e| {
            e.min(lifecycle.options.monitor_period)
        });
        tokio::select! {
            () = token.cancelled() => return,
            () = changed.notified() => {}
            () = tokio::time::sleep(wait) => {}
        }
    }
}

impl NodeLifecycle {
    /// Notes heartbeats, turns silent nodes Unknown, keeps taints in step with conditions, and
    /// marks the Pods of nodes that are not Ready as not Ready.
    async fn monitor_nodes(&mut self) {
        let now = Instant::now();
        let nodes = self.nodes.state();
        self.heartbeats
            .retain(|name, _| nodes.iter().any(|n| n.metadata.name.as_ref() == Some(name)));
        for node in &nodes {
            let name = node.name_any();
            let ready_heartbeat =
                node_condition(node, "Ready").and_then(|c| c.last_heartbeat_time.clone());
            let lease_renewal = self
                .leases
                .state()
                .iter()
                .find(|l| l.metadata.name.as_ref() == Some(&name))
                .and_then(|l| {
                    l.spec
                        .as_ref()?
                        .renew_time
                        .as_ref()
                        .map(|t| t.0.to_string())
                });
            let heartbeat = self.heartbeats.entry(name.clone()).or_insert(Heartbeat {
                ready_heartbeat: None,
                lease_renewal: None,
                heard_at: now,
            });
            if heartbeat.ready_heartbeat != ready_heartbeat
                || heartbeat.lease_renewal != lease_renewal
            {
                *heartbeat = Heartbeat {
                    ready_heartbeat,
                    lease_renewal,
                    heard_at: now,
                };
            }
            let silent = now.duration_since(heartbeat.heard_at) > self.options.grace_period;
            let mut node = node.as_ref().clone();
            if silent && let Some(conditions) = unknown_conditions(&node, Timestamp::now()) {
                match self.patch_conditions(&name, &conditions).await {
                    Some(updated) => {
                        tracing::info!(node = %name, "node stopped posting status; marked Unknown");
                        self.publish(
                            &updated,
                            "NodeNotReady",
                            format!("Node {name} status is now: NodeNotReady"),
                        )
                        .await;
                        node = updated;
                    }
                    None => continue,
                }
            }
            if let Some(taints) = reconciled_taints(&node, Timestamp::now()) {
                self.patch_taints(&node, &taints).await;
            }
            if node_condition(&node, "Ready").is_some_and(|c| c.status != "True") {
                self.mark_pods_not_ready(&name).await;
            }
        }
    }

    async fn patch_conditions(
        &self,
        name: &str,
        conditions: &[k8s_openapi::api::core::v1::NodeCondition],
    ) -> Option<Node> {
        let api: Api<Node> = Api::all(self.client.clone());
        let patch = json!({"status": {"conditions": conditions}});
        match api
            .patch_status(name, &PatchParams::default(), &Patch::Strategic(patch))
            .await
        {
            Ok(node) => Some(node),
            Err(error) => {
                tracing::debug!(node = name, %error, "marking the node Unknown failed; will retry");
                None
            }
        }
    }

    /// Replaces the node's taints, guarded by its resourceVersion so a concurrent change (say,
    /// `kubectl taint`) is not lost; a conflict is retried on the next pass.
    async fn patch_taints(&self, node: &Node, taints: &[Taint]) {
        let api: Api<Node> = Api::all(self.client.clone());
        let patch = json!({"metadata": {"resourceVersion": node.resource_version()}, "spec": {"taints": taints}});
        if let Err(error) = api
            .patch(
                &node.name_any(),
                &PatchParams::default(),
                &Patch::Merge(patch),
            )
            .await
        {
            tracing::debug!(node = %node.name_any(), %error, "updating the node's taints failed; will retry");
        }
    }

    async fn mark_pods_not_ready(&self, node: &str) {
        for pod in self
            .pods
            .state()
            .iter()
            .filter(|p| node_name_of(p) == Some(node) && is_ready(p))
        {
            let patch = json!({"status": {"conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": now_rfc3339()}]}});
            let api: Api<Pod> =
                Api::namespaced(self.client.clone(), &pod.namespace().unwrap_or_default());
            if let Err(error) = api
                .patch_status(
                    &pod.name_any(),
                    &PatchParams::default(),
                    &Patch::Strategic(patch),
                )
                .await
            {
                tracing::debug!(pod = %pod.name_any(), %error, "marking the Pod not ready failed");
            }
        }
    }

    /// Deletes the Pods whose tolerations of their node's NoExecute taints ran out; returns how
    /// long until the next one will.
    async fn evict_pods(&mut self) -> Option<Duration> {
        let now = Timestamp::now();
        let mut next: Option<Timestamp> = None;
        let nodes = self.nodes.state();
        let pods = self.pods.state();
        self.evicted
            .retain(|uid| pods.iter().any(|p| p.metadata.uid.as_ref() == Some(uid)));
        self.taints_seen.retain(|(node, key), _| {
            nodes.iter().any(|n| {
                n.metadata.name.as_ref() == Some(node)
                    && n.spec
                        .iter()
                        .flat_map(|s| s.taints.iter().flatten())
                        .any(|t| &t.key == key)
            })
        });
        for node in &nodes {
            let name = node.name_any();
            let mut taints: Vec<Taint> = node
                .spec
                .as_ref()
                .and_then(|s| s.taints.clone())
                .unwrap_or_default();
            taints.retain(|t| t.effect == NO_EXECUTE);
            if taints.is_empty() {
                continue;
            }
            for taint in taints.iter_mut().filter(|t| t.time_added.is_none()) {
                let seen = self
                    .taints_seen
                    .entry((name.clone(), taint.key.clone()))
                    .or_insert(now);
                taint.time_added = Some(Time(*seen));
            }
            for pod in pods.iter().filter(|p| {
                node_name_of(p) == Some(name.as_str()) && p.metadata.deletion_timestamp.is_none()
            }) {
                let uid = pod.metadata.uid.clone().unwrap_or_default();
                if self.evicted.contains(&uid) {
                    continue;
                }
                match eviction_time(
                    pod,
                    &taints,
                    self.options.default_toleration,
                    self.options.time_scale,
                    now,
                ) {
                    Eviction::Never => {}
                    Eviction::At(at) if at > now => next = Some(next.map_or(at, |n| n.min(at))),
                    Eviction::At(_) => {
                        if self.evict(pod).await {
                            self.evicted.insert(uid);
                        }
                    }
                }
            }
        }
        next.map(|at| Duration::try_from(at.duration_since(now)).unwrap_or_default())
    }

    /// Marks the Pod `DisruptionTarget` (reason `DeletionByTaintManager`) and deletes it.
    async fn evict(&self, pod: &Pod) -> bool {
        let api: Api<Pod> =
            Api::namespaced(self.client.clone(), &pod.namespace().unwrap_or_default());
        if pod_condition(pod, "DisruptionTarget").is_none() {
            let patch = json!({"status": {"conditions": [{
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "DeletionByTaintManager",
                "message": "Taint manager: deleting due to NoExecute taint",
                "lastTransitionTime": now_rfc3339(),
            }]}});
            let _ = api
                .patch_status(
                    &pod.name_any(),
                    &PatchParams::default(),
                    &Patch::Strategic(patch),
                )
                .await;
        }
        let note = format!(
            "Marking for deletion Pod {}/{}",
            pod.namespace().unwrap_or_default(),
            pod.name_any()
        );
        self.publish(pod, "TaintManagerEviction", note).await;
        match api.delete(&pod.name_any(), &DeleteParams::default()).await {
            Ok(_) => true,
            Err(kube::Error::Api(status)) if status.code == 404 => true,
            Err(error) => {
                tracing::debug!(pod = %pod.name_any(), %error, "evicting the Pod failed; will retry");
                false
            }
        }
    }

    /// The Pod GC's part for lost nodes: Pods bound to a node that has been gone for the
    /// quarantine (40s, scaled), and terminating Pods on an out-of-service node that is not
    /// Ready, are force-deleted.
    async fn collect_orphans(&mut self) {
        let nodes = self.nodes.state();
        let pods = self.pods.state();
        let quarantine = self.options.time_scale.scale(ORPHAN_QUARANTINE);
        self.orphans_seen
            .retain(|uid, _| pods.iter().any(|p| p.metadata.uid.as_ref() == Some(uid)));
        for pod in pods {
            let Some(node_name) = node_name_of(&pod) else {
                continue;
            };
            let node = nodes
                .iter()
                .find(|n| n.metadata.name.as_deref() == Some(node_name));
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            let orphaned = match node {
                Some(_) => {
                    self.orphans_seen.remove(&uid);
                    false
                }
                None => {
                    self.orphans_seen
                        .entry(uid)
                        .or_insert_with(Instant::now)
                        .elapsed()
                        >= quarantine
                }
            };
            let out_of_service = node.is_some_and(|n| {
                pod.metadata.deletion_timestamp.is_some()
                    && node_condition(n, "Ready").is_some_and(|c| c.status != "True")
                    && n.spec
                        .iter()
                        .flat_map(|s| s.taints.iter().flatten())
                        .any(|t| t.key == OUT_OF_SERVICE)
            });
            if orphaned || out_of_service {
                let api: Api<Pod> =
                    Api::namespaced(self.client.clone(), &pod.namespace().unwrap_or_default());
                if let Err(error) = api
                    .delete(&pod.name_any(), &DeleteParams::default().grace_period(0))
                    .await
                {
                    tracing::debug!(pod = %pod.name_any(), %error, "force-deleting a lost Pod failed");
                }
            }
        }
    }

    async fn publish<K: Resource<DynamicType = ()>>(&self, object: &K, reason: &str, note: String) {
        let event = Event {
            type_: EventType::Normal,
            reason: reason.to_string(),
            note: Some(note),
            action: "NodeLifecycle".to_string(),
            secondary: None,
        };
        if let Err(error) = self.recorder.publish(&event, &object.object_ref(&())).await {
            tracing::debug!(%error, "publishing a node lifecycle event failed");
        }
    }
}
