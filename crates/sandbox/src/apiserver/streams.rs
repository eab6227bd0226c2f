//! `pods/exec` and `pods/portforward`: the API server upgrades the request to a WebSocket and
//! speaks Kubernetes' channel protocols itself; the node agent implements [`PodStreams`] (run a
//! command in a container, open a TCP connection in the cluster network) and registers it with
//! [`ApiServer::register_pod_streams`](super::ApiServer::register_pod_streams).

use std::net::SocketAddr;

/// What a `pods/exec` request asks for (its query parameters).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExecRequest {
    pub namespace: String,
    pub pod: String,
    pub container: String,
    pub command: Vec<String>,
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    /// Asked for; kube-sandbox has no terminals, so the command runs on pipes all the same.
    pub tty: bool,
}

/// The node agent's side of `pods/exec` and `pods/portforward`.
#[async_trait::async_trait]
pub trait PodStreams: Send + Sync {
    /// A command that runs inside the container (its namespaces, root, user and environment);
    /// the server sets up its pipes and spawns it. The error says why it cannot run.
    fn exec_command(&self, request: &ExecRequest) -> Result<std::process::Command, String>;
    /// A TCP connection to `address` (a Pod's IP and port) from inside the cluster network.
    async fn connect(&self, address: SocketAddr) -> std::io::Result<tokio::net::TcpStream>;
}
