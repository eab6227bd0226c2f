//! The scheduling loop: watch, decide with [`schedule`], bind through `pods/binding`, or record
//! why the Pod stays Pending.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Node, Pod, PodCondition};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::Store;
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::cluster::{Cluster, is_terminal, node_name_of};
use super::placement::{Unschedulable, schedule};
use crate::controllers::informer::Informers;

/// The scheduler name Pods get by default, and the one this scheduler answers to by default.
pub const DEFAULT_SCHEDULER: &str = "default-scheduler";

/// How the scheduling loop runs.
#[derive(Debug, Clone)]
pub struct SchedulerOptions {
    /// Pods whose `spec.schedulerName` is this are scheduled; others are left alone.
    pub scheduler_name: String,
    /// How often Pending Pods are tried again when nothing in the cluster changed.
    pub retry_period: Duration,
}

impl Default for SchedulerOptions {
    fn default() -> Self {
        Self {
            scheduler_name: DEFAULT_SCHEDULER.to_string(),
            retry_period: Duration::from_secs(10),
        }
    }
}

/// Schedules Pods until `token` is cancelled.
pub async fn run_scheduler(client: Client, options: SchedulerOptions, token: CancellationToken) {
    let mut informers = Informers::new(&token);
    let nodes = informers.watch(Api::<Node>::all(client.clone()));
    let pods = informers.watch(Api::<Pod>::all(client.clone()));
    let namespaces = informers.watch(Api::<Namespace>::all(client.clone()));
    if !informers.synced().await {
        return;
    }
    let changed = informers.changed.clone();
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: options.scheduler_name.clone(),
            instance: None,
        },
    );
    let mut scheduler = Scheduler {
        client,
        options,
        recorder,
        nodes,
        pods,
        namespaces,
        assumed: HashMap::new(),
    };
    loop {
        scheduler.schedule_pending().await;
        tokio::select! {
            () = token.cancelled() => return,
            () = changed.notified() => {}
            () = tokio::time::sleep(scheduler.options.retry_period) => {}
        }
    }
}

struct Scheduler {
    client: Client,
    options: SchedulerOptions,
    recorder: Recorder,
    nodes: Store<Node>,
    pods: Store<Pod>,
    namespaces: Store<Namespace>,
    /// Pods bound by this loop that the watch has not shown bound yet, by uid, as the real
    /// scheduler's cache assumes them, so the next decisions count them.
    assumed: HashMap<String, Pod>,
}

impl Scheduler {
    fn is_pending(&self, pod: &Pod) -> bool {
        let spec = pod.spec.as_ref();
        let name = spec
            .and_then(|s| s.scheduler_name.as_deref())
            .unwrap_or(DEFAULT_SCHEDULER);
        name == self.options.scheduler_name
            && node_name_of(pod).is_none()
            && pod.metadata.deletion_timestamp.is_none()
            && !is_terminal(pod)
            && !self
                .assumed
                .contains_key(pod.metadata.uid.as_deref().unwrap_or_default())
    }

    /// One pass over every pending Pod, highest priority first, then oldest first.
    async fn schedule_pending(&mut self) {
        let all_pods = self.pods.state();
        let live: HashMap<&str, &Pod> = all_pods
            .iter()
            .map(|p| (p.metadata.uid.as_deref().unwrap_or_default(), p.as_ref()))
            .collect();
        self.assumed.retain(|uid, _| {
            live.get(uid.as_str())
                .is_some_and(|p| node_name_of(p).is_none())
        });
        let mut pending: Vec<&Pod> = all_pods
            .iter()
            .map(AsRef::as_ref)
            .filter(|p| self.is_pending(p))
            .collect();
        if pending.is_empty() {
            return;
        }
        pending.sort_by(|a, b| {
            let priority = |p: &Pod| p.spec.as_ref().and_then(|s| s.priority).unwrap_or(0);
            priority(b)
                .cmp(&priority(a))
                .then_with(|| {
                    a.metadata
                        .creation_timestamp
                        .cmp(&b.metadata.creation_timestamp)
                })
                .then_with(|| (a.namespace(), a.name_any()).cmp(&(b.namespace(), b.name_any())))
        });
        let mut cluster = Cluster {
            nodes: self
                .nodes
                .state()
                .iter()
                .map(|n| n.as_ref().clone())
                .collect(),
            pods: all_pods
                .iter()
                .filter(|p| node_name_of(p).is_some())
                .map(|p| p.as_ref().clone())
                .collect(),
            namespaces: self
                .namespaces
                .state()
                .iter()
                .map(|n| (n.name_any(), n.labels().clone()))
                .collect(),
        };
        cluster.pods.extend(self.assumed.values().cloned());
        for pod in pending {
            match schedule(pod, &cluster) {
                Ok(node) => {
                    if self.bind(pod, &node).await {
                        let mut placed = pod.clone();
                        placed.spec.get_or_insert_with(Default::default).node_name = Some(node);
                        self.assumed
                            .insert(pod.metadata.uid.clone().unwrap_or_default(), placed.clone());
                        cluster.pods.push(placed);
                    }
                }
                Err(unschedulable) => self.mark_unschedulable(pod, &unschedulable).await,
            }
        }
    }

    /// Binds as kube-scheduler does, through the `binding` subresource.
    async fn bind(&self, pod: &Pod, node: &str) -> bool {
        let (namespace, name) = (pod.namespace().unwrap_or_default(), pod.name_any());
        let binding = json!({
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace, "uid": pod.metadata.uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        });
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
        match api
            .create_subresource::<_, serde_json::Value>(
                "binding",
                &name,
                &PostParams::default(),
                &binding,
            )
            .await
        {
            Ok(_) => {
                tracing::debug!(pod = %format!("{namespace}/{name}"), node, "bound");
                let note = format!("Successfully assigned {namespace}/{name} to {node}");
                self.publish(pod, EventType::Normal, "Scheduled", "Binding", note)
                    .await;
                true
            }
            Err(error) => {
                tracing::debug!(pod = %format!("{namespace}/{name}"), node, %error, "binding failed; will retry");
                false
            }
        }
    }

    /// Sets `PodScheduled=False` with the reason and message, when they differ from what the Pod
    /// already says (so retries do not rewrite the Pod over and over).
    async fn mark_unschedulable(&self, pod: &Pod, why: &Unschedulable) {
        let current: Option<&PodCondition> = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "PodScheduled"));
        let same = current.is_some_and(|c| {
            c.status == "False"
                && c.reason.as_deref() == Some(&why.reason)
                && c.message.as_deref() == Some(&why.message)
        });
        if same {
            return;
        }
        let transition = match current {
            Some(c) if c.status == "False" => {
                c.last_transition_time.as_ref().map(|t| t.0.to_string())
            }
            _ => None,
        }
        .unwrap_or_else(crate::controllers::pods::now_rfc3339);
        let patch = json!({"status": {"conditions": [{
            "type": "PodScheduled",
            "status": "False",
            "reason": why.reason,
            "message": why.message,
            "lastProbeTime": null,
            "lastTransitionTime": transition,
        }]}});
        let api: Api<Pod> =
            Api::namespaced(self.client.clone(), &pod.namespace().unwrap_or_default());
        match api
            .patch_status(
                &pod.name_any(),
                &PatchParams::default(),
                &Patch::Strategic(patch),
            )
            .await
        {
            Ok(_) => {
                self.publish(
                    pod,
                    EventType::Warning,
                    "FailedScheduling",
                    "Scheduling",
                    why.message.clone(),
                )
                .await
            }
            Err(error) => {
                tracing::debug!(pod = %pod.name_any(), %error, "recording PodScheduled=False failed")
            }
        }
    }

    async fn publish(&self, pod: &Pod, type_: EventType, reason: &str, action: &str, note: String) {
        let event = Event {
            type_,
            reason: reason.to_string(),
            note: Some(note),
            action: action.to_string(),
            secondary: None,
        };
        if let Err(error) = self.recorder.publish(&event, &pod.object_ref(&())).await {
            tracing::debug!(%error, "publishing a scheduler event failed");
        }
    }
}
