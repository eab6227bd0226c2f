//! The planner's tests: one table test per rule of the priority order and the readiness gate,
//! simulations of whole sequences (bootstrap, reboot, scale, crash between steps), and
//! property tests of the safety invariants.

mod adopt;
pub(crate) mod fixtures;
mod healing;
mod lifecycle;
mod membership;
mod operations;
mod partitions;
mod properties;
pub(crate) mod quorum;
mod repair;
mod restore;
mod retention;
mod rollout;
mod security;
mod simulation;
pub(crate) mod snapshot_recovery;
mod start;
mod status;
mod storage;
