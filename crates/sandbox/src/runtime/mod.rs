//! A container runtime of processes: each Pod in its own namespaces, chrooted, with its volumes.
//!
//! Every container is PID 1 of its own PID namespace (as with the default
//! `shareProcessNamespace: false`), in its own mount, UTS and IPC namespaces, and joined to
//! its Pod's network namespace. It enters its root with `pivot_root` (the machine's tree is
//! detached, so it cannot be reached as from a chroot) and keeps Docker's default
//! capabilities without `MKNOD` unless privileged. Its root is a tmpfs holding the machine's `/usr`, `/lib*`,
//! `/bin`, `/sbin` read-only, the image's files (host binaries from the [`ImageMap`]), the
//! Pod's `/etc/hosts`, `/etc/resolv.conf` and `/etc/hostname`, `/dev` basics, a fresh `/proc`,
//! `/tmp`, and the volumes at their `mountPath`s.
//!
//! Nothing leaks: every mount happens in a container's private mount namespace (made
//! `rprivate` first) and vanishes with it; memory volumes are detached mounts held by a
//! descriptor; each container's PID 1 gets SIGKILL when this process dies, which ends its PID
//! namespace; the state directory is removed on drop, or by the next runtime if this process
//! was killed.
//!
//! Not done: memory limits and OOMKilled (no cgroups are created: the sandbox runs inside a
//! cgroup it does not manage), user namespaces (containers run as real uids of the machine).

mod container;
pub mod env;
mod exec;
mod image;
mod launch;
mod logs;
mod pod;
mod rootfs;
mod spawn;
mod spec;
mod state_dir;
mod sys;
mod volumes;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use container::{Termination, TerminationReason};
pub use exec::ContainerExec;
pub use image::{ImageError, ImageMap, ImageRule};
pub use logs::{LogOptions, render as render_log};
pub use pod::PodSandbox;
pub use rootfs::InvalidContainerPath;
pub use spec::{
    ContainerConfig, ContainerState, ContainerStatus, PodSandboxConfig, Volume, VolumeMount,
    VolumeSource, hosts_file,
};
pub use state_dir::StateDir;
pub(crate) use sys::open_files_limit;
pub use volumes::{PersistentVolumeStore, ProjectedFile, VolumeError};

/// Errors of the runtime; [`RuntimeError::reason`] gives the Kubernetes waiting reason.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error(transparent)]
    Image(#[from] ImageError),
    #[error(transparent)]
    Volume(#[from] VolumeError),
    #[error(transparent)]
    InvalidPath(#[from] InvalidContainerPath),
    #[error("invalid {what} {name:?}")]
    InvalidName { what: &'static str, name: String },
    #[error("container {container}: {reason}")]
    InvalidContainer { container: String, reason: String },
    #[error("container {container} could not start: {message}")]
    Start { container: String, message: String },
    #[error("container {0} is already running")]
    AlreadyRunning(String),
    #[error("container {0} is not running")]
    NotRunning(String),
    #[error("no container {0} has been started in this Pod")]
    NoSuchContainer(String),
    #[error("container {container} has no {} log", if *.previous { "previous" } else { "current" })]
    NoLog { container: String, previous: bool },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
}

impl RuntimeError {
    /// The reason a kubelet reports for a container this error kept from running:
    /// `ErrImagePull` for an unmapped image, `CreateContainerConfigError` for a container
    /// that cannot be set up, `StartError` when its program could not be executed.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Image(_) => "ErrImagePull",
            Self::Start { .. } => "StartError",
            Self::Volume(_)
            | Self::InvalidPath(_)
            | Self::InvalidName { .. }
            | Self::InvalidContainer { .. } => "CreateContainerConfigError",
            _ => "CreateContainerError",
        }
    }
}

/// How to set up a runtime.
#[derive(Clone, Debug)]
pub struct RuntimeConfig {
    /// Parent of the runtime's state directory, e.g. `/tmp/kube-sandbox`.
    pub state_root: PathBuf,
    pub images: ImageMap,
}

/// What every Pod of a runtime shares.
pub(crate) struct RuntimeShared {
    state: StateDir,
    images: ImageMap,
    system_dirs: Vec<(String, rootfs::HostEntry)>,
    volumes: PersistentVolumeStore,
}

/// The runtime of one sandbox (all its nodes may share it). Cheap to clone.
#[derive(Clone)]
pub struct ContainerRuntime {
    shared: Arc<RuntimeShared>,
}

impl ContainerRuntime {
    /// Creates the state directory (sweeping those of runtimes that died) and checks that
    /// this process may create namespaces.
    pub fn new(config: RuntimeConfig) -> Result<Self, RuntimeError> {
        if !nix::unistd::geteuid().is_root() {
            return Err(RuntimeError::Io {
                context: "the process runtime".into(),
                source: io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    "it creates namespaces and mounts: run as root",
                ),
            });
        }
        // Thousands of Pods need more descriptors than a shell's usual limit: raise it as
        // containerd's service unit does; a failure leaves the limit and says so.
        match sys::raise_open_files_limit() {
            Ok(limit) => tracing::debug!(limit, "open-file limit"),
            Err(error) => tracing::warn!(%error, "could not raise the open-file limit"),
        }
        let state = StateDir::create(&config.state_root).map_err(|source| RuntimeError::Io {
            context: format!(
                "create the state directory under {}",
                config.state_root.display()
            ),
            source,
        })?;
        let volumes =
            PersistentVolumeStore::new(state.path().join("volumes")).map_err(|source| {
                RuntimeError::Io {
                    context: "create the volume store".into(),
                    source,
                }
            })?;
        Ok(Self {
            shared: Arc::new(RuntimeShared {
                state,
                images: config.images,
                system_dirs: rootfs::host_system_dirs(),
                volumes,
            }),
        })
    }

    /// The runtime's state directory (removed when the last clone and Pod are dropped).
    pub fn state_dir(&self) -> &Path {
        self.shared.state.path()
    }

    pub fn images(&self) -> &ImageMap {
        &self.shared.images
    }

    /// The directories behind PersistentVolumeClaims.
    pub fn persistent_volumes(&self) -> &PersistentVolumeStore {
        &self.shared.volumes
    }

    /// Prepares a Pod: its directory, `/etc` files and volumes. Containers start with
    /// [`PodSandbox::start_container`].
    pub fn create_pod(&self, config: PodSandboxConfig) -> Result<PodSandbox, RuntimeError> {
        PodSandbox::create(self.shared.clone(), config)
    }
}
