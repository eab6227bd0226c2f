//! A container run's watchers: the task that reports its end, its probes, and what a probe
//! failure does (the container is killed with the probe's grace and restarted by policy).

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::events::EventType;

use super::super::backoff::go_duration;
use super::super::context::PodEntry;
use super::super::probes::{self, ContainerProbes, ExecProbe, ProbeEvent, ProbeTarget};
use super::{AbortOnDrop, PodWorker, WorkerEvent};
use crate::runtime::ContainerConfig;

impl PodWorker {
    /// Watches run `run` of container `index`: its end, and its probes.
    pub(super) fn watch_run(&mut self, index: usize, run: u32, config: ContainerConfig) {
        let Some(entry) = self.entry.clone() else {
            return;
        };
        let name = config.name.clone();
        let events = self.events.clone();
        let token = self.node.token.clone();
        let sandbox = entry.sandbox.clone();
        let waited = name.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = sandbox.wait_container(&waited) => {
                    let _ = events.send(WorkerEvent::Exited { container: waited, run });
                }
                () = token.cancelled() => {}
            }
        });
        let container = self.effective_container(index);
        let probes = ContainerProbes::of(&container);
        let network = entry.network();
        let target = ProbeTarget {
            sockets: self.node.kubelet.network.sockets().clone(),
            pod_ip: self.pod_ip(network.as_deref()).unwrap_or(self.node.host_ip),
            exec: exec_probe(entry.clone(), config),
            in_flight: probes::in_flight(),
        };
        let events = self.events.clone();
        let task = tokio::spawn(probes::supervise(probes, target, move |event| {
            let _ = events.send(WorkerEvent::Probe {
                container: name.clone(),
                run,
                event,
            });
        }));
        self.slots[index].probes = Some(AbortOnDrop(task));
    }

    pub(super) async fn probe_event(&mut self, container: &str, run: u32, event: ProbeEvent) {
        let Some(index) = self
            .slots
            .iter()
            .position(|s| s.spec.name == container && s.runs == run)
        else {
            return;
        };
        let has_readiness_probe = self.slots[index].spec.readiness_probe.is_some();
        match event {
            ProbeEvent::Started => {
                let slot = &mut self.slots[index];
                slot.started = true;
                if !has_readiness_probe {
                    slot.ready = true;
                }
            }
            ProbeEvent::Ready(ready) => self.slots[index].ready = ready,
            ProbeEvent::Unhealthy { message } => {
                self.node
                    .event(&self.pod, EventType::Warning, "Unhealthy", message);
            }
            ProbeEvent::StartupFailed | ProbeEvent::LivenessFailed => {
                let which = if event == ProbeEvent::StartupFailed {
                    "startup"
                } else {
                    "liveness"
                };
                self.node.event(
                    &self.pod,
                    EventType::Normal,
                    "Killing",
                    format!("Container {container} failed {which} probe, will be restarted"),
                );
                self.slots[index].probes = None;
                self.slots[index].ready = false;
                let grace = self.probe_grace(index);
                if let Some(entry) = self.entry.clone() {
                    let name = container.to_string();
                    tokio::spawn(async move {
                        let _ = entry.sandbox.stop_container(&name, grace).await;
                    });
                }
            }
        }
    }

    /// The grace of a container killed by a probe: the probe's own, else the Pod's.
    fn probe_grace(&self, index: usize) -> Duration {
        let spec = &self.slots[index].spec;
        let probe_grace = [&spec.liveness_probe, &spec.startup_probe]
            .into_iter()
            .flatten()
            .find_map(|p| p.termination_grace_period_seconds);
        let seconds = probe_grace
            .or_else(|| {
                self.pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.termination_grace_period_seconds)
            })
            .unwrap_or(30);
        Duration::from_secs(u64::try_from(seconds).unwrap_or(0))
    }
}

/// Runs exec probes in the container through the runtime.
fn exec_probe(entry: Arc<PodEntry>, config: ContainerConfig) -> ExecProbe {
    Arc::new(move |command: Vec<String>, timeout: Duration| {
        let entry = entry.clone();
        let config = config.clone();
        Box::pin(async move {
            let mut command_line = entry
                .sandbox
                .exec_command(&config, &command)
                .map_err(|e| e.to_string())?;
            command_line
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            let child = tokio::process::Command::from(command_line)
                .kill_on_drop(true)
                .spawn()
                .map_err(|error| {
                    format!("exec {command:?} in container {}: {error}", config.name)
                })?;
            match tokio::time::timeout(timeout, child.wait_with_output()).await {
                Ok(Ok(output)) if output.status.success() => Ok(()),
                Ok(Ok(output)) => {
                    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
                    text.push_str(&String::from_utf8_lossy(&output.stderr));
                    Err(format!(
                        "command {command:?} exited with {}: {}",
                        output.status.code().unwrap_or(-1),
                        text.trim()
                    ))
                }
                Ok(Err(error)) => Err(error.to_string()),
                Err(_) => Err(format!(
                    "command {command:?} timed out after {}",
                    go_duration(timeout)
                )),
            }
        })
    })
}
