//! Container logs for `pods/log`: the node agent implements [`PodLogs`] and registers it on the
//! server with [`ApiServer::register_pod_logs`](super::ApiServer::register_pod_logs).

use std::pin::Pin;

use bytes::Bytes;
use futures::Stream;

/// Which log a `pods/log` request asks for (its query parameters).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LogRequest {
    pub namespace: String,
    pub pod: String,
    pub container: String,
    /// The log of the previous, terminated instance of the container.
    pub previous: bool,
    /// Only the last N lines.
    pub tail_lines: Option<usize>,
    /// Only lines newer than this many seconds.
    pub since_seconds: Option<u64>,
    /// Prefix each line with its RFC 3339 timestamp.
    pub timestamps: bool,
}

/// A stream of log bytes that follows the container until it exits or the client goes away.
pub type LogStream = Pin<Box<dyn Stream<Item = std::io::Result<Bytes>> + Send>>;

/// Why there is no log to give; each becomes the error a real kubelet/API server answers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogError {
    /// The container has not started yet (a 400 "is waiting to start").
    #[error("container \"{container}\" in pod \"{pod}\" is waiting to start: {reason}")]
    WaitingToStart {
        pod: String,
        container: String,
        reason: String,
    },
    /// `previous=true` but the container never restarted.
    #[error("previous terminated container \"{container}\" in pod \"{pod}\" not found")]
    NoPrevious { pod: String, container: String },
    #[error("{0}")]
    Other(String),
}

/// The node agent's side of `pods/log`.
#[async_trait::async_trait]
pub trait PodLogs: Send + Sync {
    /// The log as it is now.
    async fn read(&self, request: &LogRequest) -> Result<Bytes, LogError>;
    /// The log so far and then every new line until the container stops.
    async fn follow(&self, request: &LogRequest) -> Result<LogStream, LogError>;
}
