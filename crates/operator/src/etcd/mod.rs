//! The etcd client wrapper: membership, status, alarms, leadership, with timeouts.
