//! The server's own controllers, driven by the store's change events: garbage collection,
//! namespace deletion, CRD establishment, PodDisruptionBudget status and ClusterRole
//! aggregation.

mod aggregation;
pub mod crds;
mod disruption;
mod gc;
mod namespaces;

use std::sync::Arc;

use super::server::ApiServer;

/// Starts every controller; each stops with the server.
pub fn start_all(server: &Arc<ApiServer>) {
    tokio::spawn(gc::run(server.clone(), server.store.subscribe()));
    tokio::spawn(namespaces::run(server.clone(), server.store.subscribe()));
    tokio::spawn(crds::run(server.clone(), server.store.subscribe()));
    tokio::spawn(disruption::run(server.clone(), server.store.subscribe()));
    tokio::spawn(aggregation::run(server.clone(), server.store.subscribe()));
}
