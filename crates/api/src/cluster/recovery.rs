//! Lost-quorum recovery: the opt-in spec field and the status record (extensions of this
//! implementation, see docs/api.md and docs/operations.md).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::security::parse_duration;

/// How long a loss of quorum must last before automatic recovery counts it, when
/// `spec.quorumRecovery.after` is unset.
pub const DEFAULT_RECOVERY_AFTER: &str = "5m";

/// The annotation on an EtcdCluster by which a person asks for a lost-quorum recovery now:
/// the name of the EtcdMember to recover from, or `auto` to let the operator pick the
/// survivor with the highest raft index. The operator removes it once the recovery is done
/// (or at once when a majority answers: nothing to recover).
pub const RECOVER_QUORUM_ANNOTATION: &str = "etcd-operator.cozystack.io/recover-quorum";

/// The prefix of the annotation's value that names the EtcdSnapshot to restore from when no
/// member's data survives: `snapshot:<name>` (`auto` takes the newest Complete and verified
/// one of this cluster).
pub const RECOVER_FROM_SNAPSHOT_PREFIX: &str = "snapshot:";

/// Who may start a lost-quorum recovery.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum QuorumRecoveryMode {
    /// Only a person, with the `etcd-operator.cozystack.io/recover-quorum` annotation (or
    /// `kubectl etcdop recover-quorum`). The default.
    #[default]
    Manual,
    /// The operator too, once a majority of the voters has lost its data for longer than
    /// `after`. A person can still trigger it earlier with the annotation.
    Automatic,
}

/// `spec.quorumRecovery`: an extension of this implementation.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QuorumRecoverySpec {
    /// `Manual` (default) or `Automatic`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<QuorumRecoveryMode>,
    /// How long quorum must have been lost, with a majority's data gone, before automatic
    /// recovery starts, as a duration such as `5m`, `90s` or `1h` (default `5m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(
        pattern = r"^([0-9]{1,6}h([0-9]{1,6}m)?([0-9]{1,6}s)?|[0-9]{1,6}m([0-9]{1,6}s)?|[0-9]{1,6}s)$"
    ))]
    pub after: Option<String>,
}

impl QuorumRecoverySpec {
    pub fn mode_or_default(&self) -> QuorumRecoveryMode {
        self.mode.unwrap_or_default()
    }

    /// `after` as a duration (the default when unset or unreadable).
    pub fn after_or_default(&self) -> std::time::Duration {
        self.after
            .as_deref()
            .and_then(parse_duration)
            .or_else(|| parse_duration(DEFAULT_RECOVERY_AFTER))
            .unwrap_or(std::time::Duration::from_secs(300))
    }
}

/// The phases of a recovery, in order. From a survivor: `ForcingNewCluster`, `Rebuilding`,
/// `Completed`. From a snapshot (no member's data survives): `Resetting`, `Restoring`,
/// `Completed`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum QuorumRecoveryPhase {
    /// Recorded; the survivor's Pod is being recreated with `--force-new-cluster`.
    ForcingNewCluster,
    /// From a snapshot: recorded; every member's Pod and PVC are being deleted and its identity
    /// forgotten, one member at a time.
    Resetting,
    /// From a snapshot: the seed (`survivor`) is restored from the snapshot in its new Pod's
    /// init containers and starts alone as a new one-member cluster.
    Restoring,
    /// The survivor runs alone as a one-member cluster; the other members are being removed
    /// (their Pods and PVCs deleted, their identity forgotten) so that they join again as
    /// learners.
    Rebuilding,
    /// Every other member was reset; they join by the usual learner joins.
    Completed,
    /// Given up before anything destructive happened (a majority came back).
    Aborted,
}

/// One member as the recovery found it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QuorumRecoveryMember {
    /// The EtcdMember's name.
    pub name: String,
    /// The raft index it reported, when it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raft_index: Option<i64>,
    /// What the operator found: `Serving`, `Answering` (no quorum), `DataLost`,
    /// `Unreachable` or `NotStarted`, with the reason.
    #[serde(default)]
    pub state: String,
}

/// `status.quorumRecovery`: written before the first destructive step of a lost-quorum
/// recovery, so an operator that dies at any point resumes it. An extension of this
/// implementation.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QuorumRecoveryStatus {
    /// `ForcingNewCluster`, `Rebuilding`, `Completed` or `Aborted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<QuorumRecoveryPhase>,
    /// `Manual` (the annotation, with its value) or `Automatic`.
    #[serde(default)]
    pub trigger: String,
    /// The member recovered from.
    #[serde(default)]
    pub survivor: String,
    /// The survivor's raft index when the recovery started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub survivor_raft_index: Option<i64>,
    /// The survivor's etcd revision when the recovery started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub survivor_revision: Option<i64>,
    /// The UID of the survivor's Pod before it was recreated with `--force-new-cluster`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub survivor_pod_uid: Option<String>,
    /// Every member as the recovery found it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<QuorumRecoveryMember>,
    /// The members removed and rebuilt: every member but the survivor.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<String>,
    /// What may have been lost: the entries the survivor did not have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub may_have_lost: Option<String>,
    /// When the recovery was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// When the survivor first served alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forced_time: Option<Time>,
    /// When every other member had been reset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// Why it ended as it did, in a sentence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Set when the recovery is from a snapshot (no member's data survived); `survivor` then
    /// names the member restored from it, the seed of the new cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<QuorumRecoverySnapshot>,
}

/// The snapshot a lost-quorum recovery restores from.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QuorumRecoverySnapshot {
    /// The EtcdSnapshot's name (same namespace; its `clusterRef` is this cluster).
    pub name: String,
    /// Where it is stored, as `s3://<bucket>/<key>` (`gs://...`, `azure://...` for GCS and
    /// Azure).
    #[serde(default)]
    pub uri: String,
    /// Its etcd revision: writes acknowledged after it are lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,
    /// When it completed (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<String>,
    /// The `--initial-cluster-token` the seed is restored with: a new one, so the restored
    /// cluster gets new member and cluster IDs.
    #[serde(default)]
    pub cluster_token: String,
    /// The cluster ID before the recovery.
    #[serde(
        rename = "previousClusterID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub previous_cluster_id: Option<String>,
    /// The restored cluster's ID, latched into `status.clusterID` when the seed first serves.
    #[serde(rename = "clusterID", default, skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<String>,
    /// The S3 object restored from (its exact key), copied from the EtcdSnapshot when the
    /// recovery was recorded, so it resumes even if the EtcdSnapshot goes meanwhile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<crate::shared::S3SnapshotLocation>,
    /// Extension of the record: the GCS object restored from (its exact key), when the
    /// snapshot is in GCS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gcs: Option<crate::shared::GcsSnapshotLocation>,
    /// Extension of the record: the Azure blob restored from (its exact name), when the
    /// snapshot is in Azure Blob Storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub azure: Option<crate::shared::AzureSnapshotLocation>,
    /// The Secret key with the age identity that decrypts it (the EtcdSnapshot's
    /// `encryption.age.identitySecretRef`), for an encrypted snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub age_identity_secret_ref: Option<crate::shared::SecretKeyRef>,
}

impl QuorumRecoverySnapshot {
    /// The object restored from, whichever store holds it.
    pub fn restore_location(&self) -> Option<crate::shared::SnapshotLocation> {
        let location = crate::shared::SnapshotLocation {
            s3: self.source.clone(),
            gcs: self.gcs.clone(),
            azure: self.azure.clone(),
            ..Default::default()
        };
        location.store().map(|_| location)
    }

    /// The record of `location` (an object store's exact object): S3 in `source`, where an
    /// older operator reads it, GCS and Azure beside it.
    pub fn record_location(&mut self, location: &crate::shared::SnapshotLocation) {
        self.source = location.s3.clone();
        self.gcs = location.gcs.clone();
        self.azure = location.azure.clone();
    }
}

impl QuorumRecoveryStatus {
    /// Started and not finished.
    pub fn in_progress(&self) -> bool {
        matches!(
            self.phase,
            Some(
                QuorumRecoveryPhase::ForcingNewCluster
                    | QuorumRecoveryPhase::Rebuilding
                    | QuorumRecoveryPhase::Resetting
                    | QuorumRecoveryPhase::Restoring
            )
        )
    }

    /// A recovery from a snapshot that has not yet brought the restored seed up: the cluster
    /// ID etcd answers with is expected to change.
    pub fn restoring_from_snapshot(&self) -> bool {
        self.snapshot.is_some()
            && matches!(
                self.phase,
                Some(QuorumRecoveryPhase::Resetting | QuorumRecoveryPhase::Restoring)
            )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn after_defaults_to_five_minutes_and_reads_durations() {
        let spec = QuorumRecoverySpec::default();
        assert_eq!(spec.after_or_default().as_secs(), 300);
        assert_eq!(spec.mode_or_default(), QuorumRecoveryMode::Manual);
        let spec = QuorumRecoverySpec {
            mode: Some(QuorumRecoveryMode::Automatic),
            after: Some("1m30s".into()),
        };
        assert_eq!(spec.after_or_default().as_secs(), 90);
    }

    #[test]
    fn only_the_working_phases_are_in_progress() {
        let mut s = QuorumRecoveryStatus::default();
        assert!(!s.in_progress());
        for (phase, busy) in [
            (QuorumRecoveryPhase::ForcingNewCluster, true),
            (QuorumRecoveryPhase::Rebuilding, true),
            (QuorumRecoveryPhase::Resetting, true),
            (QuorumRecoveryPhase::Restoring, true),
            (QuorumRecoveryPhase::Completed, false),
            (QuorumRecoveryPhase::Aborted, false),
        ] {
            s.phase = Some(phase);
            assert_eq!(s.in_progress(), busy, "{phase:?}");
        }
    }
}
