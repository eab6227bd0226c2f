//! How a Pod's processes end: deletion (SIGTERM, the grace period, SIGKILL, a final status,
//! then the object deleted with grace 0, as the kubelet does), the object vanishing, a node
//! crash (everything killed, nothing reported) and a graceful node shutdown (the Pod left
//! terminal, never restarted).

use std::sync::Arc;
use std::time::Duration;

use kube::api::{DeleteParams, Preconditions};
use tokio::sync::watch;

use super::super::status::{self, TerminalPhase};
use super::{Observed, PodWorker};

/// The message of a Pod stopped by a graceful node shutdown (the kubelet's words).
pub const NODE_SHUTDOWN_MESSAGE: &str = "Pod was terminated in response to imminent node shutdown.";

fn grace_seconds(seconds: Option<i64>) -> Duration {
    Duration::from_secs(seconds.and_then(|s| u64::try_from(s).ok()).unwrap_or(30))
}

/// Waits until the Pod is gone or its grace period is shortened below `grace`.
async fn hurried(mut observed: watch::Receiver<Observed>, grace: Duration) {
    loop {
        if observed.changed().await.is_err() {
            return;
        }
        match &*observed.borrow_and_update() {
            Observed::Gone => return,
            Observed::Present(pod) => {
                if pod
                    .metadata
                    .deletion_grace_period_seconds
                    .is_some_and(|s| grace_seconds(Some(s)) < grace)
                {
                    return;
                }
            }
        }
    }
}

impl PodWorker {
    /// The Pod's grace period: the deletion's, else the spec's.
    pub(super) fn grace_period(&self) -> Duration {
        let spec = self
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.termination_grace_period_seconds);
        grace_seconds(self.pod.metadata.deletion_grace_period_seconds.or(spec))
    }

    /// Stops every container with `grace` (SIGKILL at once if the deletion is hurried).
    async fn stop_containers(&mut self, grace: Duration) {
        for slot in &mut self.slots {
            slot.probes = None;
            slot.ready = false;
        }
        let Some(entry) = self.entry.clone() else {
            return;
        };
        let stopping = entry.sandbox.stop(grace);
        tokio::select! {
            () = stopping => {}
            () = hurried(self.observed.clone(), grace) => entry.sandbox.stop(Duration::ZERO).await,
        }
    }

    /// The phase once every process is gone: Succeeded only if every container succeeded.
    fn final_phase(&self) -> &'static str {
        let (init, containers) = self.records();
        match status::pod_phase("Never", &init, &containers) {
            "Succeeded" => "Succeeded",
            _ => "Failed",
        }
    }

    /// `deletionTimestamp` is set: stop, report, delete the object with grace 0.
    pub(super) async fn terminate_for_deletion(&mut self) {
        if self.terminal.is_none() {
            let grace = self.grace_period();
            self.stop_containers(grace).await;
            self.terminal = Some(TerminalPhase {
                phase: self.final_phase(),
                reason: None,
                message: None,
                disruption: None,
            });
            self.publish_status().await;
        }
        let parameters = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(self.uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match self.api().delete(&self.name(), &parameters).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {}
            Err(error) => {
                tracing::warn!(pod = %self.name(), %error, "deleting a stopped Pod failed")
            }
        }
        self.dispose();
    }

    /// The object is gone without us (force or namespace deletion): stop and forget.
    pub(super) async fn terminate_gone(&mut self) {
        let grace = self.grace_period();
        self.stop_containers(grace).await;
        self.dispose();
    }

    /// Removes the Pod from the table and lets its sandbox and network go.
    fn dispose(&mut self) {
        self.finished = true;
        self.node.kubelet.pods.remove(&self.uid);
        if let Some(entry) = self.entry.take() {
            // Dropping kills, unmounts and runs `ip`: not on the async threads.
            tokio::task::spawn_blocking(move || drop(entry));
        }
    }

    /// Node crash: every process killed at once and the Pod cut off the network; its object
    /// is left as it was, its sandbox kept for the node's return.
    pub(super) async fn crash(&mut self) {
        self.finished = true;
        for slot in &mut self.slots {
            slot.probes = None;
        }
        let Some(entry) = self.entry.take() else {
            return;
        };
        let killed = entry.clone();
        let _ = tokio::task::spawn_blocking(move || killed.sandbox.kill_all()).await;
        if let Some(network) = entry.network()
            && let Err(error) = network.set_link_up(false).await
        {
            tracing::warn!(%error, "cutting a crashed node's Pod off the network failed");
        }
        drop::<Arc<_>>(entry);
    }

    /// Graceful node shutdown: SIGTERM, the grace period (capped by the node's shutdown
    /// grace), then the Pod is terminal: `Failed` with reason `Terminated`, or `Succeeded` when
    /// every container exited 0. It is never restarted.
    pub(super) async fn shut_down(&mut self, grace_cap: Duration) {
        if self.terminal.is_none() {
            let grace = self.grace_period().min(grace_cap);
            self.stop_containers(grace).await;
            self.terminal = Some(TerminalPhase {
                phase: self.final_phase(),
                reason: Some("Terminated".into()),
                message: Some(NODE_SHUTDOWN_MESSAGE.into()),
                disruption: Some(NODE_SHUTDOWN_MESSAGE.into()),
            });
            self.release_network();
            self.publish_status().await;
        }
        self.finished = true;
    }
}
