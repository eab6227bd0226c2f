//! What the controller reads of an agent: where the file goes on the claim, whether the claim
//! is usable, the agent's result line in its termination message, and how its Pod ended.

use std::path::{Component, Path};

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use serde::{Deserialize, Serialize};

use super::super::decide::{Checked, Failure, Source, Stored};
use super::{CONTAINER, RESULT_MARK};
use crate::domain::location::object_key;

/// The file's path inside the claim: `<subPath>/<name>.db`, as the reference names it (no
/// doubled slashes; no subPath means `<name>.db` at the volume's root). A subPath that climbs
/// out of the volume (`..`) is refused.
pub fn relative_path(sub_path: Option<&str>, snapshot: &str) -> Result<String, Failure> {
    if let Some(sub) = sub_path
        && Path::new(sub)
            .components()
            .any(|c| matches!(c, Component::ParentDir))
    {
        return Err(Failure::InvalidDestination {
            detail: format!("destination.pvc.subPath {sub:?} climbs out of the volume (..)"),
        });
    }
    Ok(object_key(sub_path, snapshot))
}

/// What a finished agent says: the file it wrote, or why it failed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum AgentResult {
    Saved(Box<Saved>),
    Failed(Failure),
    /// The file is in place but its read-back failed (`VerificationFailed`, say an identity
    /// that opens none of its age stanzas): the snapshot is Failed with the file named.
    Unverified {
        stored: Box<Stored>,
        failure: Failure,
    },
    /// `snapshot-remove`: what happened to the file.
    Removed {
        said: String,
    },
    /// `snapshot-check` (verify `Restore`): what the restored etcd served.
    Served {
        revision: i64,
        keys: i64,
    },
}

/// A snapshot file written, fsynced and read back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Saved {
    /// The file (its bytes), etcd's bytes, the layers, what the pages hold.
    #[serde(flatten)]
    pub stored: Stored,
    pub member: String,
    /// The revision the member reported just before the stream (the fallback when the
    /// pages could not be read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asked_revision: Option<i64>,
    pub etcd_version: Option<String>,
    /// The read-back check.
    pub checked: Checked,
}

impl Saved {
    pub fn stored(&self) -> Stored {
        self.stored.clone()
    }

    pub fn source(&self) -> Source {
        Source {
            member: self.member.clone(),
            revision: self.asked_revision,
            etcd_version: self.etcd_version.clone(),
        }
    }
}

/// The termination message line (under the kubelet's 4096 bytes: long details are cut).
pub fn result_line(result: &AgentResult) -> String {
    let mut result = result.clone();
    if let AgentResult::Failed(failure) | AgentResult::Unverified { failure, .. } = &mut result {
        shorten(failure);
    }
    format!(
        "{RESULT_MARK} {}",
        serde_json::to_string(&result).unwrap_or_default()
    )
}

pub(super) fn shorten(failure: &mut Failure) {
    let cut = |s: &mut String| {
        if s.len() > 1500 {
            let mut at = 1500;
            while !s.is_char_boundary(at) {
                at -= 1;
            }
            s.truncate(at);
            s.push_str("...");
        }
    };
    match failure {
        Failure::Etcd { detail, .. }
        | Failure::NoSpace { detail, .. }
        | Failure::Volume { detail }
        | Failure::VerificationFailed { detail }
        | Failure::AgentFailed { detail }
        | Failure::InvalidDestination { detail }
        | Failure::EncryptionSecret { detail }
        | Failure::Encoding { detail }
        | Failure::ClusterUnavailable { detail, .. } => cut(detail),
        _ => {}
    }
}

/// The agent's result from its termination message: the last `EtcdSnapshotResult` line, or
/// `None` when there is none (the agent died before writing it; the message then holds the
/// end of its log, which is shown, never parsed).
pub fn parse_result(message: &str) -> Option<AgentResult> {
    message
        .lines()
        .rev()
        .find_map(|line| line.trim().strip_prefix(RESULT_MARK))
        .and_then(|json| serde_json::from_str(json.trim()).ok())
}

/// What the controller makes of the agent's Pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodOutcome {
    /// Still to start or running: look again shortly.
    Running,
    /// The agent finished (its own result, or why it could not give one).
    Done(AgentResult),
}

/// How long a snapshot Pod may stay unstarted before the snapshot fails with the Pod's own
/// reason (an unbound claim, an image that cannot be pulled, no node).
pub const START_DEADLINE_SECONDS: i64 = 120;

/// The outcome of the agent's Pod: its container's termination message when it ended; a
/// failure when it ended without a result, or has not started after [`START_DEADLINE_SECONDS`]
/// (the claim not bound says so). `age_seconds` is how long the Pod exists.
pub fn pod_outcome(
    pod: &Pod,
    claim: Option<&PersistentVolumeClaim>,
    claim_name: &str,
    age_seconds: i64,
) -> PodOutcome {
    let status = pod.status.clone().unwrap_or_default();
    let container = status
        .container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == CONTAINER);
    let terminated = container
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.terminated.as_ref());
    if let Some(ended) = terminated {
        let message = ended.message.clone().unwrap_or_default();
        if let Some(result) = parse_result(&message) {
            return PodOutcome::Done(result);
        }
        let last = message
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("no output");
        return PodOutcome::Done(AgentResult::Failed(Failure::AgentFailed {
            detail: format!(
                "the snapshot Pod's agent exited with code {} without a result: {}",
                ended.exit_code,
                last.trim()
            ),
        }));
    }
    match status.phase.as_deref() {
        Some("Failed") | Some("Succeeded") => {
            return PodOutcome::Done(AgentResult::Failed(Failure::AgentFailed {
                detail: format!(
                    "the snapshot Pod ended ({}) without a result{}",
                    status.reason.as_deref().unwrap_or("no reason given"),
                    status
                        .message
                        .as_deref()
                        .map(|m| format!(": {m}"))
                        .unwrap_or_default()
                ),
            }));
        }
        Some("Running") => return PodOutcome::Running,
        _ => {}
    }
    let started = container
        .and_then(|c| c.state.as_ref())
        .is_some_and(|s| s.running.is_some());
    if started || age_seconds < START_DEADLINE_SECONDS {
        return PodOutcome::Running;
    }
    let claim_phase = claim
        .and_then(|c| c.status.as_ref())
        .and_then(|s| s.phase.clone());
    if claim.is_none() {
        return PodOutcome::Done(AgentResult::Failed(Failure::ClaimNotFound {
            claim: claim_name.to_string(),
        }));
    }
    if claim_phase.as_deref() != Some("Bound") {
        return PodOutcome::Done(AgentResult::Failed(Failure::ClaimNotBound {
            claim: claim_name.to_string(),
            phase: claim_phase.unwrap_or_else(|| "Pending".to_string()),
        }));
    }
    let why = not_started_reason(
        container
            .and_then(|c| c.state.as_ref())
            .and_then(|s| s.waiting.as_ref()),
        &status,
    );
    PodOutcome::Done(AgentResult::Failed(Failure::AgentFailed {
        detail: format!("the snapshot Pod did not start within {START_DEADLINE_SECONDS} s: {why}"),
    }))
}

/// The claim's part of the decision before a Pod is made: it must exist and not be lost or
/// deleting. A Pending claim is given its chance (a `WaitForFirstConsumer` class binds it
/// only once the Pod is scheduled); [`pod_outcome`] fails it if it never binds.
pub fn claim_usable(claim: Option<&PersistentVolumeClaim>, name: &str) -> Result<(), Failure> {
    let Some(claim) = claim else {
        return Err(Failure::ClaimNotFound {
            claim: name.to_string(),
        });
    };
    if claim.metadata.deletion_timestamp.is_some() {
        return Err(Failure::ClaimNotBound {
            claim: name.to_string(),
            phase: "Terminating".to_string(),
        });
    }
    match claim.status.as_ref().and_then(|s| s.phase.as_deref()) {
        Some("Lost") => Err(Failure::ClaimNotBound {
            claim: name.to_string(),
            phase: "Lost".to_string(),
        }),
        _ => Ok(()),
    }
}

/// Why an agent Pod has not started, in Kubernetes' words: the reason (and message) its
/// `waiting` container gives, else an unschedulable Pod's message, else "not started".
pub(crate) fn not_started_reason(
    waiting: Option<&k8s_openapi::api::core::v1::ContainerStateWaiting>,
    status: &k8s_openapi::api::core::v1::PodStatus,
) -> String {
    waiting
        .map(|w| {
            format!(
                "{}{}",
                w.reason.clone().unwrap_or_default(),
                w.message
                    .as_deref()
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default()
            )
        })
        .or_else(|| {
            status
                .conditions
                .iter()
                .flatten()
                .find(|c| c.type_ == "PodScheduled" && c.status == "False")
                .map(|c| c.message.clone().unwrap_or_default())
        })
        .unwrap_or_else(|| "not started".to_string())
}
