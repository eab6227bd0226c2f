//! The etcd client wrapper: membership, status, alarms, leadership, with timeouts.
//!
//! - [`EtcdClient`]: one call per etcd RPC the operator makes, each bounded by [`Timeouts`];
//!   failures are [`EtcdError`]s typed by what the caller does next ([`EtcdErrorKind`]).
//! - [`observe_cluster`]: asks every member at once and returns an [`EtcdView`], where an
//!   unreachable member or a cluster without quorum is data, not an error.
//! - [`EtcdConnections`]: connections kept from one pass to the next, dialled again when the
//!   TLS material or credentials change or a call through one fails at the transport.
//! - [`types`]: plain values ([`MemberInfo`], [`EndpointStatus`], [`Alarm`]) the planner reads.

mod access;
mod client;
mod error;
mod pool;
pub mod types;
mod version;
mod view;

pub use access::{ClientTls, EtcdAccess};
pub use client::{EtcdClient, SnapshotStream, Timeouts};
pub use error::{EtcdError, EtcdErrorKind};
pub use pool::{DEFAULT_KEPT, EtcdConnections, drops_connection};
pub use types::{
    Alarm, AlarmKind, Compaction, Downgrade, EndpointStatus, MemberAdded, MemberInfo,
    member_id_hex, parse_member_id,
};
pub use version::{cluster_version, parse_cluster_version};
pub use view::{EndpointObservation, EtcdView, observe_cluster, observe_cluster_with};
