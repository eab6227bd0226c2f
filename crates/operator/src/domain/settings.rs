//! The operator's settings, from its command line (`config`): what shapes the objects it
//! builds (images, the cluster domain, the local store's root) and how patiently it repairs.
//! `build`, `plan`, `observe` and the controllers all read them.

use std::time::Duration;

/// The etcd image repository used when the operator is not told otherwise.
pub const DEFAULT_ETCD_IMAGE_REPOSITORY: &str = "quay.io/coreos/etcd";

/// Kubernetes' default cluster DNS domain.
pub const DEFAULT_CLUSTER_DOMAIN: &str = "cluster.local";

/// Operator-wide settings: what shapes the objects it builds, and how patiently it repairs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperatorSettings {
    /// Repository of the etcd image (registry and path, no tag); the tag is `v<version>`.
    pub etcd_image_repository: String,
    /// Grace periods and backoff of the repair ladder.
    pub repair: RepairTiming,
    /// The cluster's DNS domain (`cluster.local`), for certificate names.
    pub cluster_domain: String,
    /// The operator's own image, run by the restore init containers of a cluster
    /// bootstrapped from a snapshot (`etcd-operator restore-fetch` / `restore-commit`).
    pub agent_image: String,
    /// The directory under which `destination.local` snapshots may be written (a volume
    /// mounted into the operator's Pod).
    pub local_store_root: std::path::PathBuf,
}

/// The operator's image when it is not told otherwise (what `deploy/operator` runs).
pub const DEFAULT_AGENT_IMAGE: &str = "ghcr.io/etcd-operator-rs/etcd-operator:v0.1.0";

impl Default for OperatorSettings {
    fn default() -> Self {
        OperatorSettings {
            etcd_image_repository: DEFAULT_ETCD_IMAGE_REPOSITORY.to_string(),
            repair: Default::default(),
            cluster_domain: DEFAULT_CLUSTER_DOMAIN.to_string(),
            agent_image: DEFAULT_AGENT_IMAGE.to_string(),
            local_store_root: super::location::DEFAULT_LOCAL_ROOT.into(),
        }
    }
}

impl OperatorSettings {
    /// The etcd image for `version` (`3.5.1` becomes `<repository>:v3.5.1`).
    pub fn etcd_image(&self, version: &str) -> String {
        format!("{}:v{version}", self.etcd_image_repository)
    }
}

/// How long a member's running Pod may stay not ready (and its etcd unhealthy) before it is
/// recreated (repair level 1).
pub const NOT_READY_GRACE: Duration = Duration::from_secs(180);
/// The first repair backoff; it doubles with every recreation, up to [`MAX_BACKOFF`].
pub const BASE_BACKOFF: Duration = Duration::from_secs(10);
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// How patiently members are repaired: the constants above by default; the operator's flags
/// shorten them (the end-to-end tests do).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RepairTiming {
    /// How long a Pod may stay not ready (its etcd unhealthy) before it is recreated.
    pub not_ready_grace: Duration,
    /// The first repair backoff; it doubles with every recreation, up to `backoff_max`.
    pub backoff_base: Duration,
    pub backoff_max: Duration,
}

impl Default for RepairTiming {
    fn default() -> Self {
        RepairTiming {
            not_ready_grace: NOT_READY_GRACE,
            backoff_base: BASE_BACKOFF,
            backoff_max: MAX_BACKOFF,
        }
    }
}

impl RepairTiming {
    /// From the flags: the grace period and the first backoff, the longest backoff 30 times it.
    pub fn from_seconds(not_ready_grace: u64, backoff_base: u64) -> Self {
        RepairTiming {
            not_ready_grace: Duration::from_secs(not_ready_grace),
            backoff_base: Duration::from_secs(backoff_base),
            backoff_max: Duration::from_secs(backoff_base.saturating_mul(30)),
        }
    }

    /// The delay before repairing a member again after `recreations` recreations.
    pub fn backoff(&self, recreations: i32) -> Duration {
        if recreations <= 0 {
            return Duration::ZERO;
        }
        let doublings = (recreations - 1).min(16) as u32;
        self.backoff_base
            .saturating_mul(1 << doublings)
            .min(self.backoff_max)
    }
}
