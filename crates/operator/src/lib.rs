//! The etcd operator: observe, plan, act.
//!
//! - [`plan`]: the pure judgement: from one observed state to exactly one next step.
//! - [`build`]: pure builders of the Kubernetes objects the operator owns.
//! - [`etcd`]: the etcd gRPC client wrapper.

pub mod build;
pub mod etcd;
pub mod plan;
