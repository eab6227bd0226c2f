//! A whole sandbox control plane as a value: start it, use its kubeconfig or `kube::Client`,
//! drop it to stop everything. Many run side by side in one process, each on its own port.
//!
//! What the node agent builds on:
//! - [`Sandbox::client`] is the administrator's client; [`Sandbox::service_account_client`]
//!   one authorized by RBAC, and `POST .../serviceaccounts/<name>/token` (or
//!   [`ApiServer::issue_service_account_token`]) issues the token a Pod mounts.
//! - Pods of a node: list and watch with the field selector `spec.nodeName=<node>`; the scheduler
//!   binds through `pods/binding`; status goes through `pods/status`.
//! - A Pod bound to a node is deleted gracefully: it gets `deletionTimestamp` and
//!   `deletionGracePeriodSeconds`, and stays until the agent, having stopped it, deletes it with
//!   `gracePeriodSeconds=0`.
//! - `pods/log` reads from the [`crate::apiserver::PodLogs`] registered with
//!   [`ApiServer::register_pod_logs`]; until then it answers "waiting to start".

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use serde_json::json;

use crate::apiserver::bootstrap::create_builtin;
use crate::apiserver::{ApiServer, ApiServerConfig, RunningApiServer, kubeconfig};

/// How to start a sandbox.
#[derive(Debug, Clone)]
pub struct SandboxOptions {
    /// Where the kubeconfig (and later the nodes' state) is written.
    pub dir: PathBuf,
    /// Number of Node objects to create, labelled with hostname and zone.
    pub nodes: usize,
    pub apiserver: ApiServerConfig,
}

impl SandboxOptions {
    /// A sandbox in `dir` on a free port with three nodes.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            nodes: 3,
            apiserver: ApiServerConfig::default(),
        }
    }

    pub fn port(mut self, port: u16) -> Self {
        self.apiserver.port = port;
        self
    }

    pub fn nodes(mut self, nodes: usize) -> Self {
        self.nodes = nodes;
        self
    }
}

/// A running sandbox. Dropping it stops its API server and everything it started.
pub struct Sandbox {
    api: RunningApiServer,
    kubeconfig: String,
    kubeconfig_path: PathBuf,
    client: kube::Client,
}

/// The zones nodes are spread over, round robin.
const ZONES: &[&str] = &["zone-a", "zone-b", "zone-c"];

impl Sandbox {
    /// Starts the control plane, writes `dir/kubeconfig` and creates the nodes.
    pub async fn start(options: SandboxOptions) -> anyhow::Result<Self> {
        crate::apiserver::tls::install_crypto_provider();
        std::fs::create_dir_all(&options.dir)
            .with_context(|| format!("creating {}", options.dir.display()))?;
        let api = RunningApiServer::start(options.apiserver.clone()).await?;
        let kubeconfig = kubeconfig::render(&api.url(), &api.ca_pem, api.admin_token());
        let kubeconfig_path = options.dir.join("kubeconfig");
        std::fs::write(&kubeconfig_path, &kubeconfig)
            .with_context(|| format!("writing {}", kubeconfig_path.display()))?;
        for index in 1..=options.nodes {
            create_node(
                &api.server,
                &format!("node-{index}"),
                ZONES[(index - 1) % ZONES.len()],
            )?;
        }
        let client = client_for(&kubeconfig).await?;
        Ok(Self {
            api,
            kubeconfig,
            kubeconfig_path,
            client,
        })
    }

    /// The administrator's client configuration, to build a client with other settings (for
    /// example without kube-rs' default retries of 429 answers).
    pub async fn client_config(&self) -> anyhow::Result<kube::Config> {
        config_for(&self.kubeconfig).await
    }

    /// A client with the administrator's identity.
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The kubeconfig's text.
    pub fn kubeconfig(&self) -> &str {
        &self.kubeconfig
    }

    /// `dir/kubeconfig`, for `kubectl --kubeconfig`.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig_path
    }

    /// `https://127.0.0.1:<port>`
    pub fn url(&self) -> String {
        self.api.url()
    }

    /// The cluster CA in PEM.
    pub fn ca_pem(&self) -> &str {
        &self.api.ca_pem
    }

    /// The API server itself: for the node agent to register logs and issue tokens.
    pub fn api_server(&self) -> &Arc<ApiServer> {
        &self.api.server
    }

    /// A client that authenticates as a service account, with a token issued as TokenRequest
    /// would, so its requests are authorized by RBAC.
    pub async fn service_account_client(
        &self,
        namespace: &str,
        name: &str,
    ) -> anyhow::Result<kube::Client> {
        let token = self.api.server.issue_service_account_token(namespace, name);
        let text = kubeconfig::render(&self.api.url(), &self.api.ca_pem, &token);
        client_for(&text).await
    }

    /// Stops serving now (dropping does the same).
    pub fn stop(&self) {
        self.api.stop();
    }
}

async fn config_for(kubeconfig_text: &str) -> anyhow::Result<kube::Config> {
    let parsed = kube::config::Kubeconfig::from_yaml(kubeconfig_text)?;
    Ok(
        kube::Config::from_custom_kubeconfig(parsed, &kube::config::KubeConfigOptions::default())
            .await?,
    )
}

async fn client_for(kubeconfig_text: &str) -> anyhow::Result<kube::Client> {
    Ok(kube::Client::try_from(config_for(kubeconfig_text).await?)?)
}

/// A Node object, Ready, labelled the way the scheduler and topology spread read it.
fn create_node(server: &ApiServer, name: &str, zone: &str) -> anyhow::Result<()> {
    let now = crate::apiserver::objects::metadata::now();
    let node = json!({
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "topology.kubernetes.io/zone": zone,
        }},
        "spec": {},
    });
    create_builtin(server, "", "nodes", "", node)?;
    let kind = server
        .registry
        .get("", "nodes")
        .context("nodes are not served")?;
    let capacity =
        json!({"cpu": "8", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"});
    crate::apiserver::objects::update_with(
        server,
        &kind,
        "v1",
        "",
        name,
        Some("status"),
        &crate::apiserver::objects::WriteOptions::internal("kube-sandbox"),
        &mut |current| {
            let mut updated = current.clone();
            updated["status"] = json!({
                "capacity": capacity,
                "allocatable": capacity,
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
                    "lastHeartbeatTime": now, "lastTransitionTime": now}],
                "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": name}],
                "nodeInfo": {"kubeletVersion": "v1.32.0-sandbox", "operatingSystem": "linux", "architecture": "amd64",
                    "containerRuntimeVersion": "sandbox://0.1", "kernelVersion": "", "osImage": "kube-sandbox",
                    "kubeProxyVersion": "", "machineID": "", "systemUUID": "", "bootID": ""},
            });
            Ok(updated)
        },
    )?;
    Ok(())
}
