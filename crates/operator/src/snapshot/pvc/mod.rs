//! `destination.pvc`: the operator cannot mount a claim, so a Pod does the writing. The Pod
//! runs the operator's own image as an agent (`etcd-operator snapshot-save`), mounts the
//! claim, streams the snapshot from the voter the controller chose (with the same CA, client
//! certificate and root credentials the operator dials with, from a Secret the operator makes
//! for that Pod alone), writes `<subPath>/<name>.db` atomically (temporary file, fsync,
//! rename, fsync of the directory) with a `<name>.db.uid` file naming the EtcdSnapshot that
//! wrote it (the reference's overwrite guard), reads it back, and reports through its
//! termination message (one line `EtcdSnapshotResult <json>`), never through its log.
//!
//! The pure parts beside the agent's I/O:
//! - here: the mounts, labels and markers all three share;
//! - `outcome`: where the file goes, whether the claim is usable, the agent's result and how
//!   its Pod ended (pure);
//! - `pod`: the agent's Pod and its access Secret (pure);
//! - `agent`: the agent's I/O in its Pod (`snapshot-save`, `snapshot-remove`).

mod agent;
mod outcome;
mod pod;

pub use agent::{SaveArgs, hash_file, remove, report, save};
pub(crate) use outcome::not_started_reason;
pub use outcome::{
    AgentResult, PodOutcome, START_DEADLINE_SECONDS, Saved, claim_usable, parse_result,
    pod_outcome, relative_path, result_line,
};
pub use pod::{AgentEncoding, AgentTask, access_secret, access_secret_data, agent_pod, pod_name};

/// Where the claim is mounted in the agent's Pod.
pub const PVC_MOUNT: &str = "/snapshot/data";

/// Where the access Secret (CA, client certificate, credentials) is mounted.
pub const ACCESS_MOUNT: &str = "/etc/etcd-snapshot/access";

/// The label that finds the Pod of one EtcdSnapshot (its uid).
pub const SNAPSHOT_UID_LABEL: &str = "etcd-operator.cozystack.io/snapshot-uid";

/// The label naming what the Pod does (`save` or `remove`).
pub const ROLE_LABEL: &str = "etcd-operator.cozystack.io/snapshot-agent";

/// The agent's container.
pub const CONTAINER: &str = "snapshot";

/// The sibling file recording which EtcdSnapshot wrote `<name>.db` (`<name>.db.uid`), as the
/// reference operator names it.
pub const UID_SUFFIX: &str = ".uid";

/// The first word of the agent's termination message.
pub const RESULT_MARK: &str = "EtcdSnapshotResult";

/// Where the agent writes its result (Kubernetes' default `terminationMessagePath`).
pub const TERMINATION_LOG: &str = "/dev/termination-log";

/// The uid and gid the agent runs as (the members' too).
const RUN_AS: i64 = 65532;

#[cfg(test)]
mod tests;
