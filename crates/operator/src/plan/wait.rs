//! [`WaitReason`]: why a pass does nothing, as its Event and conditions name it.

/// Why a pass does nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WaitReason {
    /// The EtcdCluster is being deleted; members are cleaned up.
    Deleting,
    /// `spec.paused` is true.
    Paused,
    /// A lost-quorum recovery is in progress and waits for a member.
    QuorumRecovery,
    /// A lost-quorum recovery was asked for (or is due) but cannot start; the message says why.
    QuorumRecoveryRefused,
    /// A CORRUPT alarm is active.
    CorruptAlarm,
    /// A NOSPACE alarm is active.
    NoSpaceAlarm,
    /// The cluster has lost quorum and no repair applies.
    QuorumLost,
    /// No etcd endpoint answers.
    EtcdUnreachable,
    /// Members are starting; quorum is expected once they are up.
    WaitingForQuorum,
    /// A member's Pod is starting or a member is becoming healthy.
    WaitingForMember,
    /// A learner is catching up with the leader.
    WaitingForLearner,
    /// A repair waits for its backoff delay.
    RepairBackoff,
    /// A repair or removal would take the cluster below quorum.
    QuorumAtRisk,
    /// The spec asks for something not implemented yet (TLS, auth, restore, memory at zero).
    UnsupportedSpec,
    /// `spec.version` is outside the range of versions the operator runs (the message names
    /// it): nothing is started for it.
    UnsupportedVersion,
    /// `spec.version` differs from the running members; rolling upgrades are not implemented.
    UpgradeNotImplemented,
    /// The version change asked for is not an upgrade path etcd supports (skipped minor,
    /// downgrade below the cluster version, unknown version, auth-enabled 3.4 to 3.5).
    UpgradeRefused,
    /// A member did not come up on the new version: the rollout stopped after it.
    UpgradeFailed,
    /// A larger `storage.size` cannot be applied: the PVCs' StorageClass does not allow
    /// expansion (or there is none). Nothing is changed.
    StorageExpansionRefused,
    /// A member's PVC is being expanded; the next waits for it.
    VolumeResizing,
    /// Kubernetes reports that a member's PVC could not be expanded (the storage driver
    /// refused the size or the node failed to grow the file system).
    StorageExpansionFailed,
    /// The cluster had formed, but its EtcdMembers are gone.
    ClusterLost,
    /// etcd answers with another cluster ID than the one latched.
    ClusterIdMismatch,
    /// An object with our name is owned by something else.
    ForeignObject,
    /// An object the reference operator left cannot be taken over safely (the message names
    /// it and says why); it is left alone, and so is the rest of the cluster.
    NotAdoptable,
    /// A member's Pod keeps being killed for memory.
    OutOfMemory,
    /// A member cannot be built (an object lacks its name or UID).
    InvalidObject,
    /// A Secret `spec.tls` names cannot be used.
    InvalidSecret,
    /// The seed's data directory could not be restored from `spec.bootstrap.restore`.
    RestoreFailed,
}

impl WaitReason {
    pub fn as_str(self) -> &'static str {
        match self {
            WaitReason::Deleting => "Deleting",
            WaitReason::Paused => "Paused",
            WaitReason::QuorumRecovery => "QuorumRecovery",
            WaitReason::QuorumRecoveryRefused => "QuorumRecoveryRefused",
            WaitReason::CorruptAlarm => "CorruptAlarm",
            WaitReason::NoSpaceAlarm => "NoSpaceAlarm",
            WaitReason::QuorumLost => "QuorumLost",
            WaitReason::EtcdUnreachable => "EtcdUnreachable",
            WaitReason::WaitingForQuorum => "WaitingForQuorum",
            WaitReason::WaitingForMember => "WaitingForMember",
            WaitReason::WaitingForLearner => "WaitingForLearner",
            WaitReason::RepairBackoff => "RepairBackoff",
            WaitReason::QuorumAtRisk => "QuorumAtRisk",
            WaitReason::UnsupportedSpec => "UnsupportedSpec",
            WaitReason::UnsupportedVersion => "UnsupportedVersion",
            WaitReason::UpgradeNotImplemented => "UpgradeNotImplemented",
            WaitReason::UpgradeRefused => "UpgradeRefused",
            WaitReason::UpgradeFailed => "UpgradeFailed",
            WaitReason::StorageExpansionRefused => "StorageExpansionRefused",
            WaitReason::VolumeResizing => "VolumeResizing",
            WaitReason::StorageExpansionFailed => "StorageExpansionFailed",
            WaitReason::ClusterLost => "ClusterLost",
            WaitReason::ClusterIdMismatch => "ClusterIDMismatch",
            WaitReason::ForeignObject => "ForeignObject",
            WaitReason::NotAdoptable => "NotAdoptable",
            WaitReason::OutOfMemory => "OutOfMemory",
            WaitReason::InvalidObject => "InvalidObject",
            WaitReason::InvalidSecret => "InvalidSecret",
            WaitReason::RestoreFailed => "RestoreFailed",
        }
    }

    /// Blocked until a human acts (or until an outage ends), rather than in progress.
    pub fn needs_attention(self) -> bool {
        !matches!(
            self,
            WaitReason::Deleting
                | WaitReason::Paused
                | WaitReason::WaitingForQuorum
                | WaitReason::WaitingForMember
                | WaitReason::WaitingForLearner
                | WaitReason::RepairBackoff
                | WaitReason::VolumeResizing
                | WaitReason::QuorumRecovery
        )
    }
}
