//! Containers of a Pod: init containers one after another, then every container, restarted by
//! the restart policy with the CrashLoopBackOff back-off; image and configuration errors as
//! the kubelet reports them; probes and their consequences.

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::Container;
use kube::runtime::events::EventType;

use super::super::backoff::go_duration;
use super::super::env::{PodAddresses, container_env, referenced_objects, service_env};
use super::super::status::{self, ContainerRecord, Ended, RecordState, TerminalPhase};
use super::super::volumes::volume_mounts;
use super::{ContainerSlot, PodWorker};
use crate::runtime::{ContainerConfig, ContainerState, Termination};

/// What the runtime says of a container's latest run.
enum RunState {
    NeverRan,
    Running,
    Exited(Termination),
}

/// Whether a container that ended with `exit_code` runs again under `policy` (init containers
/// treat `Always` as `OnFailure`: one success is enough).
pub(crate) fn restarts(policy: &str, init: bool, exit_code: i32) -> bool {
    match policy {
        "Never" => false,
        "OnFailure" => exit_code != 0,
        _ => !init || exit_code != 0,
    }
}

fn id_number(value: Option<i64>) -> Option<u32> {
    value.and_then(|v| u32::try_from(v).ok())
}

impl PodWorker {
    fn run_state(&self, index: usize) -> RunState {
        let slot = &self.slots[index];
        let status = self
            .entry
            .as_ref()
            .and_then(|e| e.sandbox.container_status(&slot.spec.name));
        match status.map(|s| s.state) {
            None => RunState::NeverRan,
            Some(ContainerState::Running { .. }) => RunState::Running,
            Some(ContainerState::Terminated(termination)) => RunState::Exited(termination),
        }
    }

    /// One pass: start what should run, decide about what ended, notice the end of the Pod.
    pub(super) async fn sync(&mut self) {
        if self.terminal.is_some() || !self.ensure_sandbox().await {
            return;
        }
        let policy = self.restart_policy();
        for index in 0..self.slots.len() {
            if !self.slots[index].init {
                continue;
            }
            match self.run_state(index) {
                RunState::Running => return,
                RunState::NeverRan => {
                    self.try_start(index, false).await;
                    return;
                }
                RunState::Exited(ended) if ended.exit_code == 0 => {
                    self.note_exit(index);
                    self.slots[index].finished = true;
                }
                RunState::Exited(ended) => {
                    self.note_exit(index);
                    if restarts(&policy, true, ended.exit_code) {
                        self.try_start(index, true).await;
                    } else {
                        self.slots[index].finished = true;
                        self.finish(status::pod_phase(&policy, &self.init_records_only(), &[]));
                    }
                    return;
                }
            }
        }
        for index in 0..self.slots.len() {
            if self.slots[index].init {
                continue;
            }
            match self.run_state(index) {
                RunState::Running if self.slots[index].image_changed => {
                    self.replace_for_new_image(index)
                }
                RunState::Running => {}
                RunState::NeverRan => self.try_start(index, false).await,
                RunState::Exited(_) if self.slots[index].restart_now => {
                    self.note_exit(index);
                    self.slots[index].restart_now = false;
                    self.try_start(index, false).await;
                }
                RunState::Exited(ended) => {
                    self.note_exit(index);
                    if restarts(&policy, false, ended.exit_code) {
                        self.try_start(index, true).await;
                    } else {
                        let slot = &mut self.slots[index];
                        slot.finished = true;
                        slot.waiting = None;
                    }
                }
            }
        }
        if self.slots.iter().filter(|s| !s.init).all(|s| s.finished) {
            let (init, containers) = self.records();
            self.finish(status::pod_phase(&policy, &init, &containers));
        }
    }

    /// Stops a container whose image changed; it starts again with the new one.
    fn replace_for_new_image(&mut self, index: usize) {
        let name = self.slots[index].spec.name.clone();
        self.node.event(
            &self.pod,
            EventType::Normal,
            "Killing",
            format!("Container {name} definition changed, will be restarted"),
        );
        let grace = self.grace_period();
        let slot = &mut self.slots[index];
        slot.image_changed = false;
        slot.restart_now = true;
        slot.probes = None;
        slot.ready = false;
        if let Some(entry) = self.entry.clone() {
            tokio::spawn(async move {
                let _ = entry.sandbox.stop_container(&name, grace).await;
            });
        }
    }

    /// Every container is done for good: the Pod is terminal and its network released.
    fn finish(&mut self, phase: &'static str) {
        let phase = if matches!(phase, "Succeeded" | "Failed") {
            phase
        } else {
            "Failed"
        };
        self.terminal = Some(TerminalPhase {
            phase,
            reason: None,
            message: None,
            disruption: None,
        });
        for slot in &mut self.slots {
            slot.probes = None;
            slot.ready = false;
        }
        self.release_network();
    }

    /// Drops the Pod's network (its address goes back to the pool); the sandbox and its logs stay.
    pub(super) fn release_network(&self) {
        if let Some(network) = self
            .entry
            .as_ref()
            .and_then(|e| e.network.lock().expect("pod network lock").take())
        {
            tokio::task::spawn_blocking(move || drop(network));
        }
    }

    /// Bookkeeping when a run is seen to have ended (from its waiter or from a sync).
    fn note_exit(&mut self, index: usize) {
        let slot = &mut self.slots[index];
        if slot.probes.is_some() || slot.ended_at.is_none() || slot.ready || slot.started {
            slot.probes = None;
            slot.ready = false;
            slot.started = false;
            slot.ended_at.get_or_insert_with(Instant::now);
        }
    }

    pub(super) fn container_exited(&mut self, container: &str, run: u32) {
        if let Some(index) = self
            .slots
            .iter()
            .position(|s| s.spec.name == container && s.runs == run)
        {
            self.slots[index].ended_at = Some(Instant::now());
            self.note_exit(index);
        }
    }

    /// Starts container `index` unless a back-off or retry says to wait; `restart` when it ran
    /// before (the CrashLoopBackOff applies).
    async fn try_start(&mut self, index: usize, restart: bool) {
        let now = Instant::now();
        let name = self.slots[index].spec.name.clone();
        let image = self.slots[index].spec.image.clone().unwrap_or_default();
        if let Some(at) = self.slots[index].retry_at {
            if now < at {
                self.wake_by(at);
                return;
            }
            self.slots[index].retry_at = None;
        }
        if restart {
            let ended = self.slots[index].ended_at.unwrap_or(now);
            if let Some(remaining) = self.backoff.remaining(&name, ended, now) {
                let delay = self.backoff.current(&name).unwrap_or_default();
                let message = format!(
                    "back-off {} restarting failed container={name} pod={}_{}({})",
                    go_duration(delay),
                    self.name(),
                    self.namespace(),
                    self.uid
                );
                if self.slots[index]
                    .waiting
                    .as_ref()
                    .is_none_or(|(reason, _)| reason != "CrashLoopBackOff")
                {
                    self.node.event(
                        &self.pod,
                        EventType::Warning,
                        "BackOff",
                        format!(
                            "Back-off restarting failed container {name} in pod {}_{}({})",
                            self.name(),
                            self.namespace(),
                            self.uid
                        ),
                    );
                }
                self.slots[index].waiting = Some(("CrashLoopBackOff".into(), Some(message)));
                self.wake_by(now + remaining);
                return;
            }
        }
        if let Err(error) = self.node.kubelet.runtime.images().resolve(&image) {
            self.image_pull_failed(index, &image, &error.to_string(), now);
            return;
        }
        let config = match self.container_config(index).await {
            Ok(config) => config,
            Err(message) => {
                self.node.event(
                    &self.pod,
                    EventType::Warning,
                    "Failed",
                    format!("Error: {message}"),
                );
                self.retry_later(index, "CreateContainerConfigError", message, now);
                return;
            }
        };
        let Some(entry) = self.entry.clone() else {
            return;
        };
        if restart {
            self.backoff.next(&name, now);
        }
        let sandbox = entry.sandbox.clone();
        let starting = config.clone();
        let started = tokio::task::spawn_blocking(move || sandbox.start_container(&starting)).await;
        let started = match started {
            Ok(result) => result.map_err(|error| (error.reason().to_string(), error.to_string())),
            Err(error) => Err(("StartError".to_string(), error.to_string())),
        };
        if let Err((reason, message)) = started {
            self.node.event(
                &self.pod,
                EventType::Warning,
                "Failed",
                format!("Error: {message}"),
            );
            self.retry_later(index, &reason, message, now);
            return;
        }
        entry
            .configs
            .lock()
            .expect("container configs lock")
            .insert(name.clone(), config.clone());
        let slot = &mut self.slots[index];
        slot.runs += 1;
        slot.image_changed = false;
        slot.waiting = None;
        slot.ended_at = None;
        slot.ready = false;
        slot.started = false;
        let run = slot.runs;
        self.node.event(
            &self.pod,
            EventType::Normal,
            "Started",
            format!("Started container {name}"),
        );
        self.watch_run(index, run, config);
    }

    /// A waiting reason, retried after the container's back-off (so a broken container does
    /// not spin).
    fn retry_later(&mut self, index: usize, reason: &str, message: String, now: Instant) {
        let key = format!("retry/{}", self.slots[index].spec.name);
        self.backoff.next(&key, now);
        let at = now + self.backoff.current(&key).unwrap_or_default();
        let slot = &mut self.slots[index];
        slot.waiting = Some((reason.to_string(), Some(message)));
        slot.retry_at = Some(at);
        self.wake_by(at);
    }

    /// `ErrImagePull` on the first failure, `ImagePullBackOff` while waiting to try again.
    fn image_pull_failed(&mut self, index: usize, image: &str, error: &str, now: Instant) {
        let key = format!("pull/{}", self.slots[index].spec.name);
        let first = self.backoff.current(&key).is_none();
        self.backoff.next(&key, now);
        let at = now + self.backoff.current(&key).unwrap_or_default();
        let (reason, message) = if first {
            self.node.event(
                &self.pod,
                EventType::Warning,
                "Failed",
                format!("Failed to pull image \"{image}\": {error}"),
            );
            ("ErrImagePull".to_string(), error.to_string())
        } else {
            self.node.event(
                &self.pod,
                EventType::Normal,
                "BackOff",
                format!("Back-off pulling image \"{image}\""),
            );
            (
                "ImagePullBackOff".to_string(),
                format!("Back-off pulling image \"{image}\": ErrImagePull: {error}"),
            )
        };
        let slot = &mut self.slots[index];
        slot.waiting = Some((reason, Some(message)));
        slot.retry_at = Some(at);
        self.wake_by(at);
    }

    /// The container as the Pod's effective spec (with the service-account mount) has it.
    pub(super) fn effective_container(&self, index: usize) -> Container {
        let name = &self.slots[index].spec.name;
        self.effective
            .as_ref()
            .and_then(|pod| pod.spec.as_ref())
            .and_then(|spec| {
                spec.init_containers
                    .iter()
                    .flatten()
                    .chain(&spec.containers)
                    .find(|c| &c.name == name)
                    .cloned()
            })
            .unwrap_or_else(|| self.slots[index].spec.clone())
    }

    /// The runtime's configuration of container `index`: environment resolved now, user and
    /// groups from the container's and the Pod's security contexts.
    async fn container_config(&self, index: usize) -> Result<ContainerConfig, String> {
        let container = self.effective_container(index);
        let mut pod = self
            .effective
            .clone()
            .unwrap_or_else(|| (*self.pod).clone());
        // The downward API reads the Pod as it is now: labels and annotations changed since
        // admission reach the next run's environment, as with the real kubelet.
        pod.metadata = self.pod.metadata.clone();
        let namespace = self.namespace();
        let kubelet = &self.node.kubelet;
        let (config_maps, secrets) = referenced_objects(&pod);
        let objects = kubelet
            .pod_objects(&namespace, &config_maps, &secrets)
            .await
            .map_err(|error| format!("the API server did not answer: {error}"))?;
        let spec = pod.spec.clone().unwrap_or_default();
        let services: Vec<Arc<k8s_openapi::api::core::v1::Service>> = kubelet.services.state();
        let services: Vec<&k8s_openapi::api::core::v1::Service> =
            services.iter().map(Arc::as_ref).collect();
        let links = service_env(
            &namespace,
            spec.enable_service_links.unwrap_or(true),
            &services,
        );
        let network = self.entry.as_ref().and_then(|e| e.network());
        let addresses = PodAddresses {
            pod_ip: self.pod_ip(network.as_deref()),
            host_ip: self.node.host_ip,
        };
        let env = container_env(&pod, &container, addresses, &objects, &links).map_err(|e| e.0)?;
        let pod_security = spec.security_context.clone().unwrap_or_default();
        let security = container.security_context.clone().unwrap_or_default();
        let run_as_user = security.run_as_user.or(pod_security.run_as_user);
        let non_root = security
            .run_as_non_root
            .or(pod_security.run_as_non_root)
            .unwrap_or(false);
        // Mapped images have no USER of their own: they run as root unless told otherwise.
        if non_root && run_as_user.unwrap_or(0) == 0 {
            return Err(match run_as_user {
                Some(_) => format!(
                    "container's runAsUser breaks non-root policy (pod: \"{}_{}({})\", container: {})",
                    self.name(),
                    namespace,
                    self.uid,
                    container.name
                ),
                None => "container has runAsNonRoot and image will run as root".to_string(),
            });
        }
        Ok(ContainerConfig {
            name: container.name.clone(),
            image: container.image.clone().unwrap_or_default(),
            command: container.command.clone().unwrap_or_default(),
            args: container.args.clone().unwrap_or_default(),
            env,
            working_dir: container.working_dir.clone().filter(|d| !d.is_empty()),
            run_as_user: id_number(run_as_user),
            run_as_group: id_number(security.run_as_group.or(pod_security.run_as_group)),
            supplemental_groups: pod_security
                .supplemental_groups
                .iter()
                .flatten()
                .filter_map(|g| u32::try_from(*g).ok())
                .collect(),
            privileged: security.privileged.unwrap_or(false),
            volume_mounts: volume_mounts(&container),
            termination_message_path: container
                .termination_message_path
                .clone()
                .filter(|p| !p.is_empty()),
        })
    }

    /// The termination message of run `run` (1-based) of a slot, as the kubelet makes it:
    /// what the container wrote to its `terminationMessagePath` (the file is emptied at each
    /// start, so only the current run's is read); failing that, for
    /// `terminationMessagePolicy: FallbackToLogsOnError` and a failed run, the last 80 lines
    /// of its log, at most 2048 bytes (the end is kept). Read once per run.
    fn termination_message(
        &self,
        slot: &ContainerSlot,
        run: u32,
        exit_code: i32,
    ) -> Option<String> {
        if run == 0 {
            return None;
        }
        let mut cache = slot
            .termination_messages
            .lock()
            .expect("termination messages");
        if let Some(message) = cache.get(&run) {
            return message.clone();
        }
        let sandbox = &self.entry.as_ref()?.sandbox;
        if run == slot.runs
            && let Some(message) = sandbox.termination_message(&slot.spec.name)
        {
            cache.insert(run, Some(message.clone()));
            return Some(message);
        }
        if exit_code == 0
            || slot.spec.termination_message_policy.as_deref() != Some("FallbackToLogsOnError")
        {
            return None;
        }
        let options = crate::runtime::LogOptions {
            previous: run < slot.runs,
            tail_lines: Some(80),
            ..Default::default()
        };
        // Only the current and the previous run have logs the runtime keeps.
        if run + 1 < slot.runs {
            return None;
        }
        let log = sandbox.read_log(&slot.spec.name, &options).ok()?;
        let start = log.len().saturating_sub(2048);
        let text = String::from_utf8_lossy(&log[start..]).into_owned();
        let message = (!text.is_empty()).then_some(text);
        cache.insert(run, message.clone());
        message
    }

    /// What `containerStatuses[]` says about a slot.
    pub(super) fn record_of(&self, slot: &ContainerSlot, default_reason: &str) -> ContainerRecord {
        let image = slot.spec.image.clone().unwrap_or_default();
        let status = self
            .entry
            .as_ref()
            .and_then(|e| e.sandbox.container_status(&slot.spec.name));
        let waiting = |fallback: &str| {
            let (reason, message) = slot
                .waiting
                .clone()
                .unwrap_or_else(|| (fallback.to_string(), None));
            RecordState::Waiting { reason, message }
        };
        let Some(status) = status else {
            return ContainerRecord {
                state: waiting(default_reason),
                ..ContainerRecord::waiting(&slot.spec.name, &image, default_reason)
            };
        };
        let id = |run: u32| Some(format!("sandbox://{}/{}/{run}", self.uid, slot.spec.name));
        let current_id = id(slot.runs.max(1));
        let previous_id = id(slot.runs.saturating_sub(1).max(1));
        let current_run = slot.runs.max(1);
        let previous_run = slot.runs.saturating_sub(1);
        let ended_run = |termination: &crate::runtime::Termination, run: u32, id| {
            let mut ended = Ended::from_runtime(termination, id);
            ended.message = self.termination_message(slot, run, ended.exit_code);
            ended
        };
        let (state, last) = match status.state {
            ContainerState::Running { started_at, .. } => (
                RecordState::Running { started_at },
                status
                    .last_termination
                    .as_ref()
                    .map(|t| ended_run(t, previous_run, previous_id)),
            ),
            ContainerState::Terminated(ended) => {
                let ended = ended_run(&ended, current_run, current_id.clone());
                if slot.waiting.is_some() && !slot.finished {
                    (waiting("ContainerCreating"), Some(ended))
                } else {
                    (
                        RecordState::Terminated(ended),
                        status
                            .last_termination
                            .as_ref()
                            .map(|t| ended_run(t, previous_run, previous_id)),
                    )
                }
            }
        };
        let running = matches!(state, RecordState::Running { .. });
        ContainerRecord {
            name: slot.spec.name.clone(),
            image: status.image,
            restart_count: status.restart_count,
            state,
            last_termination: last,
            ready: running && slot.ready,
            started: running && slot.started,
            container_id: current_id,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::restarts;

    #[test]
    fn restart_policy_decides_restarts() {
        assert!(restarts("Always", false, 0));
        assert!(restarts("Always", false, 1));
        assert!(
            !restarts("Always", true, 0),
            "an init container that succeeded is done"
        );
        assert!(restarts("Always", true, 1));
        assert!(!restarts("OnFailure", false, 0));
        assert!(restarts("OnFailure", false, 137));
        assert!(!restarts("Never", false, 1));
        assert!(!restarts("Never", true, 1));
    }
}
