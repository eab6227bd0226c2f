//! The etcd operator: observe, plan, act.
//!
//! - [`observe`]: everything a pass needs, from the watch caches and from etcd, in one value.
//! - [`plan`]: the pure judgement: from one observed state to exactly one next step.
//! - [`act`]: performs a plan: status writes first, then the one step.
//! - [`reconcile`]: the kube-runtime controller that runs observe → plan → act per cluster.
//! - [`defrag`]: the EtcdDefrag and EtcdDefragPolicy controllers.
//! - [`build`]: pure builders of the Kubernetes objects the operator owns.
//! - [`etcd`]: the etcd gRPC client wrapper.
//! - [`domain`]: the vocabulary several of the above share (etcd's defaults, quantities, a
//!   snapshot's location and URI, the operator's settings), below all of them.
//! - [`snapshot`]: the EtcdSnapshot and EtcdSnapshotSchedule controllers.
//! - the process: [`config`] (command line), [`leader`] (Lease election), [`metrics`],
//!   [`server`] (/metrics, /healthz, /readyz), [`logging`], [`run`], and the RBAC
//!   [`permissions`] all of it needs.
//!
//! docs/architecture.md ("Layers") draws which of these may use which; the tests in
//! `import_graph` keep it so, and keep the files free of import circles.

pub mod act;
pub mod build;
pub mod config;
pub mod defrag;
pub mod domain;
pub mod etcd;
pub mod failpoints;
pub mod leader;
pub mod logging;
pub mod metrics;
pub mod observe;
pub mod permissions;
pub mod plan;
pub mod reconcile;
pub mod run;
pub mod security;
pub mod server;
pub mod snapshot;

#[cfg(test)]
mod import_graph;
#[cfg(test)]
mod manifests_tests;
