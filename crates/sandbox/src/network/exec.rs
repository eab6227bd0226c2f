//! Running commands inside the cluster network with the cluster DNS, from this process or from
//! another one (`kube-sandbox exec --dir DIR -- COMMAND...`).

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::NetworkError;
use super::cidr::Ipv4Cidr;

/// What another process needs to enter a running cluster network; the network writes it as
/// [`ClusterNetworkInfo::FILE_NAME`] into its state directory.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterNetworkInfo {
    /// `/proc/PID/task/TID/ns/net` of the thread that lives in the network.
    pub netns_path: PathBuf,
    /// Inode of that namespace, so a recycled thread id is never mistaken for it.
    pub netns_inode: u64,
    /// A resolv.conf pointing at the cluster DNS, bound over `/etc/resolv.conf` for commands.
    pub resolv_conf: PathBuf,
    pub dns_server: Ipv4Addr,
    pub pod_cidr: Ipv4Cidr,
    pub service_cidr: Ipv4Cidr,
    pub cluster_domain: String,
}

impl ClusterNetworkInfo {
    pub const FILE_NAME: &'static str = "cluster-network.json";

    /// Reads the description a running sandbox left in `dir`.
    pub fn load(dir: &Path) -> Result<Self, NetworkError> {
        let path = dir.join(Self::FILE_NAME);
        let text =
            std::fs::read_to_string(&path).map_err(|source| NetworkError::NoRunningNetwork {
                path: path.clone(),
                reason: source.to_string(),
            })?;
        serde_json::from_str(&text).map_err(|source| NetworkError::NoRunningNetwork {
            path,
            reason: source.to_string(),
        })
    }

    /// A command that runs inside this cluster network with the cluster DNS.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Result<Command, NetworkError> {
        let stale = |reason: String| NetworkError::NoRunningNetwork {
            path: self.netns_path.clone(),
            reason,
        };
        let namespace = File::open(&self.netns_path)
            .map_err(|error| stale(format!("{error}; is the sandbox still running?")))?;
        let inode = namespace
            .metadata()
            .map_err(|error| stale(error.to_string()))?
            .ino();
        if inode != self.netns_inode {
            return Err(stale(
                "the sandbox that owned this network has exited".into(),
            ));
        }
        cluster_command(OwnedFd::from(namespace), &self.resolv_conf, program)
    }
}

/// A command joined to the namespace `netns`, in a private mount namespace where
/// `resolv_conf` is bound over `/etc/resolv.conf`. The machine's own namespaces are untouched:
/// all of it happens in the child between fork and exec.
pub(crate) fn cluster_command(
    netns: OwnedFd,
    resolv_conf: &Path,
    program: impl AsRef<std::ffi::OsStr>,
) -> Result<Command, NetworkError> {
    let source = CString::new(resolv_conf.as_os_str().as_bytes())
        .map_err(|_| NetworkError::Io(io::Error::other("resolv.conf path contains NUL")))?;
    let target = c"/etc/resolv.conf";
    let root = c"/";
    let mut command = Command::new(program);
    // SAFETY: the closure calls only async-signal-safe system calls on values prepared before
    // the fork; it allocates nothing.
    unsafe {
        command.pre_exec(move || {
            let check = |result: libc::c_int| {
                if result == 0 {
                    Ok(())
                } else {
                    Err(io::Error::last_os_error())
                }
            };
            check(libc::setns(netns.as_raw_fd(), libc::CLONE_NEWNET))?;
            check(libc::unshare(libc::CLONE_NEWNS))?;
            check(libc::mount(
                std::ptr::null(),
                root.as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ))?;
            check(libc::mount(
                source.as_ptr(),
                target.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND,
                std::ptr::null(),
            ))
        });
    }
    Ok(command)
}
