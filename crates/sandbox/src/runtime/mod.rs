//! A container runtime of processes: each Pod in its own namespaces, chrooted, with its volumes.
