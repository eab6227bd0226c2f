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
