//! Controllers that give Jobs, Deployments and nodes their life: what kube-controller-manager
//! (and kube-scheduler) do for a real cluster, talking to the API server only through a
//! `kube::Client`.
//!
//! [`start`] runs them all until the returned [`ControlPlaneHandle`] is dropped:
//! - the scheduler ([`crate::scheduler`]);
//! - Deployments → ReplicaSets → Pods ([`deployment`], [`replicaset`]);
//! - StatefulSets → Pods and their claims ([`statefulset`]);
//! - Jobs, with TTL after finished ([`job`]);
//! - node lifecycle: Lease and Ready heartbeats, NotReady/unreachable conditions and taints,
//!   taint-based eviction, and the Pod garbage collector ([`node_lifecycle`]).
//!
//! Durations follow kube-controller-manager's defaults, multiplied by the [`TimeScale`].

pub mod deployment;
pub(crate) mod informer;
pub mod job;
pub mod node_lifecycle;
pub mod pods;
pub mod replicaset;
pub mod statefulset;
mod time_scale;

use std::time::Duration;

use kube::Client;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use time_scale::{InvalidTimeScale, TimeScale};

use crate::scheduler::{SchedulerOptions, run_scheduler};
use node_lifecycle::NodeLifecycleOptions;

/// What a controller's sync can fail with; the sync is retried.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error("API request failed: {0}")]
    Kube(#[from] kube::Error),
    #[error("encoding an object failed: {0}")]
    Encode(#[from] serde_json::Error),
}

/// `result`, with API errors of the given HTTP codes (such as 404 for something already gone)
/// counted as success.
pub(crate) fn ignore_codes(
    result: Result<(), kube::Error>,
    codes: &[u16],
) -> Result<(), ControllerError> {
    match result {
        Err(kube::Error::Api(status)) if codes.contains(&status.code) => Ok(()),
        other => Ok(other?),
    }
}

/// How the control plane runs. Durations are cluster durations: the [`TimeScale`] shortens them.
#[derive(Debug, Clone)]
pub struct ControlPlaneOptions {
    pub time_scale: TimeScale,
    /// Run the scheduler.
    pub scheduler: bool,
    /// Run the Job, Deployment, ReplicaSet and StatefulSet controllers.
    pub workloads: bool,
    /// Run the node lifecycle, taint eviction and Pod garbage collection. Without node agents
    /// renewing Leases every node would go NotReady, so a sandbox without them turns this off.
    pub node_lifecycle: bool,
    /// How often node health is checked (`--node-monitor-period`, 5s).
    pub node_monitor_period: Duration,
    /// How long a node may go without a heartbeat (Lease renewal or Ready condition update)
    /// before its Ready condition becomes Unknown (`--node-monitor-grace-period`, 50s).
    pub node_monitor_grace_period: Duration,
    /// How long Pods stay on a NotReady or unreachable node before they are evicted, for Pods
    /// without their own toleration of those taints (the `tolerationSeconds` that the
    /// DefaultTolerationSeconds admission plugin gives every Pod, 300s).
    pub pod_eviction_timeout: Duration,
    /// How often unschedulable Pods are retried when nothing changed.
    pub scheduler_retry_period: Duration,
}

impl Default for ControlPlaneOptions {
    fn default() -> Self {
        Self {
            time_scale: TimeScale::REAL,
            scheduler: true,
            workloads: true,
            node_lifecycle: true,
            node_monitor_period: Duration::from_secs(5),
            node_monitor_grace_period: Duration::from_secs(50),
            pod_eviction_timeout: Duration::from_secs(300),
            scheduler_retry_period: Duration::from_secs(10),
        }
    }
}

impl ControlPlaneOptions {
    pub fn time_scale(mut self, time_scale: TimeScale) -> Self {
        self.time_scale = time_scale;
        self
    }

    pub fn node_monitor_grace_period(mut self, grace: Duration) -> Self {
        self.node_monitor_grace_period = grace;
        self
    }

    pub fn pod_eviction_timeout(mut self, timeout: Duration) -> Self {
        self.pod_eviction_timeout = timeout;
        self
    }

    pub fn without_scheduler(mut self) -> Self {
        self.scheduler = false;
        self
    }

    pub fn without_workloads(mut self) -> Self {
        self.workloads = false;
        self
    }

    pub fn without_node_lifecycle(mut self) -> Self {
        self.node_lifecycle = false;
        self
    }
}

/// The running control plane. Dropping it stops every controller.
pub struct ControlPlaneHandle {
    token: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

impl ControlPlaneHandle {
    /// Asks every controller to stop; they finish the sync in progress.
    pub fn stop(&self) {
        self.token.cancel();
    }

    /// Stops every controller and waits until they have.
    pub async fn shutdown(mut self) {
        self.token.cancel();
        for task in self.tasks.drain(..) {
            let _ = task.await;
        }
    }
}

impl Drop for ControlPlaneHandle {
    fn drop(&mut self) {
        self.token.cancel();
        self.tasks.iter().for_each(JoinHandle::abort);
    }
}

/// Starts the scheduler and controllers on `client` (which needs cluster-wide rights, as the
/// admin client has). Must be called inside a Tokio runtime.
pub fn start(client: Client, options: ControlPlaneOptions) -> ControlPlaneHandle {
    let token = CancellationToken::new();
    let scale = options.time_scale;
    let mut tasks = Vec::new();
    if options.scheduler {
        let scheduler = SchedulerOptions {
            retry_period: scale.scale(options.scheduler_retry_period),
            ..SchedulerOptions::default()
        };
        tasks.push(tokio::spawn(run_scheduler(
            client.clone(),
            scheduler,
            token.clone(),
        )));
    }
    if options.workloads {
        tasks.push(tokio::spawn(job::run_job_controller(
            client.clone(),
            scale,
            token.clone(),
        )));
        tasks.push(tokio::spawn(replicaset::run_replicaset_controller(
            client.clone(),
            scale,
            token.clone(),
        )));
        tasks.push(tokio::spawn(deployment::run_deployment_controller(
            client.clone(),
            scale,
            token.clone(),
        )));
        tasks.push(tokio::spawn(statefulset::run_statefulset_controller(
            client.clone(),
            token.clone(),
        )));
    }
    if options.node_lifecycle {
        let lifecycle = NodeLifecycleOptions {
            monitor_period: scale.scale(options.node_monitor_period),
            grace_period: scale.scale(options.node_monitor_grace_period),
            default_toleration: options.pod_eviction_timeout,
            time_scale: scale,
        };
        tasks.push(tokio::spawn(node_lifecycle::run_node_lifecycle(
            client.clone(),
            lifecycle,
            token.clone(),
        )));
    }
    ControlPlaneHandle { token, tasks }
}
