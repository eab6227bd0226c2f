//! The control socket of a running sandbox (`DIR/control.sock`, root only). A client connects,
//! sends one request as a JSON line and reads one answer line:
//! - a [`Fault`] (`kube-sandbox fault`): `{"fault": "crash-node", "node": "node-1"}` →
//!   `{"ok": true, "message": "node node-1 crashed"}` or `{"ok": false, "message": "<why>"}`;
//! - a container to join (`kube-sandbox exec --pod`): `{"exec": {"namespace": "default",
//!   "pod": "etcd-0", "container": null}}` → `{"ok": true, "message": "", "target": {...}}`
//!   with the container's [`ContainerExec`]; the client runs the command itself.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

use crate::kubelet::{Fault, Kubelet};
use crate::runtime::ContainerExec;

/// The socket's name in the sandbox's directory.
pub const SOCKET: &str = "control.sock";

#[derive(serde::Serialize, serde::Deserialize)]
struct Answer {
    ok: bool,
    message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    target: Option<ContainerExec>,
}

/// A container of a Pod, named by namespace and Pod (and container, unless it is the only one).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ContainerRef {
    pub namespace: String,
    pub pod: String,
    pub container: Option<String>,
}

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(untagged)]
enum Request {
    Exec { exec: ContainerRef },
    Fault(Fault),
}

impl Answer {
    fn failed(message: String) -> Self {
        Self {
            ok: false,
            message,
            target: None,
        }
    }
}

/// The listening socket; dropping it stops serving and removes the file.
pub(crate) struct ControlSocket {
    path: PathBuf,
    task: tokio::task::JoinHandle<()>,
}

impl ControlSocket {
    pub fn stop(&self) {
        self.task.abort();
    }
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Serves faults on `path` (a stale socket of a killed sandbox is replaced).
pub(crate) fn serve(path: &Path, kubelet: Arc<Kubelet>) -> std::io::Result<ControlSocket> {
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let kubelet = kubelet.clone();
            tokio::spawn(async move {
                if let Err(error) = answer(stream, &kubelet).await {
                    tracing::debug!(%error, "a control connection failed");
                }
            });
        }
    });
    Ok(ControlSocket {
        path: path.to_path_buf(),
        task,
    })
}

async fn answer(stream: UnixStream, kubelet: &Kubelet) -> std::io::Result<()> {
    let (reader, mut writer) = stream.into_split();
    let mut line = String::new();
    BufReader::new(reader).read_line(&mut line).await?;
    let answer = match serde_json::from_str::<Request>(&line) {
        Ok(Request::Fault(fault)) => match fault.apply(kubelet).await {
            Ok(message) => Answer {
                ok: true,
                message,
                target: None,
            },
            Err(error) => Answer::failed(error.to_string()),
        },
        Ok(Request::Exec { exec }) => {
            match kubelet.container_exec(&exec.namespace, &exec.pod, exec.container.as_deref()) {
                Ok(target) => Answer {
                    ok: true,
                    message: String::new(),
                    target: Some(target),
                },
                Err(error) => Answer::failed(error.to_string()),
            }
        }
        Err(error) => Answer::failed(format!("neither a fault nor an exec request: {error}")),
    };
    let mut text = serde_json::to_string(&answer).map_err(std::io::Error::other)?;
    text.push('\n');
    writer.write_all(text.as_bytes()).await
}

/// Sends one request to the sandbox running in `dir` and reads its answer.
async fn ask(dir: &Path, request: &Request) -> anyhow::Result<Answer> {
    let path = dir.join(SOCKET);
    let stream = UnixStream::connect(&path).await.with_context(|| {
        format!(
            "no sandbox with nodes is running in {} ({} cannot be reached)",
            dir.display(),
            path.display()
        )
    })?;
    let (reader, mut writer) = stream.into_split();
    let mut text = serde_json::to_string(request)?;
    text.push('\n');
    writer.write_all(text.as_bytes()).await?;
    let mut line = String::new();
    BufReader::new(reader).read_line(&mut line).await?;
    let answer: Answer = serde_json::from_str(&line).context("the sandbox gave no answer")?;
    if answer.ok {
        Ok(answer)
    } else {
        anyhow::bail!(answer.message)
    }
}

/// Sends `fault` to the sandbox running in `dir`; its answer, or why it failed.
pub async fn send_fault(dir: &Path, fault: &Fault) -> anyhow::Result<String> {
    Ok(ask(dir, &Request::Fault(fault.clone())).await?.message)
}

/// Asks the sandbox running in `dir` what a command needs to run inside a container.
pub async fn container_exec(dir: &Path, container: &ContainerRef) -> anyhow::Result<ContainerExec> {
    ask(
        dir,
        &Request::Exec {
            exec: container.clone(),
        },
    )
    .await?
    .target
    .context("the sandbox named no container")
}
