//! The simulated clusters: pure state and etcd's rules, no I/O.
//!
//! [`World`] holds every cluster the process simulates; each [`Cluster`] holds its members
//! and answers the calls etcd's API offers, asked of one of its members.

mod cluster;
pub mod ids;
mod types;

#[cfg(test)]
mod tests;

pub use cluster::{
    BootstrapError, Cluster, DEFAULT_QUOTA, FRESH_DB_SIZE, HEALTH_INTERVAL_MS, MAX_LEARNERS,
    STORAGE_VERSION, VERSION,
};
pub use types::{Alarm, AlarmAction, AlarmKind, Header, Member, MemberId, RangeQuery, Status};

/// Which cluster of a [`World`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClusterKey(pub usize);

/// Every simulated cluster of one process.
#[derive(Clone, Debug, Default)]
pub struct World {
    clusters: Vec<Cluster>,
}

impl World {
    /// An empty world.
    pub fn new() -> World {
        World::default()
    }

    /// Adds `cluster`; the key names it from then on.
    pub fn add(&mut self, cluster: Cluster) -> ClusterKey {
        self.clusters.push(cluster);
        ClusterKey(self.clusters.len() - 1)
    }

    /// The cluster `key` names.
    ///
    /// # Panics
    /// When `key` did not come from this world's [`World::add`].
    pub fn cluster(&self, key: ClusterKey) -> &Cluster {
        &self.clusters[key.0]
    }

    /// The cluster `key` names, to change.
    ///
    /// # Panics
    /// When `key` did not come from this world's [`World::add`].
    pub fn cluster_mut(&mut self, key: ClusterKey) -> &mut Cluster {
        &mut self.clusters[key.0]
    }

    /// How many clusters there are.
    pub fn len(&self) -> usize {
        self.clusters.len()
    }

    /// Whether there is no cluster.
    pub fn is_empty(&self) -> bool {
        self.clusters.is_empty()
    }
}
