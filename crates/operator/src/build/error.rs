//! Why a builder could not build.

/// Why an object could not be built: the input lacks something the API server always sets.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    #[error("{kind} has no metadata.{field}; it must be read from the API server first")]
    MissingMetadata {
        kind: &'static str,
        field: &'static str,
    },
    #[error("the EtcdCluster has no {field} yet; it is latched on the first reconcile")]
    NotLatched { field: &'static str },
    #[error("etcd {version} is not a version this operator runs (it runs etcd {range})")]
    UnsupportedVersion { version: String, range: String },
    #[error("etcd {version} does not accept the flags {flags:?} (checked against its etcd --help)")]
    UnsupportedFlags { version: String, flags: Vec<String> },
}
