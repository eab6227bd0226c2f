//! `pods/log` from the node agents: the API server asks, the Pod's sandbox answers from its
//! CRI log files (current or previous run, tail, timestamps, since, follow).

use std::sync::Arc;

use bytes::Bytes;

use super::context::KubeletContext;
use crate::apiserver::logs::{LogError, LogRequest, LogStream, PodLogs};
use crate::runtime::{LogOptions, RuntimeError};

/// The node agents' side of `pods/log`.
pub(crate) struct NodeLogs {
    pub context: Arc<KubeletContext>,
}

fn options(request: &LogRequest) -> LogOptions {
    LogOptions {
        previous: request.previous,
        tail_lines: request.tail_lines,
        timestamps: request.timestamps,
        since_time: request.since_seconds.and_then(|seconds| {
            jiff::Timestamp::now()
                .checked_sub(jiff::SignedDuration::from_secs(
                    i64::try_from(seconds).unwrap_or(i64::MAX),
                ))
                .ok()
        }),
        limit_bytes: None,
    }
}

fn log_error(request: &LogRequest, error: RuntimeError) -> LogError {
    match error {
        RuntimeError::NoSuchContainer(_) => LogError::WaitingToStart {
            pod: request.pod.clone(),
            container: request.container.clone(),
            reason: "ContainerCreating".into(),
        },
        RuntimeError::NoLog { previous: true, .. } => LogError::NoPrevious {
            pod: request.pod.clone(),
            container: request.container.clone(),
        },
        other => LogError::Other(other.to_string()),
    }
}

impl NodeLogs {
    fn sandbox(&self, request: &LogRequest) -> Result<Arc<super::context::PodEntry>, LogError> {
        self.context
            .pods
            .get(&request.namespace, &request.pod)
            .ok_or_else(|| LogError::WaitingToStart {
                pod: request.pod.clone(),
                container: request.container.clone(),
                reason: "ContainerCreating".into(),
            })
    }
}

#[async_trait::async_trait]
impl PodLogs for NodeLogs {
    async fn read(&self, request: &LogRequest) -> Result<Bytes, LogError> {
        let entry = self.sandbox(request)?;
        let owned = request.clone();
        let read = tokio::task::spawn_blocking(move || {
            entry.sandbox.read_log(&owned.container, &options(&owned))
        })
        .await
        .map_err(|error| LogError::Other(error.to_string()))?;
        read.map(Bytes::from)
            .map_err(|error| log_error(request, error))
    }

    async fn follow(&self, request: &LogRequest) -> Result<LogStream, LogError> {
        let entry = self.sandbox(request)?;
        let stream = entry
            .sandbox
            .follow_log(&request.container, options(request))
            .map_err(|error| log_error(request, error))?;
        Ok(Box::pin(stream))
    }
}
