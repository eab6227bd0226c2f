//! The Pod's sandbox: taking over the one a stopped node agent left, or making a new one
//! (service-account token, claims, files, network, `/etc` files), and keeping the files of
//! secret and configMap volumes up to date.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use jiff::Timestamp;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, ServiceAccount};
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use kube::runtime::events::EventType;

use super::super::context::PodEntry;
use super::super::env::{PodAddresses, referenced_objects};
use super::super::pod_dns::{pod_fqdn, pod_hostname, pod_resolv_conf};
use super::super::status::TerminalPhase;
use super::super::volumes::{
    VolumeInputs, pod_volumes, token_audiences, volume_files, with_service_account_volume,
};
use super::PodWorker;
use crate::runtime::{PodSandboxConfig, hosts_file};
use crate::scheduler::is_terminal;

/// Why the sandbox could not be made: the event reason and its message.
type SetupFailure = (&'static str, String);

impl PodWorker {
    /// A Pod the API already shows terminal is never run again; a sandbox a stopped node agent
    /// left behind (node crash or shutdown) is taken over, with its containers' history.
    pub(super) fn adopt_or_inherit(&mut self) {
        if is_terminal(&self.pod) {
            // Its status is final: this worker only keeps its logs and sees it deleted.
            self.status_final = true;
            let status = self.pod.status.clone().unwrap_or_default();
            self.terminal = Some(TerminalPhase {
                phase: if status.phase.as_deref() == Some("Succeeded") {
                    "Succeeded"
                } else {
                    "Failed"
                },
                reason: status.reason,
                message: status.message,
                disruption: None,
            });
        }
        let Some(entry) = self.node.kubelet.pods.by_uid(&self.uid) else {
            return;
        };
        for slot in &mut self.slots {
            if let Some(status) = entry.sandbox.container_status(&slot.spec.name) {
                slot.runs = status.restart_count + 1;
                slot.ended_at = Some(Instant::now());
                slot.finished = slot.init
                    && matches!(&status.state, crate::runtime::ContainerState::Terminated(t) if t.exit_code == 0);
            }
        }
        if self.terminal.is_none()
            && let Some(network) = entry.network()
        {
            // A crashed node took its Pods off the network; they come back with it.
            tokio::spawn(async move {
                if let Err(error) = network.set_link_up(true).await {
                    tracing::warn!(%error, "bringing a Pod's link up failed");
                }
            });
        }
        self.start_time = self
            .pod
            .status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .map(|t| t.0);
        self.effective = Some(entry.effective.clone());
        self.entry = Some(entry);
    }

    /// Makes the sandbox if there is none yet; false (and a retry planned) when it failed.
    pub(super) async fn ensure_sandbox(&mut self) -> bool {
        if self.entry.is_some() {
            return true;
        }
        let now = Instant::now();
        if let Some(at) = self.setup_retry_at
            && now < at
        {
            self.wake_by(at);
            return false;
        }
        match self.create_sandbox().await {
            Ok(entry) => {
                self.node.kubelet.pods.insert(entry.clone());
                self.node.kubelet.pods.admit_to_cuts(&entry).await;
                self.entry = Some(entry);
                self.setup_retry_at = None;
                self.start_time.get_or_insert_with(Timestamp::now);
                true
            }
            Err((reason, message)) => {
                tracing::debug!(pod = %self.name(), reason, %message, "the Pod sandbox could not be made");
                self.node
                    .event(&self.pod, EventType::Warning, reason, message);
                self.setup_retry.next("sandbox", now);
                let at = now + self.setup_retry.current("sandbox").unwrap_or_default();
                self.setup_retry_at = Some(at);
                self.wake_by(at);
                false
            }
        }
    }

    async fn create_sandbox(&mut self) -> Result<Arc<PodEntry>, SetupFailure> {
        let kubelet = self.node.kubelet.clone();
        let namespace = self.namespace();
        let pod = self.pod.clone();
        let spec = pod.spec.clone().unwrap_or_default();
        let account = spec
            .service_account_name
            .clone()
            .unwrap_or_else(|| "default".into());
        let api_failure = |error: kube::Error| {
            (
                "FailedMount",
                format!("the API server did not answer: {error}"),
            )
        };
        let automount = if spec.automount_service_account_token == Some(false) {
            Some(false)
        } else {
            Api::<ServiceAccount>::namespaced(kubelet.client.clone(), &namespace)
                .get_opt(&account)
                .await
                .map_err(api_failure)?
                .and_then(|account| account.automount_service_account_token)
        };
        let effective = with_service_account_volume(&pod, automount);
        for volume in effective
            .spec
            .iter()
            .flat_map(|s| s.volumes.iter().flatten())
        {
            let Some(claim) = &volume.persistent_volume_claim else {
                continue;
            };
            let found =
                Api::<PersistentVolumeClaim>::namespaced(kubelet.client.clone(), &namespace)
                    .get_opt(&claim.claim_name)
                    .await
                    .map_err(api_failure)?;
            let problem = match found {
                None => Some(format!(
                    "persistentvolumeclaim \"{}\" not found",
                    claim.claim_name
                )),
                Some(found) if found.metadata.deletion_timestamp.is_some() => Some(format!(
                    "persistentvolumeclaim \"{}\" is being deleted",
                    claim.claim_name
                )),
                Some(_) => None,
            };
            if let Some(problem) = problem {
                return Err((
                    "FailedMount",
                    format!(
                        "MountVolume.SetUp failed for volume \"{}\" : {problem}",
                        volume.name
                    ),
                ));
            }
        }
        let (config_maps, secrets) = referenced_objects(&effective);
        let objects = kubelet
            .pod_objects(&namespace, &config_maps, &secrets)
            .await
            .map_err(api_failure)?;
        let mut inputs = VolumeInputs {
            objects,
            ..VolumeInputs::default()
        };
        for audience in token_audiences(&effective) {
            let request = TokenRequest {
                spec: TokenRequestSpec {
                    audiences: audience.iter().cloned().collect(),
                    expiration_seconds: Some(3607),
                    ..TokenRequestSpec::default()
                },
                ..TokenRequest::default()
            };
            let issued = Api::<ServiceAccount>::namespaced(kubelet.client.clone(), &namespace)
                .create_token_request(&account, &PostParams::default(), &request)
                .await
                .map_err(|error| ("FailedMount", format!("failed to fetch token: {error}")))?;
            let token = issued.status.map(|s| s.token).unwrap_or_default();
            inputs.tokens.insert(audience, token);
        }
        let addresses = PodAddresses {
            pod_ip: None,
            host_ip: self.node.host_ip,
        };
        let volumes = pod_volumes(&effective, addresses, &inputs)
            .map_err(|error| ("FailedMount", error.to_string()))?;
        let host_network = spec.host_network.unwrap_or(false);
        let network = if host_network {
            None
        } else {
            let attached = kubelet.network.attach_pod().await.map_err(|error| {
                (
                    "FailedCreatePodSandBox",
                    format!("Failed to create pod sandbox: setting up the Pod network: {error}"),
                )
            })?;
            Some(Arc::new(attached))
        };
        let ip = network.as_ref().map_or(self.node.host_ip, |n| n.ip());
        let netns = network
            .as_ref()
            .map_or_else(|| kubelet.network.namespace(), |n| n.namespace());
        let config = kubelet.network.config();
        let hostname = pod_hostname(&pod);
        let aliases: Vec<(String, Vec<String>)> = spec
            .host_aliases
            .iter()
            .flatten()
            .map(|alias| {
                (
                    alias.ip.clone(),
                    alias.hostnames.clone().unwrap_or_default(),
                )
            })
            .collect();
        let machine_resolv = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
        let sandbox_config = PodSandboxConfig {
            uid: self.uid.clone(),
            namespace: namespace.clone(),
            name: pod.name_any(),
            hostname: hostname.clone(),
            network: netns,
            hosts_file: hosts_file(
                ip,
                &hostname,
                pod_fqdn(&pod, &config.cluster_domain).as_deref(),
                &aliases,
            ),
            resolv_conf: pod_resolv_conf(
                &pod,
                &config.cluster_domain,
                config.dns_server,
                &machine_resolv,
            ),
            fs_group: spec
                .security_context
                .as_ref()
                .and_then(|s| s.fs_group)
                .and_then(|g| u32::try_from(g).ok()),
            volumes,
        };
        let runtime = kubelet.runtime.clone();
        let created = tokio::task::spawn_blocking(move || runtime.create_pod(sandbox_config))
            .await
            .map_err(|error| ("FailedCreatePodSandBox", error.to_string()))?;
        let sandbox = match created {
            Ok(sandbox) => sandbox,
            Err(error) => {
                let failure = (
                    "FailedCreatePodSandBox",
                    format!("Failed to create pod sandbox: {error}"),
                );
                // The veth goes with the network; dropping it runs `ip`, so not on this thread.
                tokio::task::spawn_blocking(move || drop(network));
                return Err(failure);
            }
        };
        for volume in effective
            .spec
            .iter()
            .flat_map(|s| s.volumes.iter().flatten())
        {
            if let Ok(Some(files)) = volume_files(&effective, volume, addresses, &inputs) {
                self.volume_files.insert(volume.name.clone(), files);
            }
        }
        self.volume_inputs = Some(inputs);
        self.effective = Some(effective.clone());
        Ok(Arc::new(PodEntry {
            uid: self.uid.clone(),
            namespace,
            name: pod.name_any(),
            node: self.node.name.clone(),
            effective,
            sandbox: Arc::new(sandbox),
            network: Mutex::new(network),
            configs: Mutex::new(Default::default()),
        }))
    }

    /// Rewrites the files of secret, configMap and projected volumes whose sources changed;
    /// a source that disappeared keeps its last content, as the kubelet keeps it.
    pub(super) fn refresh_volume_files(&mut self) {
        let (Some(entry), Some(effective), Some(previous)) =
            (&self.entry, &self.effective, &self.volume_inputs)
        else {
            return;
        };
        if self.terminal.is_some() {
            return;
        }
        let namespace = self.namespace();
        let (config_maps, secrets) = referenced_objects(effective);
        let cached = self
            .node
            .kubelet
            .cached_pod_objects(&namespace, &config_maps, &secrets);
        let mut inputs = previous.clone();
        inputs.objects.config_maps.extend(cached.config_maps);
        inputs.objects.secrets.extend(cached.secrets);
        let addresses = PodAddresses {
            pod_ip: None,
            host_ip: self.node.host_ip,
        };
        for volume in effective
            .spec
            .iter()
            .flat_map(|s| s.volumes.iter().flatten())
        {
            let Ok(Some(files)) = volume_files(effective, volume, addresses, &inputs) else {
                continue;
            };
            if self.volume_files.get(&volume.name) == Some(&files) {
                continue;
            }
            match entry.sandbox.refresh_files(&volume.name, &files) {
                Ok(()) => {
                    self.volume_files.insert(volume.name.clone(), files);
                }
                Err(error) => {
                    tracing::warn!(pod = %self.name(), volume = %volume.name, %error, "refreshing volume files failed")
                }
            }
        }
        self.volume_inputs = Some(inputs);
    }
}
