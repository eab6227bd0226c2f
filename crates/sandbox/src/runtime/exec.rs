//! Commands run inside a running container, as exec probes and `kubectl exec` run them: the
//! child joins the container's mount, UTS, IPC, network and PID namespaces through its pidfd
//! (so its root is the container's root), then takes the container's user, groups and working
//! directory. Its own children are in the container's PID namespace; the command itself is not.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

use super::RuntimeError;
use super::spec::ContainerConfig;

/// A command joined to the namespaces of the process behind `pidfd`.
pub(crate) fn command_in(
    pidfd: OwnedFd,
    env: Vec<(String, String)>,
    config: &ContainerConfig,
    command: &[String],
) -> Result<Command, RuntimeError> {
    let invalid = |reason: String| RuntimeError::InvalidContainer {
        container: config.name.clone(),
        reason,
    };
    let Some(program) = command.first() else {
        return Err(invalid("exec needs a command".into()));
    };
    let working_dir = CString::new(config.working_dir.clone().unwrap_or_else(|| "/".into()))
        .map_err(|_| invalid("the working directory contains a NUL byte".into()))?;
    let user = config.run_as_user;
    let group = config.run_as_group.or(user.map(|_| 0));
    let mut groups: Vec<libc::gid_t> = config.supplemental_groups.clone();
    groups.extend(group);
    let mut child = Command::new(program);
    child.args(&command[1..]).env_clear().envs(env);
    let namespaces = libc::CLONE_NEWNS
        | libc::CLONE_NEWUTS
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWNET
        | libc::CLONE_NEWPID;
    // SAFETY: the closure runs in the forked child before exec and only makes system calls on
    // values prepared before the fork (no allocation, no locks).
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
