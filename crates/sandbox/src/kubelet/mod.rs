//! The node agent: runs the Pods bound to each sandbox node as real processes and reports their status.
