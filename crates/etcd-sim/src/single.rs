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
//! # One process per member: hub and fronts
//!
//! To run every member of a larger cluster as its own process (one per Pod, as the operator
//! creates them), the clusters live in one hub process instead ([`crate::hub`],
//! `etcd-sim hub --listen ADDR`), and each member process is a thin front
//! ([`crate::front`], this binary with `--hub ADDR` or `ETCD_SIM_HUB=ADDR` added to etcd's
//! command line). The front registers its member with the hub over a small gRPC API
//! (`proto/hub.proto`, one server-streaming call carrying its etcd flags); the hub finds the
//! cluster by `--initial-cluster-token` (bootstrapping it from `--initial-cluster` when no
//! member of it has registered yet and the state is `new`) and the member by its peer URLs
//! (for `--initial-cluster-state=existing`, the one MemberAdd registered), serves it on
//! listeners of its own ([`crate::server::Sim::serve_member`]), and the front forwards its
//! client and metrics listeners' connections there byte for byte. The registration stays
//! open while the front runs; when it closes, the hub stops the member
//! ([`crate::state::Cluster::stop_member`]), and a front that registers again restarts it
//! with its ID and state. This single mode stays for a member that is a cluster of its own.

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
