//! etcd's own defaults, where the operator needs them to read a spec that leaves them unset.

/// etcd's `--quota-backend-bytes` when a member's spec leaves it unset or 0 (2 GiB).
pub const DEFAULT_QUOTA_BACKEND_BYTES: i64 = 2 * 1024 * 1024 * 1024;
