//! Thin wrappers over the Linux system calls the runtime needs and nix does not cover:
//! pidfds, and the new mount API for detached mounts (memory-backed volumes).

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// `fsconfig` commands and flags from `<linux/mount.h>`.
const FSOPEN_CLOEXEC: libc::c_uint = 0x1;
const FSCONFIG_SET_STRING: libc::c_uint = 1;
const FSCONFIG_CMD_CREATE: libc::c_uint = 6;
const FSMOUNT_CLOEXEC: libc::c_uint = 0x1;
const OPEN_TREE_CLONE: libc::c_uint = 1;
pub(crate) const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;

fn check(result: libc::c_long) -> io::Result<libc::c_long> {
    if result < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(result)
    }
}

/// A mount that belongs to no mount namespace until a child attaches a clone of it; it is
/// freed when the last descriptor and attachment go, so nothing can leak onto the machine.
#[derive(Debug)]
pub(crate) struct DetachedMount {
    fd: OwnedFd,
}

impl DetachedMount {
    /// A tmpfs with the given options, e.g. `[("size", "64m"), ("mode", "0777")]`.
    pub(crate) fn tmpfs(options: &[(&CStr, &CStr)]) -> io::Result<Self> {
        // SAFETY: each call passes valid NUL-terminated strings and checks the result; the
        // descriptors returned are owned right away.
        unsafe {
            let context = check(libc::syscall(
                libc::SYS_fsopen,
                c"tmpfs".as_ptr(),
                FSOPEN_CLOEXEC,
            ))?;
            let context = OwnedFd::from_raw_fd(context as RawFd);
            for (key, value) in options {
                check(libc::syscall(
                    libc::SYS_fsconfig,
                    context.as_raw_fd(),
                    FSCONFIG_SET_STRING,
                    key.as_ptr(),
                    value.as_ptr(),
                    0,
                ))?;
            }
            check(libc::syscall(
                libc::SYS_fsconfig,
                context.as_raw_fd(),
                FSCONFIG_CMD_CREATE,
                std::ptr::null::<libc::c_char>(),
                std::ptr::null::<libc::c_char>(),
                0,
            ))?;
            let mount = check(libc::syscall(
                libc::SYS_fsmount,
                context.as_raw_fd(),
                FSMOUNT_CLOEXEC,
                0,
            ))?;
            Ok(Self {
                fd: OwnedFd::from_raw_fd(mount as RawFd),
            })
        }
    }

    /// A detached copy for one container to attach with `move_mount` (each attachment needs
    /// its own copy; all copies show the same files).
    pub(crate) fn clone_tree(&self) -> io::Result<OwnedFd> {
        // SAFETY: valid descriptor and empty path with AT_EMPTY_PATH; result checked and owned.
        unsafe {
            let fd = check(libc::syscall(
                libc::SYS_open_tree,
                self.fd.as_raw_fd(),
                c"".as_ptr(),
                OPEN_TREE_CLONE
                    | libc::O_CLOEXEC as libc::c_uint
                    | libc::AT_EMPTY_PATH as libc::c_uint,
            ))?;
            Ok(OwnedFd::from_raw_fd(fd as RawFd))
        }
    }
}

/// Sends `signal` through a pidfd, which cannot hit a recycled process id.
pub(crate) fn pidfd_send_signal(pidfd: &OwnedFd, signal: libc::c_int) -> io::Result<()> {
    // SAFETY: plain system call on a valid descriptor with no siginfo.
    check(unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            signal,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    })
    .map(drop)
}

/// How a child ended, from `waitid`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ChildExit {
    Exited(i32),
    Signaled(i32),
}

/// Waits for the child behind `pidfd` to end and reaps it.
pub(crate) fn wait_pidfd(pidfd: &OwnedFd) -> io::Result<ChildExit> {
    loop {
        // SAFETY: zeroed siginfo_t is a valid out-parameter for waitid.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: valid descriptor and out-pointer.
        let result = unsafe {
            libc::waitid(
                libc::P_PIDFD,
                pidfd.as_raw_fd() as libc::id_t,
                &mut info,
                libc::WEXITED,
            )
        };
        if result != 0 {
            let error = io::Error::last_os_error();
            if error.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(error);
        }
        // SAFETY: waitid filled in a SIGCHLD siginfo, whose status field is valid to read.
        let status = unsafe { info.si_status() };
        return Ok(match info.si_code {
            libc::CLD_EXITED => ChildExit::Exited(status),
            _ => ChildExit::Signaled(status),
        });
    }
}

/// The open-file limit the runtime wants, given the current soft and hard limits and the
/// kernel's ceiling (`/proc/sys/fs/nr_open`, `None` where the hard limit may not rise): the
/// ceiling, else the hard limit; never lower than what is in force. As containerd's systemd
/// unit (`LimitNOFILE=infinity`) gives the real runtime.
pub(crate) fn wanted_open_files(soft: u64, hard: u64, ceiling: Option<u64>) -> (u64, u64) {
    let hard = ceiling.map_or(hard, |ceiling| hard.max(ceiling));
    (soft.max(hard), hard)
}

/// Raises this process's open-file limit (inherited by the Pods it starts) to
/// [`wanted_open_files`]. The process holds descriptors for every Pod (its pidfd, network
/// namespace and output pipes: four or more) and for the cluster network's Services and
/// probes (docs/testing.md, "Thousands of Pods"). Where the hard limit cannot rise (root
/// without `CAP_SYS_RESOURCE`, as in some containers) the soft one still rises to it. Returns
/// the soft limit in force after.
pub(crate) fn raise_open_files_limit() -> io::Result<u64> {
    let current = open_files_limit()?;
    let ceiling = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok());
    // The runtime runs as root; without `CAP_SYS_RESOURCE` the ceiling is refused, and the
    // hard limit is what the soft one can reach.
    let wanted = wanted_open_files(current.0, current.1, ceiling);
    if set_open_files_limit(current, wanted).is_ok() {
        return Ok(wanted.0);
    }
    let within = wanted_open_files(current.0, current.1, None);
    set_open_files_limit(current, within)?;
    Ok(within.0)
}

/// The soft and hard open-file limits in force.
pub(crate) fn open_files_limit() -> io::Result<(u64, u64)> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((limit.rlim_cur, limit.rlim_max))
}

/// Sets the open-file limits to `wanted` unless they are `current` already.
fn set_open_files_limit(current: (u64, u64), wanted: (u64, u64)) -> io::Result<()> {
    if wanted == current {
        return Ok(());
    }
    let limit = libc::rlimit {
        rlim_cur: wanted.0,
        rlim_max: wanted.1,
    };
    // SAFETY: setrlimit reads the struct it is given.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod open_files_tests {
    use super::*;

    #[test]
    fn the_limit_rises_to_the_ceiling_and_else_to_the_hard_limit() {
        assert_eq!(
            wanted_open_files(1024, 20_000, Some(1_048_576)),
            (1_048_576, 1_048_576)
        );
        assert_eq!(
            wanted_open_files(1024, 20_000, None),
            (20_000, 20_000),
            "no ceiling (not read, or refused): the hard limit"
        );
        assert_eq!(
            wanted_open_files(4096, 2_000_000, Some(1_048_576)),
            (2_000_000, 2_000_000),
            "never lowered"
        );
    }

    #[test]
    fn the_process_limit_is_raised_at_least_to_its_hard_limit() {
        let before = open_files_limit().expect("the open-file limit");
        let soft = raise_open_files_limit().expect("raising the open-file limit");
        let (now_soft, now_hard) = open_files_limit().expect("the open-file limit");
        assert_eq!(now_soft, soft);
        assert_eq!(now_soft, now_hard, "the soft limit is at the hard one");
        assert!(now_hard >= before.1, "the hard limit never falls");
    }
}
