//! The control socket of a running sandbox (`DIR/control.sock`, root only): `kube-sandbox
//! fault` connects, sends one [`Fault`] as a JSON line and reads one answer line,
//! `{"ok": true, "message": "node node-1 crashed"}` or `{"ok": false, "message": "<why>"}`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

use crate::kubelet::{Fault, Kubelet};

/// The socket's name in the sandbox's directory.
pub const SOCKET: &str = "control.sock";

#[derive(serde::Serialize, serde::Deserialize)]
struct Answer {
    ok: bool,
    message: String,
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
    let answer = match serde_json::from_str::<Fault>(&line) {
        Ok(fault) => match fault.apply(kubelet).await {
            Ok(message) => Answer { ok: true, message },
            Err(error) => Answer {
                ok: false,
                message: error.to_string(),
            },
        },
        Err(error) => Answer {
            ok: false,
            message: format!("not a fault: {error}"),
        },
    };
    let mut text = serde_json::to_string(&answer).map_err(std::io::Error::other)?;
    text.push('\n');
    writer.write_all(text.as_bytes()).await
}

/// Sends `fault` to the sandbox running in `dir`; its answer, or why it failed.
pub async fn send_fault(dir: &Path, fault: &Fault) -> anyhow::Result<String> {
    let path = dir.join(SOCKET);
    let stream = UnixStream::connect(&path).await.with_context(|| {
        format!(
            "no sandbox with nodes is running in {} ({} cannot be reached)",
            dir.display(),
            path.display()
        )
    })?;
    let (reader, mut writer) = stream.into_split();
    let mut request = serde_json::to_string(fault)?;
    request.push('\n');
    writer.write_all(request.as_bytes()).await?;
    let mut line = String::new();
    BufReader::new(reader).read_line(&mut line).await?;
    let answer: Answer = serde_json::from_str(&line).context("the sandbox gave no answer")?;
    if answer.ok {
        Ok(answer.message)
    } else {
        anyhow::bail!(answer.message)
    }
}
