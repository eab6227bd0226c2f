//! Starting a container process: `clone3` into new PID, mount, UTS and IPC namespaces, then
//! in the child, the setup steps (mounts, `pivot_root`, capabilities, user) and `execve`.
//!
//! Why `clone3` in-process rather than a re-executed "pod init" helper: the library must work in
//! any binary, test harnesses included, where we cannot own `main`. The price is that the
//! child runs in a copy of a multi-threaded process, so between `clone3` and `execve` it may
//! only make system calls: every string and array it needs is prepared before the clone, and
//! the child allocates nothing, takes no lock and calls no libc function that could.
//!
//! All clones come from one thread that lives as long as the process, because the parent-death
//! signal (SIGKILL) is sent when the *thread* that created a child ends: if the process dies,
//! every container's PID 1 is killed, and with it its whole PID namespace.

use std::ffi::CString;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{OnceLock, mpsc};

use super::sys::MOVE_MOUNT_F_EMPTY_PATH;

/// One setup action the child performs, inside its new mount namespace, before `pivot_root`.
#[derive(Debug)]
pub(crate) enum SetupStep {
    /// `mount --make-rprivate /`, first of all, so nothing propagates back to the machine.
    PrivateMounts,
    Tmpfs {
        target: CString,
        options: CString,
    },
    /// An overlay whose lower layer is a directory of the machine (options name the layers).
    Overlay {
        target: CString,
        options: CString,
    },
    Mkdir {
        path: CString,
        mode: libc::mode_t,
    },
    /// An empty file to bind a file onto.
    Touch {
        path: CString,
    },
    Symlink {
        target: CString,
        link: CString,
    },
    Bind {
        source: CString,
        target: CString,
    },
    ReadOnly {
        target: CString,
    },
    /// A fresh procfs of the new PID namespace.
    Proc {
        target: CString,
    },
    /// Attach a detached mount (a clone made for this child) at `target`.
    Attach {
        mount: RawFd,
        target: CString,
    },
}

impl SetupStep {
    pub(crate) fn describe(&self) -> String {
        let show = |path: &CString| path.to_string_lossy().into_owned();
        match self {
            Self::PrivateMounts => "make / private in the container's mount namespace".into(),
            Self::Tmpfs { target, .. } => format!("mount a tmpfs on {}", show(target)),
            Self::Overlay { target, options } => {
                let options = show(options);
                let lower = options
                    .strip_prefix("lowerdir=")
                    .and_then(|rest| rest.split(',').next())
                    .unwrap_or("?");
                format!("mount an overlay of {lower} on {}", show(target))
            }
            Self::Mkdir { path, .. } => format!("create directory {}", show(path)),
            Self::Touch { path } => format!("create mount point {}", show(path)),
            Self::Symlink { target, link } => format!("link {} -> {}", show(link), show(target)),
            Self::Bind { source, target } => format!("bind {} on {}", show(source), show(target)),
            Self::ReadOnly { target } => format!("make {} read-only", show(target)),
            Self::Proc { target } => format!("mount /proc on {}", show(target)),
            Self::Attach { target, .. } => format!("attach a memory volume on {}", show(target)),
        }
    }
}

/// Everything the child needs, prepared by the parent.
#[derive(Debug)]
pub(crate) struct ChildPlan {
    pub(crate) netns: RawFd,
    pub(crate) hostname: CString,
    pub(crate) steps: Vec<SetupStep>,
    pub(crate) root: CString,
    pub(crate) workdir: CString,
    pub(crate) user: libc::uid_t,
    pub(crate) group: libc::gid_t,
    pub(crate) groups: Vec<libc::gid_t>,
    pub(crate) stdin: RawFd,
    pub(crate) stdout: RawFd,
    pub(crate) stderr: RawFd,
    /// Paths inside the root to try with `execve`, in order (the `PATH` search, done ahead).
    pub(crate) programs: Vec<CString>,
    pub(crate) argv: Vec<CString>,
    pub(crate) env: Vec<CString>,
    /// Capabilities removed from the bounding set, so no program of the container regains them.
    pub(crate) drop_capabilities: Vec<u32>,
}

/// Stages after the setup steps, reported through the error pipe in place of a step index.
const STAGE_NETNS: u32 = u32::MAX;
const STAGE_HOSTNAME: u32 = u32::MAX - 1;
const STAGE_STDIO: u32 = u32::MAX - 2;
const STAGE_ROOT: u32 = u32::MAX - 3;
const STAGE_WORKDIR: u32 = u32::MAX - 4;
const STAGE_USER: u32 = u32::MAX - 5;
const STAGE_EXEC: u32 = u32::MAX - 6;
const STAGE_CAPABILITIES: u32 = u32::MAX - 7;

/// A started container process.
#[derive(Debug)]
pub(crate) struct SpawnedProcess {
    pub(crate) pid: i32,
    pub(crate) pidfd: OwnedFd,
}

/// Why the child did not reach `execve`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SpawnError {
    #[error("could not start the container process: {0}")]
    Clone(#[source] io::Error),
    #[error("{stage}: {source}")]
    Setup { stage: String, source: io::Error },
    #[error("exec {program}: {source}")]
    Exec { program: String, source: io::Error },
}

struct SpawnRequest {
    plan: ChildPlan,
    error_pipe: RawFd,
    reply: mpsc::Sender<io::Result<SpawnedProcess>>,
}

/// Starts the process described by `plan` and waits until it has called `execve` (or failed).
pub(crate) fn spawn(plan: ChildPlan) -> Result<SpawnedProcess, SpawnError> {
    let (error_read, error_write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(|error| SpawnError::Clone(error.into()))?;
    let step_descriptions: Vec<String> = plan.steps.iter().map(SetupStep::describe).collect();
    let workdir = plan.workdir.to_string_lossy().into_owned();
    let (user, group) = (plan.user, plan.group);
    let describe = |stage: u32| match stage {
        STAGE_NETNS => "join the Pod's network namespace".to_string(),
        STAGE_HOSTNAME => "set the Pod's hostname".into(),
        STAGE_STDIO => "connect stdout and stderr".into(),
        STAGE_ROOT => "pivot_root into the container root".into(),
        STAGE_CAPABILITIES => "drop capabilities".into(),
        STAGE_WORKDIR => format!("change to working directory {workdir}"),
        STAGE_USER => format!("switch to user {user} group {group}"),
        index => step_descriptions
            .get(index as usize)
            .cloned()
            .unwrap_or_else(|| format!("setup stage {index}")),
    };
    let program = match plan.programs.as_slice() {
        [single] => single.to_string_lossy().into_owned(),
        _ => format!(
            "{:?} (searched in $PATH)",
            plan.argv
                .first()
                .map(|arg| arg.to_string_lossy())
                .unwrap_or_default()
        ),
    };
    let (reply, result) = mpsc::channel();
    spawner()
        .send(SpawnRequest {
            plan,
            error_pipe: error_write.as_raw_fd(),
            reply,
        })
        .map_err(|_| SpawnError::Clone(io::Error::other("the spawner thread is gone")))?;
    let spawned = result
        .recv()
        .map_err(|_| SpawnError::Clone(io::Error::other("the spawner thread is gone")))?
        .map_err(SpawnError::Clone)?;
    drop(error_write);

    let mut report = Vec::new();
    std::fs::File::from(error_read)
        .read_to_end(&mut report)
        .map_err(SpawnError::Clone)?;
    if report.len() < 8 {
        return Ok(spawned);
    }
    let stage = u32::from_ne_bytes(report[..4].try_into().expect("4 bytes"));
    let errno = i32::from_ne_bytes(report[4..8].try_into().expect("4 bytes"));
    let _ = super::sys::wait_pidfd(&spawned.pidfd);
    let source = io::Error::from_raw_os_error(errno);
    Err(if stage == STAGE_EXEC {
        SpawnError::Exec { program, source }
    } else {
        SpawnError::Setup {
            stage: describe(stage),
            source,
        }
    })
}

fn spawner() -> &'static mpsc::Sender<SpawnRequest> {
    static SPAWNER: OnceLock<mpsc::Sender<SpawnRequest>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (requests, queue) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("pod-spawner".into())
            .spawn(move || {
                while let Ok(request) = queue.recv() {
                    let spawned = clone_child(&request.plan, request.error_pipe);
                    let _ = request.reply.send(spawned);
                }
            })
            .expect("start the pod spawner thread");
        requests
    })
}

fn clone_child(plan: &ChildPlan, error_pipe: RawFd) -> io::Result<SpawnedProcess> {
    let argv = null_terminated(&plan.argv);
    let env = null_terminated(&plan.env);
    let mut pidfd: RawFd = -1;
    // SAFETY: an all-zero clone_args is valid; the fields set below follow clone3(2).
    let mut args: libc::clone_args = unsafe { std::mem::zeroed() };
    args.flags = (libc::CLONE_PIDFD
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWNS
        | libc::CLONE_NEWUTS
        | libc::CLONE_NEWIPC) as u64;
    args.pidfd = &mut pidfd as *mut RawFd as u64;
    args.exit_signal = libc::SIGCHLD as u64;
    // SAFETY: clone3 without CLONE_VM behaves like fork: the child gets a copy of this
    // address space and continues on a copy of this stack, where it only runs `child_main`.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &mut args as *mut libc::clone_args,
            std::mem::size_of::<libc::clone_args>(),
        )
    };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: we are the freshly cloned child; child_main never returns.
        unsafe { child_main(plan, &argv, &env, error_pipe) }
    }
    Ok(SpawnedProcess {
        pid: pid as i32,
        // SAFETY: clone3 stored a new pidfd owned by nobody else.
        pidfd: unsafe { OwnedFd::from_raw_fd(pidfd) },
    })
}

fn null_terminated(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings
        .iter()
        .map(|string| string.as_ptr())
        .chain([std::ptr::null()])
        .collect()
}

/// The child between clone and exec: system calls only, no allocation, no panics.
///
/// # Safety
/// Must only be called in the child right after `clone3`.
unsafe fn child_main(
    plan: &ChildPlan,
    argv: &[*const libc::c_char],
    env: &[*const libc::c_char],
    error_pipe: RawFd,
) -> ! {
    // SAFETY (whole body): every pointer passed below comes from a CString or array prepared
    // by the parent, alive in this copy of its memory; failures end the child through `fail`.
    unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        );
        reset_signals();
        if libc::setns(plan.netns, libc::CLONE_NEWNET) != 0 {
            fail(error_pipe, STAGE_NETNS);
        }
        if libc::sethostname(plan.hostname.as_ptr(), plan.hostname.as_bytes().len()) != 0 {
            fail(error_pipe, STAGE_HOSTNAME);
        }
        libc::umask(0);
        for (index, step) in plan.steps.iter().enumerate() {
            if !run_step(step) {
                fail(error_pipe, index as u32);
            }
        }
        if libc::dup2(plan.stdin, 0) < 0
            || libc::dup2(plan.stdout, 1) < 0
            || libc::dup2(plan.stderr, 2) < 0
        {
            fail(error_pipe, STAGE_STDIO);
        }
        // pivot_root(".", ".") stacks the old root on the new one; detaching it leaves the
        // machine's tree unreachable from the container (a chroot could be escaped).
        if libc::chdir(plan.root.as_ptr()) != 0
            || libc::syscall(libc::SYS_pivot_root, c".".as_ptr(), c".".as_ptr()) != 0
            || libc::umount2(c".".as_ptr(), libc::MNT_DETACH) != 0
            || libc::chdir(c"/".as_ptr()) != 0
        {
            fail(error_pipe, STAGE_ROOT);
        }
        if libc::chdir(plan.workdir.as_ptr()) != 0 {
            fail(error_pipe, STAGE_WORKDIR);
        }
        for capability in &plan.drop_capabilities {
            if libc::prctl(libc::PR_CAPBSET_DROP, *capability as libc::c_ulong, 0, 0, 0) != 0 {
                fail(error_pipe, STAGE_CAPABILITIES);
            }
        }
        // Raw system calls: glibc's set*id would try to signal threads that exist only in the
        // parent.
        if libc::syscall(libc::SYS_setgroups, plan.groups.len(), plan.groups.as_ptr()) != 0
            || libc::syscall(libc::SYS_setresgid, plan.group, plan.group, plan.group) != 0
            || libc::syscall(libc::SYS_setresuid, plan.user, plan.user, plan.user) != 0
        {
            fail(error_pipe, STAGE_USER);
        }
        // A change of user clears the parent-death signal: set it again.
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        );
        libc::umask(0o022);
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        );
        let mut errno = libc::ENOENT;
        for program in &plan.programs {
            libc::execve(program.as_ptr(), argv.as_ptr(), env.as_ptr());
            let error = *libc::__errno_location();
            // As execvp: keep looking past missing files, remember a permission problem.
            if error != libc::ENOENT && error != libc::ENOTDIR && errno == libc::ENOENT {
                errno = error;
            }
        }
        *libc::__errno_location() = errno;
        fail(error_pipe, STAGE_EXEC)
    }
}

/// Default dispositions and an empty signal mask, as a freshly exec'd program expects
/// (the parent ignores SIGPIPE, which exec would otherwise pass on).
unsafe fn reset_signals() {
    // SAFETY: zeroed sigaction with SIG_DFL is valid; errors for SIGKILL/SIGSTOP and the
    // signals glibc reserves are expected and ignored.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = libc::SIG_DFL;
        for signal in 1..=64 {
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
        let empty: u64 = 0;
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &empty as *const u64,
            std::ptr::null_mut::<u64>(),
            8usize,
        );
    }
}

/// Performs one step; `false` leaves the reason in errno.
unsafe fn run_step(step: &SetupStep) -> bool {
    let null = std::ptr::null::<libc::c_char>();
    // SAFETY: pointers come from CStrings owned by the plan.
    unsafe {
        match step {
            SetupStep::PrivateMounts => {
                libc::mount(
                    null,
                    c"/".as_ptr(),
                    null,
                    libc::MS_REC | libc::MS_PRIVATE,
                    std::ptr::null(),
                ) == 0
            }
            SetupStep::Tmpfs { target, options } => {
                libc::mount(
                    c"tmpfs".as_ptr(),
                    target.as_ptr(),
                    c"tmpfs".as_ptr(),
                    libc::MS_NOSUID,
                    options.as_ptr().cast(),
                ) == 0
            }
            SetupStep::Overlay { target, options } => {
                libc::mount(
                    c"overlay".as_ptr(),
                    target.as_ptr(),
                    c"overlay".as_ptr(),
                    libc::MS_NOSUID,
                    options.as_ptr().cast(),
                ) == 0
            }
            SetupStep::Mkdir { path, mode } => {
                libc::mkdir(path.as_ptr(), *mode) == 0 || *libc::__errno_location() == libc::EEXIST
            }
            SetupStep::Touch { path } => {
                let fd = libc::open(
                    path.as_ptr(),
                    libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                    0o644,
                );
                fd >= 0 && libc::close(fd) == 0
            }
            SetupStep::Symlink { target, link } => {
                libc::symlink(target.as_ptr(), link.as_ptr()) == 0
            }
            SetupStep::Bind { source, target } => {
                libc::mount(
                    source.as_ptr(),
                    target.as_ptr(),
                    null,
                    libc::MS_BIND | libc::MS_REC,
                    std::ptr::null(),
                ) == 0
            }
            SetupStep::ReadOnly { target } => {
                libc::mount(
                    null,
                    target.as_ptr(),
                    null,
                    libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY,
                    std::ptr::null(),
                ) == 0
            }
            SetupStep::Proc { target } => {
                libc::mount(
                    c"proc".as_ptr(),
                    target.as_ptr(),
                    c"proc".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    std::ptr::null(),
                ) == 0
            }
            SetupStep::Attach { mount, target } => {
                libc::syscall(
                    libc::SYS_move_mount,
                    *mount,
                    c"".as_ptr(),
                    libc::AT_FDCWD,
                    target.as_ptr(),
                    MOVE_MOUNT_F_EMPTY_PATH,
                ) == 0
            }
        }
    }
}

/// Reports `stage` and errno to the parent and ends the child.
unsafe fn fail(error_pipe: RawFd, stage: u32) -> ! {
    // SAFETY: write(2) of a stack buffer, then _exit(2).
    unsafe {
        let errno = *libc::__errno_location();
        let mut report = [0u8; 8];
        report[..4].copy_from_slice(&stage.to_ne_bytes());
        report[4..].copy_from_slice(&errno.to_ne_bytes());
        libc::write(error_pipe, report.as_ptr().cast(), report.len());
        libc::_exit(127)
    }
}
