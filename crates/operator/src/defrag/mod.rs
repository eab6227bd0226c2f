//! The EtcdDefrag and EtcdDefragPolicy controllers, beside the EtcdCluster one.
//!
//! - [`decide`]: the pure decisions of a run (queue, deadline, health gate, member order, the
//!   rule, the status of each outcome, which NOSPACE alarms to disarm).
//! - [`policy`]: the pure decisions of a policy (schedule, due tick, concurrency, deadline,
//!   history).
//! - [`controller`]: the thin I/O: one member per pass, the status written before the next.

pub mod controller;
pub mod decide;
pub mod policy;
#[cfg(test)]
mod tests;

pub use controller::{DefragContext, run_defrag_controllers};
