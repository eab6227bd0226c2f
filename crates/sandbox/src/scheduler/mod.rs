//! The scheduler: binds Pods to nodes, honouring selectors, affinity, spread constraints and taints.
