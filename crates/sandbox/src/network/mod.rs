//! The cluster network: its own network namespace, a bridge, Pod addresses, DNS and a Service proxy.
