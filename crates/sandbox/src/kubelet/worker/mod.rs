//! One Pod on one node, as the kubelet's pod worker runs it: sandbox and volumes, init
//! containers in order, then the containers with their restart policy, back-off and probes,
//! and the status written back after every change. Level-triggered: each wake-up compares
//! what the Pod asks for with what runs, takes the next steps, and publishes the status.

mod containers;
mod probing;
mod setup;
mod termination;

pub use termination::NODE_SHUTDOWN_MESSAGE;

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Container, Pod};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::{Resource, ResourceExt};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use super::backoff::Backoff;
use super::context::{KubeletContext, PodEntry};
use super::probes::ProbeEvent;
use super::status::{self, ContainerRecord, PodFacts, TerminalPhase};
use super::volumes::VolumeInputs;

/// What a node agent shares with its Pod workers.
pub(crate) struct NodeContext {
    pub name: String,
    pub host_ip: Ipv4Addr,
    pub kubelet: Arc<KubeletContext>,
    pub recorder: Recorder,
    /// Cancelled when the node agent stops (the sandbox is dropped).
    pub token: tokio_util::sync::CancellationToken,
}

impl NodeContext {
    /// Records an event about `pod` without waiting for it (events are best effort).
    pub fn event(&self, pod: &Pod, type_: EventType, reason: &str, note: String) {
        let recorder = self.recorder.clone();
        let reference = pod.object_ref(&());
        let event = Event {
            type_,
            reason: reason.to_string(),
            note: Some(note),
            action: reason.to_string(),
            secondary: None,
        };
        tokio::spawn(async move {
            if let Err(error) = recorder.publish(&event, &reference).await {
                tracing::debug!(%error, "recording an event failed");
            }
        });
    }
}

/// What the node agent last saw of the Pod.
#[derive(Clone, Debug)]
pub(crate) enum Observed {
    Present(Arc<Pod>),
    /// The object is gone from the API (force deletion, namespace deletion).
    Gone,
}

/// What the node tells its workers.
pub(crate) enum NodeCommand {
    /// Node crash: every process killed at once, nothing reported.
    Crash(oneshot::Sender<()>),
    /// Graceful node shutdown: SIGTERM, the grace period (at most `grace_cap`), then the Pod is
    /// left terminal.
    Shutdown {
        grace_cap: Duration,
        done: oneshot::Sender<()>,
    },
}

/// The node agent's end of a worker.
pub(crate) struct PodWorkerLink {
    pub observed: watch::Sender<Observed>,
    pub commands: mpsc::UnboundedSender<NodeCommand>,
    pub task: JoinHandle<()>,
}

/// What wakes a worker besides the Pod changing.
#[derive(Debug)]
pub(crate) enum WorkerEvent {
    /// Run `run` of a container ended.
    Exited { container: String, run: u32 },
    Probe {
        container: String,
        run: u32,
        event: ProbeEvent,
    },
}

/// The kubelet's view of one container of the spec.
pub(crate) struct ContainerSlot {
    pub spec: Container,
    pub init: bool,
    /// Runs started in this sandbox (the runtime counts the same).
    pub runs: u32,
    /// Why it is not running, when it is not (ErrImagePull, CrashLoopBackOff, ...).
    pub waiting: Option<(String, Option<String>)>,
    /// When its last run ended, for the back-off.
    pub ended_at: Option<Instant>,
    /// It will not run again (succeeded for good, or its restart policy says no).
    pub finished: bool,
    pub ready: bool,
    pub started: bool,
    /// The probes of the current run; aborted when dropped.
    pub probes: Option<AbortOnDrop>,
    /// Image pull or configuration retries wait until then.
    pub retry_at: Option<Instant>,
    /// The spec's image changed: the running container is to be replaced.
    pub image_changed: bool,
    /// Killed for a new image: start again at once, whatever the policy says.
    pub restart_now: bool,
    /// Termination messages of ended runs, by run number (read once from the run's log).
    pub termination_messages: std::sync::Mutex<BTreeMap<u32, Option<String>>>,
}

/// A task aborted when its owner drops it.
pub(crate) struct AbortOnDrop(pub JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

pub(crate) struct PodWorker {
    node: Arc<NodeContext>,
    uid: String,
    observed: watch::Receiver<Observed>,
    /// The freshest object: from the watch or from our own status writes.
    pod: Arc<Pod>,
    /// The Pod with the service-account volume the admission plugin would have added.
    effective: Option<Pod>,
    events: mpsc::UnboundedSender<WorkerEvent>,
    inbox: mpsc::UnboundedReceiver<WorkerEvent>,
    commands: mpsc::UnboundedReceiver<NodeCommand>,
    entry: Option<Arc<PodEntry>>,
    /// When to try making the sandbox again after it failed.
    setup_retry: Backoff,
    setup_retry_at: Option<Instant>,
    slots: Vec<ContainerSlot>,
    backoff: Backoff,
    terminal: Option<TerminalPhase>,
    start_time: Option<Timestamp>,
    wake_at: Option<Instant>,
    /// Inputs the volume files were last computed from, to refresh them on change.
    volume_inputs: Option<VolumeInputs>,
    volume_files: BTreeMap<String, Vec<crate::runtime::ProjectedFile>>,
    /// The Pod was terminal when this worker started: its status is not written again.
    status_final: bool,
    finished: bool,
}

/// Starts the worker of a Pod the node agent just saw.
pub(crate) fn spawn(node: Arc<NodeContext>, pod: Arc<Pod>) -> PodWorkerLink {
    let (observed_sender, observed) = watch::channel(Observed::Present(pod.clone()));
    let (command_sender, commands) = mpsc::unbounded_channel();
    let (events, inbox) = mpsc::unbounded_channel();
    let slots = pod
        .spec
        .iter()
        .flat_map(|spec| {
            let init = spec.init_containers.iter().flatten().map(|c| (c, true));
            init.chain(spec.containers.iter().map(|c| (c, false)))
        })
        .map(|(spec, init)| ContainerSlot {
            spec: spec.clone(),
            init,
            runs: 0,
            waiting: None,
            ended_at: None,
            finished: false,
            ready: false,
            started: false,
            probes: None,
            retry_at: None,
            image_changed: false,
            restart_now: false,
            termination_messages: Default::default(),
        })
        .collect();
    let scale = node.kubelet.time_scale;
    let worker = PodWorker {
        uid: pod.uid().unwrap_or_default(),
        node,
        observed,
        pod,
        effective: None,
        events,
        inbox,
        commands,
        entry: None,
        setup_retry_at: None,
        setup_retry: Backoff::new(
            scale.scale(Duration::from_secs(1)),
            scale.scale(Duration::from_secs(30)),
        ),
        slots,
        backoff: Backoff::kubelet(scale),
        terminal: None,
        start_time: None,
        wake_at: None,
        volume_inputs: None,
        volume_files: BTreeMap::new(),
        status_final: false,
        finished: false,
    };
    PodWorkerLink {
        observed: observed_sender,
        commands: command_sender,
        task: tokio::spawn(worker.run()),
    }
}

impl PodWorker {
    fn namespace(&self) -> String {
        self.pod.namespace().unwrap_or_else(|| "default".into())
    }

    fn name(&self) -> String {
        self.pod.name_any()
    }

    fn restart_policy(&self) -> String {
        self.pod
            .spec
            .as_ref()
            .and_then(|s| s.restart_policy.clone())
            .unwrap_or_else(|| "Always".into())
    }

    fn api(&self) -> Api<Pod> {
        Api::namespaced(self.node.kubelet.client.clone(), &self.namespace())
    }

    /// Wakes the loop at `at` at the latest.
    fn wake_by(&mut self, at: Instant) {
        self.wake_at = Some(self.wake_at.map_or(at, |current| current.min(at)));
    }

    async fn run(mut self) {
        let mut sources = self.node.kubelet.sources_changed.subscribe();
        self.adopt_or_inherit();
        loop {
            if self.pod.metadata.deletion_timestamp.is_some() {
                self.terminate_for_deletion().await;
            }
            if self.finished {
                return;
            }
            self.sync().await;
            self.publish_status().await;
            let wake_at = self.wake_at.take();
            let sleep = async move {
                match wake_at {
                    Some(at) => tokio::time::sleep_until(at.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                changed = self.observed.changed() => {
                    let observed = if changed.is_ok() { self.observed.borrow_and_update().clone() } else { Observed::Gone };
                    match observed {
                        Observed::Present(pod) => self.observe(pod),
                        Observed::Gone => {
                            self.terminate_gone().await;
                            return;
                        }
                    }
                }
                Some(event) = self.inbox.recv() => self.take_event(event).await,
                Some(command) = self.commands.recv() => match command {
                    NodeCommand::Crash(done) => {
                        self.crash().await;
                        let _ = done.send(());
                        return;
                    }
                    NodeCommand::Shutdown { grace_cap, done } => {
                        self.shut_down(grace_cap).await;
                        let _ = done.send(());
                        return;
                    }
                },
                Ok(()) = sources.changed() => self.refresh_volume_files(),
                () = self.node.token.cancelled() => return,
                () = sleep => {}
            }
        }
    }

    /// Takes a newer version of the Pod (the watch may lag behind our own writes).
    fn observe(&mut self, pod: Arc<Pod>) {
        let version = |pod: &Pod| {
            pod.resource_version()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        if pod.uid().as_deref() == Some(self.uid.as_str()) && version(&pod) >= version(&self.pod) {
            self.pod = pod;
            self.follow_image_changes();
        }
    }

    /// A container's image is the one field of a Pod's containers that can change: the
    /// running container is then restarted with the new image, whatever the restart policy.
    fn follow_image_changes(&mut self) {
        let Some(spec) = self.pod.spec.clone() else {
            return;
        };
        for slot in self.slots.iter_mut().filter(|slot| !slot.init) {
            let Some(updated) = spec.containers.iter().find(|c| c.name == slot.spec.name) else {
                continue;
            };
            if updated.image == slot.spec.image {
                continue;
            }
            slot.spec.image = updated.image.clone();
            slot.image_changed = true;
            let effective = self.effective.as_mut().and_then(|pod| pod.spec.as_mut());
            if let Some(container) =
                effective.and_then(|s| s.containers.iter_mut().find(|c| c.name == slot.spec.name))
            {
                container.image = updated.image.clone();
            }
        }
    }

    /// The records the status is computed from, in spec order.
    fn records(&self) -> (Vec<ContainerRecord>, Vec<ContainerRecord>) {
        let initialized = status::initialized(&self.init_records_only());
        let mut init = Vec::new();
        let mut containers = Vec::new();
        for slot in &self.slots {
            let default_reason = if !slot.init && !initialized {
                "PodInitializing"
            } else {
                "ContainerCreating"
            };
            let record = self.record_of(slot, default_reason);
            if slot.init {
                init.push(record);
            } else {
                containers.push(record);
            }
        }
        (init, containers)
    }

    fn init_records_only(&self) -> Vec<ContainerRecord> {
        self.slots
            .iter()
            .filter(|s| s.init)
            .map(|slot| self.record_of(slot, "PodInitializing"))
            .collect()
    }

    async fn publish_status(&mut self) {
        if self.finished || self.status_final {
            return;
        }
        let (init, containers) = self.records();
        let network = self.entry.as_ref().and_then(|e| e.network());
        let pod_ip = self.pod_ip(network.as_deref());
        let facts = PodFacts {
            pod: &self.pod,
            host_ip: self.node.host_ip,
            pod_ip,
            sandbox_ready: self.entry.is_some() && self.terminal.is_none(),
            start_time: self.start_time,
            init: &init,
            containers: &containers,
            terminal: self.terminal.as_ref(),
        };
        let mut desired = status::desired_status(&facts, Timestamp::now());
        if let Some(terminal) = &self.terminal
            && let Some(message) = &terminal.disruption
        {
            desired
                .conditions
                .get_or_insert_with(Vec::new)
                .push(status::disruption_condition(&self.pod, message));
        }
        if !status::needs_update(&self.pod, &desired) {
            return;
        }
        let mut patch = status::status_patch(&desired);
        // The uid makes the write fail rather than land on a new Pod of the same name.
        patch["metadata"] = serde_json::json!({"uid": self.uid});
        match self
            .api()
            .patch_status(
                &self.name(),
                &PatchParams::default(),
                &Patch::Strategic(&patch),
            )
            .await
        {
            Ok(updated) => self.observe(Arc::new(updated)),
            Err(kube::Error::Api(status)) if status.code == 404 => {
                tracing::debug!(pod = %self.name(), "the Pod is gone; its worker waits for the watch to say so");
            }
            Err(error) => {
                tracing::warn!(pod = %self.name(), %error, "writing the Pod status failed; retrying");
                self.wake_by(Instant::now() + Duration::from_secs(1));
            }
        }
    }

    fn pod_ip(&self, network: Option<&crate::network::PodNetwork>) -> Option<Ipv4Addr> {
        if self.host_network() {
            return self.entry.as_ref().map(|_| self.node.host_ip);
        }
        network.map(|n| n.ip())
    }

    fn host_network(&self) -> bool {
        self.pod
            .spec
            .as_ref()
            .and_then(|s| s.host_network)
            .unwrap_or(false)
    }

    async fn take_event(&mut self, event: WorkerEvent) {
        match event {
            WorkerEvent::Exited { container, run } => self.container_exited(&container, run),
            WorkerEvent::Probe {
                container,
                run,
                event,
            } => self.probe_event(&container, run, event).await,
        }
    }
}
