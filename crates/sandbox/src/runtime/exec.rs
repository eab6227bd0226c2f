//! Commands run inside a running container, as exec probes and `kubectl exec` run them: the
//! child joins the container's mount, UTS, IPC and network namespaces through a pidfd of its
//! process (so its root is the container's root), then takes the container's user, groups,
//! working directory and environment. It stays out of the container's PID namespace: joining
//! one keeps a process from starting threads (Go programs such as etcdctl would fail), and
//! entering it properly takes a second fork; `/proc` still shows the container's processes.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

use super::RuntimeError;

/// What a command run in a container takes from it; serializable, so another process (the
/// `kube-sandbox exec --pod` command) can join the container too.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerExec {
    pub container: String,
    /// The container's process as this machine sees it.
    pub pid: i32,
    pub env: Vec<(String, String)>,
    pub run_as_user: Option<u32>,
    pub run_as_group: Option<u32>,
    pub supplemental_groups: Vec<u32>,
    pub working_dir: Option<String>,
}

impl ContainerExec {
    /// A command joined to the container, from any process of this machine (root).
    pub fn command(&self, command: &[String]) -> Result<Command, RuntimeError> {
        // SAFETY: pidfd_open(2) has no memory-safety preconditions; the result is checked.
        let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, self.pid, 0) };
        if raw < 0 {
            return Err(RuntimeError::NotRunning(self.container.clone()));
        }
        // SAFETY: the kernel just returned this descriptor to us alone.
        let pidfd = unsafe { OwnedFd::from_raw_fd(raw as i32) };
        self.command_with(pidfd, command)
    }

    /// A command joined to the container through `pidfd`, a descriptor of its process.
    pub(crate) fn command_with(
        &self,
        pidfd: OwnedFd,
        command: &[String],
    ) -> Result<Command, RuntimeError> {
        let invalid = |reason: String| RuntimeError::InvalidContainer {
            container: self.container.clone(),
            reason,
        };
        let Some(program) = command.first() else {
            return Err(invalid("exec needs a command".into()));
        };
        let working_dir = CString::new(self.working_dir.clone().unwrap_or_else(|| "/".into()))
            .map_err(|_| invalid("the working directory contains a NUL byte".into()))?;
        let user = self.run_as_user;
        let group = self.run_as_group.or(user.map(|_| 0));
        let mut groups: Vec<libc::gid_t> = self.supplemental_groups.clone();
        groups.extend(group);
        let mut child = Command::new(program);
        child
            .args(&command[1..])
            .env_clear()
            .envs(self.env.iter().cloned());
        let namespaces =
            libc::CLONE_NEWNS | libc::CLONE_NEWUTS | libc::CLONE_NEWIPC | libc::CLONE_NEWNET;
        // SAFETY: the closure runs in the forked child before exec and only makes system calls
        // on values prepared before the fork (no allocation, no locks).
        unsafe {
            child.pre_exec(move || {
                let check = |result: libc::c_int| {
                    if result == 0 {
                        Ok(())
                    } else {
                        Err(std::io::Error::last_os_error())
                    }
                };
                check(libc::setns(pidfd.as_raw_fd(), namespaces))?;
                check(libc::chdir(working_dir.as_ptr()))?;
                if let Some(gid) = group {
                    check(libc::setgroups(groups.len(), groups.as_ptr()))?;
                    check(libc::setgid(gid))?;
                }
                if let Some(uid) = user {
                    check(libc::setuid(uid))?;
                }
                Ok(())
            });
        }
        Ok(child)
    }
}
