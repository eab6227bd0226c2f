//! `EtcdSnapshot`: one snapshot of a cluster through etcd's snapshot API, streamed from a
//! healthy voter to an S3-compatible store, checked on the way (etcd's trailing SHA-256, the
//! object's own SHA-256 and size) and read back after upload.
//!
//! - [`decide`]: pure decisions (next phase, voter, object name, overwrite guard, statuses,
//!   failure sentences).
//! - [`codec`]: the byte pipeline: compression (zstd, gzip) and encryption (age) on the way
//!   to the store, decoding on the way back, with the figures verification compares.
//! - [`digest`]: the streaming SHA-256 and etcd's trailer check.
//! - [`revision`]: the revision and key count a snapshot holds, read from its bbolt pages as
//!   they stream (as `etcdutl snapshot status` reads them).
//! - [`pvc`]: `destination.pvc`, written by an agent Pod that mounts the claim.
//! - [`store`]: the S3 store (object_store) and its errors in plain words.
//! - [`verify`]: `verify: Restore`, the restore check in a throwaway etcd's Pod.
//! - [`controller`]: the kube-runtime controller and the I/O of one snapshot.

pub mod codec;
pub mod controller;
pub mod decide;
pub mod digest;
pub mod pvc;
pub mod restore;
pub mod revision;
pub mod schedule;
pub mod schedule_controller;
pub mod store;
pub mod verify;

pub use controller::{SnapshotContext, run_snapshot_controller};
