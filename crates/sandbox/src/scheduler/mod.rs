//! The scheduler: binds Pods to nodes, honouring selectors, affinity, spread constraints and taints.
//!
//! [`schedule`] is the pure decision (a Pod, the nodes and the Pods already placed → a node, or
//! why none fits, worded as kube-scheduler words it). [`run_scheduler`] is the loop around it:
//! it watches Pods, Nodes and Namespaces through a `kube::Client`, binds each pending Pod of the
//! `default-scheduler` through `pods/binding`, and marks a Pod it cannot place
//! `PodScheduled=False` (reason `Unschedulable`), trying again whenever anything changes.
//!
//! Filters run in the default profile's order (NodeUnschedulable, TaintToleration, NodeAffinity,
//! NodeResourcesFit, PodTopologySpread, InterPodAffinity); a node is refused by the first one
//! that refuses it. Scores use the default weights (TaintToleration 3, NodeAffinity 2,
//! PodTopologySpread 2, InterPodAffinity 2, NodeResourcesFit least-allocated 1). Where the real
//! scheduler picks at random among the best nodes, this one takes the node with fewer Pods,
//! then the smaller name, so tests are reproducible. Not modelled: preemption, volume topology,
//! host ports, image locality, balanced allocation and the cluster-default spread constraints.

mod cluster;
mod cycle;
mod inter_pod;
pub mod labels;
mod node_affinity;
mod placement;
mod resources;
mod spread;
pub mod taints;

#[cfg(test)]
mod tests;

pub use cluster::{Cluster, NamespaceLabels, is_terminal, node_name_of};
pub use cycle::{DEFAULT_SCHEDULER, SchedulerOptions, run_scheduler};
pub use placement::{NO_NODES_MESSAGE, Unschedulable, schedule};
pub use resources::parse_milli;
