//! `spec.persistentVolumeClaimRetentionPolicy` (an extension): when a member's data, its PVC,
//! is deleted. Modelled on the StatefulSet field of the same name.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What happens to a member's PVC in one situation.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum PvcRetention {
    /// The PVC stays, owned by the EtcdCluster (or, once the cluster is gone, by nothing), for
    /// a person to inspect or delete.
    Retain,
    /// The PVC is deleted.
    Delete,
}

/// When the operator deletes a member's PersistentVolumeClaim. An EtcdMember deleted by hand
/// (not by the operator's scale-in) always keeps its PVC: the PVC is handed to the EtcdCluster
/// before the member goes, and `whenDeleted` then decides its fate with the cluster's. An
/// ordinal whose PVC is retained is not used again for a new member (its data belongs to a
/// member etcd has removed).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PvcRetentionPolicy {
    /// When the EtcdCluster is deleted: `Delete` (the default) lets garbage collection take
    /// every member's PVC and every retained one; `Retain` releases them all (no owner
    /// references left) before the cluster goes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub when_deleted: Option<PvcRetention>,
    /// When the operator scales the cluster in: `Delete` (the default) deletes the removed
    /// member's PVC once etcd no longer lists the member; `Retain` keeps it, owned by the
    /// EtcdCluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub when_scaled: Option<PvcRetention>,
}

impl PvcRetentionPolicy {
    /// `whenDeleted` with its default (`Delete`).
    pub fn when_deleted_or_default(&self) -> PvcRetention {
        self.when_deleted.unwrap_or(PvcRetention::Delete)
    }

    /// `whenScaled` with its default (`Delete`).
    pub fn when_scaled_or_default(&self) -> PvcRetention {
        self.when_scaled.unwrap_or(PvcRetention::Delete)
    }
}
