//! The statuses a snapshot goes through (`Pending`, `Started`, verifying, `Complete`, `Failed`)
//! with their Ready condition, from what was decided and what was written.

use etcd_operator_api::conditions::snapshot::READY;
use etcd_operator_api::snapshot::{
    EtcdSnapshotStatus, SnapshotArtifact, SnapshotEncryptionStatus, SnapshotPhase,
    SnapshotVerification, SnapshotVerify,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use super::check::{Checked, Stored};
use super::failure::Failure;

pub(super) fn condition(
    status: &str,
    reason: &str,
    message: String,
    now: Timestamp,
    generation: Option<i64>,
) -> Condition {
    Condition {
        type_: READY.to_string(),
        status: status.to_string(),
        reason: reason.to_string(),
        message,
        last_transition_time: Time(now),
        observed_generation: generation,
    }
}

/// Where the member came from, for the status.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Source {
    pub member: String,
    pub revision: Option<i64>,
    pub etcd_version: Option<String>,
}

/// `Pending`: seen, not started (Ready False, reason Pending).
pub fn pending_status(now: Timestamp, generation: Option<i64>) -> EtcdSnapshotStatus {
    EtcdSnapshotStatus {
        phase: Some(SnapshotPhase::Pending),
        conditions: Some(vec![condition(
            "False",
            "Pending",
            "the snapshot is waiting to start".to_string(),
            now,
            generation,
        )]),
        ..Default::default()
    }
}

/// `Started`: streaming from `member` to `uri`.
pub fn started_status(
    member: &str,
    uri: &str,
    now: Timestamp,
    generation: Option<i64>,
) -> EtcdSnapshotStatus {
    EtcdSnapshotStatus {
        phase: Some(SnapshotPhase::Started),
        conditions: Some(vec![condition(
            "False",
            "Started",
            format!("streaming a snapshot from member {member} to {uri}"),
            now,
            generation,
        )]),
        start_time: Some(now.to_string()),
        member: Some(member.to_string()),
        ..Default::default()
    }
}

/// The fields every status of a written snapshot carries: the artifact, etcd's bytes, the
/// layers, the revision (the pages' when they were read, else the one asked before the
/// stream), the source.
pub(super) fn written_fields(
    previous: &EtcdSnapshotStatus,
    stored: &Stored,
    source: &Source,
) -> EtcdSnapshotStatus {
    EtcdSnapshotStatus {
        artifact: Some(SnapshotArtifact {
            uri: stored.uri.clone(),
            size_bytes: Some(stored.size as i64),
            checksum: Some(format!("sha256:{}", stored.sha256)),
        }),
        start_time: previous.start_time.clone(),
        revision: stored.revision.or(source.revision),
        member: Some(source.member.clone()),
        etcd_version: source.etcd_version.clone(),
        compression: Some(stored.compression),
        encryption: stored.encrypted().then(|| SnapshotEncryptionStatus {
            method: "age".to_string(),
            recipients: stored.recipients.clone(),
        }),
        snapshot_size_bytes: Some(stored.snapshot_size as i64),
        snapshot_checksum: Some(format!("sha256:{}", stored.snapshot_sha256)),
        ..Default::default()
    }
}

pub(super) fn verification(checked: &Checked, time: Option<Timestamp>) -> SnapshotVerification {
    SnapshotVerification {
        method: checked.method,
        time: time.map(|t| t.to_string()),
        content_checked: Some(checked.content_checked),
        revision: checked.revision,
        total_keys: checked.total_keys.map(|k| k as i64),
        keys: checked.keys,
        message: Some(checked.message.clone()),
    }
}

/// `Started`, stored and read back, the restore check running in `pod`.
pub fn verifying_status(
    previous: &EtcdSnapshotStatus,
    stored: &Stored,
    source: &Source,
    checksum: &Checked,
    pod: &str,
    now: Timestamp,
    generation: Option<i64>,
) -> EtcdSnapshotStatus {
    let mut pending = checksum.clone();
    pending.method = SnapshotVerify::Restore;
    EtcdSnapshotStatus {
        phase: Some(SnapshotPhase::Started),
        conditions: Some(vec![condition(
            "False",
            "Verifying",
            format!(
                "stored {} and read back; restoring it into a throwaway etcd (Pod {pod}) to verify it",
                stored.uri
            ),
            now,
            generation,
        )]),
        verification: Some(verification(&pending, None)),
        ..written_fields(previous, stored, source)
    }
}

/// `Complete`: stored and verified; Ready True.
pub fn complete_status(
    previous: &EtcdSnapshotStatus,
    stored: &Stored,
    source: &Source,
    checked: &Checked,
    now: Timestamp,
    generation: Option<i64>,
) -> EtcdSnapshotStatus {
    let revision = stored.revision.or(source.revision);
    EtcdSnapshotStatus {
        phase: Some(SnapshotPhase::Complete),
        conditions: Some(vec![condition(
            "True",
            "Complete",
            format!(
                "stored {} ({} bytes{}) from member {}{}, verified ({})",
                stored.uri,
                stored.size,
                match stored.layers().describe().as_str() {
                    d if d.starts_with("none") => String::new(),
                    d => format!(", {d}"),
                },
                source.member,
                revision
                    .map(|r| format!(" at revision {r}"))
                    .unwrap_or_default(),
                match checked.method {
                    SnapshotVerify::Checksum if checked.content_checked => "read back and decoded",
                    SnapshotVerify::Checksum => "read back",
                    SnapshotVerify::Restore => "read back and restored",
                }
            ),
            now,
            generation,
        )]),
        start_time: previous.start_time.clone().or(Some(now.to_string())),
        completion_time: Some(now.to_string()),
        verified: Some(true),
        verification: Some(verification(checked, Some(now))),
        failure_reason: None,
        ..written_fields(previous, stored, source)
    }
}

/// `Failed`: the reason in the condition and in `failureReason`. `verified` is False only
/// when the failure is the verification itself; `stored` keeps the artifact of such an
/// object so that the user sees what is in the store, and `method` says which verification
/// failed.
pub fn failed_status(
    previous: &EtcdSnapshotStatus,
    failure: &Failure,
    stored: Option<&Stored>,
    method: Option<SnapshotVerify>,
    now: Timestamp,
    generation: Option<i64>,
) -> EtcdSnapshotStatus {
    let message = failure.message();
    let base = match stored {
        Some(stored) => {
            let source = Source {
                member: previous.member.clone().unwrap_or_default(),
                revision: previous.revision,
                etcd_version: previous.etcd_version.clone(),
            };
            written_fields(previous, stored, &source)
        }
        None => EtcdSnapshotStatus {
            start_time: previous.start_time.clone(),
            revision: previous.revision,
            etcd_version: previous.etcd_version.clone(),
            ..Default::default()
        },
    };
    let verification_failed = matches!(failure, Failure::VerificationFailed { .. });
    EtcdSnapshotStatus {
        phase: Some(SnapshotPhase::Failed),
        conditions: Some(vec![condition(
            "False",
            failure.reason(),
            message.clone(),
            now,
            generation,
        )]),
        completion_time: Some(now.to_string()),
        member: previous.member.clone(),
        verified: verification_failed.then_some(false),
        verification: verification_failed.then(|| SnapshotVerification {
            method: method.unwrap_or_default(),
            time: Some(now.to_string()),
            content_checked: None,
            revision: None,
            total_keys: None,
            keys: None,
            message: Some(message.clone()),
        }),
        failure_reason: Some(message),
        ..base
    }
}
