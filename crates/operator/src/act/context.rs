//! What `act` writes with: the Kubernetes client, where each member's etcd answers, and the
//! metrics every write is counted in.

use std::sync::Arc;

use kube::Client;

use crate::metrics::Metrics;
use crate::observe::EtcdUrlMap;

/// What `act` writes with.
#[derive(Clone)]
pub struct ActContext {
    pub client: Client,
    pub etcd_urls: EtcdUrlMap,
    pub metrics: Arc<Metrics>,
}

impl ActContext {
    /// Counts one write to the Kubernetes API (the steady-state benchmark expects none).
    pub fn count_write(&self, resource: &str) {
        self.metrics.count_kubernetes_write(resource);
    }
}
