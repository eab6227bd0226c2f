//! The `etcd-sim` binary's mode: one member, started from etcd's own flags
//! ([`crate::flags`]), in place of one `etcd` process.
//!
//! The member's cluster lives in this process only: it is bootstrapped from
//! `--initial-cluster` and `--initial-cluster-token` (so the member and cluster IDs are the
//! ones etcd derives from them), and only this member runs in it. That is a faithful 1-member
//! cluster; a member of a larger cluster has no quorum here (its peers run in other
//! processes, which share nothing with it), and `--initial-cluster-state=existing` builds the
//! same local cluster as `new` (the MemberAdd that registered this member happened in another
//! process's state).
//!
//! # A shared central state (not built yet)
//!
//! To run every member of a cluster as its own `etcd-sim` process (one per Pod, as the operator
//! creates them), the [`crate::state::World`] would move into one hub process, and each member
//! process would become a thin front: it would serve the same gRPC and HTTP routes, but answer
//! them by forwarding each call (the member ID it speaks for, the request) to the hub over a
//! small internal API (a gRPC service of its own, or HTTP), and tell the hub when it starts
//! (publishing its name and client URLs, as [`crate::state::Cluster::start_member`] does) and
//! when it stops (a lost connection or a heartbeat that lapses:
//! [`crate::state::Cluster::stop_member`]). The hub would find the cluster by its
//! `--initial-cluster-token` and the member by its peer URLs; `--initial-cluster-state=existing`
//! would then mean "join the cluster the hub already holds", which is where the learner that
//! MemberAdd registered is. [`crate::grpc::MemberApi`] already funnels every call through one
//! function on one cluster, which is the seam for that forwarding. Until then, the in-process
//! [`crate::server::Sim`] serves many members of many clusters from one process, which is what
//! the 1,000-cluster benchmark needs.

use std::error::Error;
use std::sync::Arc;

use tokio::net::TcpListener;

use crate::flags::{EtcdFlags, initial_members, listen_addr, own_peer_urls};
use crate::server::{MemberServer, Sim, SimConfig};

/// Starts the member `flags` describe: its cluster bootstrapped in a new [`Sim`], its client
/// and metrics URLs listened on, its data directory created (and left empty).
pub async fn start(flags: &EtcdFlags) -> Result<MemberServer, Box<dyn Error + Send + Sync>> {
    let sim = Sim::new(SimConfig::default());
    start_in(&sim, flags).await
}

/// [`start`] within an existing simulator.
pub async fn start_in(
    sim: &Arc<Sim>,
    flags: &EtcdFlags,
) -> Result<MemberServer, Box<dyn Error + Send + Sync>> {
    let initial = initial_members(&flags.initial_cluster);
    let own = own_peer_urls(
        &flags.name,
        &flags.initial_cluster,
        &flags.initial_advertise_peer_urls,
    )?;
    let key = sim.bootstrap(&flags.initial_cluster_token, &initial)?;
    let id = sim
        .with(key, |c| c.member_with_peer_url(&own[0]))
        .ok_or("own member missing after bootstrap")?;
    if let Some(quota) = flags.quota_backend_bytes.filter(|q| *q > 0) {
        sim.with(key, |c| c.set_quota(quota));
    }
    std::fs::create_dir_all(&flags.data_dir)
        .map_err(|e| format!("--data-dir {}: {e}", flags.data_dir))?;
    let mut listeners = Vec::new();
    for url in flags
        .listen_client_urls
        .iter()
        .chain(&flags.listen_metrics_urls)
    {
        let addr = listen_addr(url)?;
        let listener = TcpListener::bind(&addr)
            .await
            .map_err(|e| format!("listen on {url}: {e}"))?;
        listeners.push(listener);
    }
    let server = sim.serve_member(
        key,
        id,
        &flags.name,
        listeners,
        &flags.advertise_client_urls,
    )?;
    Ok(server)
}
