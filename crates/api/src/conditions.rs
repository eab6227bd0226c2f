//! The condition types the resources report in `status.conditions`.

/// Condition types of an EtcdCluster.
pub mod cluster {
    /// The cluster has a healthy quorum.
    pub const AVAILABLE: &str = "Available";
    /// A change of scale or version is in progress.
    pub const PROGRESSING: &str = "Progressing";
    /// Some members are unhealthy but quorum holds.
    pub const DEGRADED: &str = "Degraded";
    /// Extension: with `spec.tls`, whether every certificate the cluster runs on is outside its
    /// last third of validity (False names each one that is not, soonest first).
    pub const CERTIFICATES_VALID: &str = "CertificatesValid";
}

/// Condition types of an EtcdMember.
pub mod member {
    /// The member has been added to etcd.
    pub const JOINED: &str = "Joined";
    /// The member is healthy and serving.
    pub const READY: &str = "Ready";
    /// The version etcd reports running differs from spec.version.
    pub const VERSION_DRIFTED: &str = "VersionDrifted";
}

/// Condition types of an EtcdSnapshot.
pub mod snapshot {
    /// The single lifecycle condition: True only once the snapshot is stored, False with a
    /// reason otherwise.
    pub const READY: &str = "Ready";
}
