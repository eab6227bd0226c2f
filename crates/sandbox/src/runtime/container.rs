//! One run of a container: its process, the thread that copies its output to the log and
//! reaps it, its termination in Kubernetes terms, signals and graceful stop.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use jiff::Timestamp;
use tokio::sync::watch;

use super::logs::{LogWriter, Stream};
use super::sys::{ChildExit, pidfd_send_signal, wait_pidfd};

/// How long output is still collected after the process ended (the PID namespace is gone by
/// then, so the pipes close at once unless a descriptor escaped).
const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(1);

/// Why a container ended, as `state.terminated.reason` says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TerminationReason {
    /// Exit code 0.
    Completed,
    /// Any other exit code, or killed by a signal.
    Error,
}

impl TerminationReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "Completed",
            Self::Error => "Error",
        }
    }
}

/// `state.terminated` of a container status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Termination {
    /// The exit code, or 128 + the signal number for a process killed by a signal.
    pub exit_code: i32,
    pub signal: Option<i32>,
    pub reason: TerminationReason,
    pub started_at: Timestamp,
    pub finished_at: Timestamp,
}

impl Termination {
    fn from_exit(exit: ChildExit, started_at: Timestamp) -> Self {
        let (exit_code, signal) = match exit {
            ChildExit::Exited(code) => (code, None),
            ChildExit::Signaled(signal) => (128 + signal, Some(signal)),
        };
        Self {
            exit_code,
            signal,
            reason: if exit_code == 0 {
                TerminationReason::Completed
            } else {
                TerminationReason::Error
            },
            started_at,
            finished_at: Timestamp::now(),
        }
    }
}

/// The process of one container run.
pub(crate) struct ContainerProcess {
    pid: i32,
    pidfd: Arc<OwnedFd>,
    started_at: Timestamp,
    terminated: watch::Receiver<Option<Termination>>,
    monitor: Mutex<Option<JoinHandle<()>>>,
}

impl ContainerProcess {
    /// Watches a started process: copies `stdout`/`stderr` into `log`, reaps it when it ends.
    pub(crate) fn watch(
        pid: i32,
        pidfd: OwnedFd,
        stdout: OwnedFd,
        stderr: OwnedFd,
        log: LogWriter,
    ) -> std::io::Result<Self> {
        let started_at = Timestamp::now();
        let pidfd = Arc::new(pidfd);
        let (report, terminated) = watch::channel(None);
        let monitor_pidfd = pidfd.clone();
        let monitor = std::thread::Builder::new()
            .name(format!("container-{pid}"))
            .spawn(move || {
                let exit = copy_output_until_exit(&monitor_pidfd, stdout, stderr, log);
                let _ = report.send(Some(Termination::from_exit(exit, started_at)));
            })?;
        Ok(Self {
            pid,
            pidfd,
            started_at,
            terminated,
            monitor: Mutex::new(Some(monitor)),
        })
    }

    /// The process id as this machine sees it (it is 1 inside the container).
    pub(crate) fn pid(&self) -> i32 {
        self.pid
    }

    pub(crate) fn started_at(&self) -> Timestamp {
        self.started_at
    }

    pub(crate) fn termination(&self) -> Option<Termination> {
        self.terminated.borrow().clone()
    }

    /// A descriptor of the process, for joining its namespaces (`exec`).
    pub(crate) fn duplicate_pidfd(&self) -> std::io::Result<OwnedFd> {
        self.pidfd.try_clone()
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<Option<Termination>> {
        self.terminated.clone()
    }

    /// Sends `signal`; `false` when the process had already ended.
    pub(crate) fn signal(&self, signal: nix::sys::signal::Signal) -> bool {
        self.termination().is_none() && pidfd_send_signal(&self.pidfd, signal as i32).is_ok()
    }

    pub(crate) async fn wait(&self) -> Termination {
        let mut terminated = self.terminated.clone();
        let result = terminated.wait_for(Option::is_some).await;
        match result {
            Ok(termination) => termination.clone().expect("waited for Some"),
            Err(_) => self
                .termination()
                .expect("the monitor reports before it ends"),
        }
    }

    /// SIGTERM, up to `grace` to exit, then SIGKILL, as the kubelet stops a container.
    pub(crate) async fn stop(&self, grace: Duration) -> Termination {
        if !grace.is_zero()
            && self.signal(nix::sys::signal::Signal::SIGTERM)
            && let Ok(termination) = tokio::time::timeout(grace, self.wait()).await
        {
            return termination;
        }
        self.signal(nix::sys::signal::Signal::SIGKILL);
        self.wait().await
    }

    /// Kills the process and waits for the monitor, without an async runtime.
    pub(crate) fn kill_and_reap(&self) {
        self.signal(nix::sys::signal::Signal::SIGKILL);
        if let Some(monitor) = self.monitor.lock().expect("monitor lock").take() {
            let _ = monitor.join();
        }
    }
}

impl Drop for ContainerProcess {
    fn drop(&mut self) {
        self.kill_and_reap();
    }
}

/// The monitor thread's loop: output to the log until the process ended and the pipes closed.
fn copy_output_until_exit(
    pidfd: &OwnedFd,
    stdout: OwnedFd,
    stderr: OwnedFd,
    mut log: LogWriter,
) -> ChildExit {
    let mut open = [
        Some((stdout, Stream::Stdout)),
        Some((stderr, Stream::Stderr)),
    ];
    let mut exit = None;
    let mut buffer = vec![0u8; 64 * 1024];
    while exit.is_none() || open.iter().any(Option::is_some) {
        // Slots 0 and 1 are the pipes, slot 2 the pidfd; a closed pipe or a reaped process is
        // polled as -1, which poll(2) ignores.
        let mut fds = [0usize, 1].map(|index| libc::pollfd {
            fd: open[index].as_ref().map_or(-1, |(fd, _)| fd.as_raw_fd()),
            events: libc::POLLIN,
            revents: 0,
        });
        let watched = libc::pollfd {
            fd: if exit.is_none() {
                pidfd.as_raw_fd()
            } else {
                -1
            },
            events: libc::POLLIN,
            revents: 0,
        };
        let mut all = [fds[0], fds[1], watched];
        let timeout = if exit.is_some() {
            DRAIN_AFTER_EXIT.as_millis() as libc::c_int
        } else {
            -1
        };
        // SAFETY: poll(2) on an array we own.
        let ready = unsafe { libc::poll(all.as_mut_ptr(), all.len() as libc::nfds_t, timeout) };
        if ready < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            break;
        }
        if ready == 0 {
            break;
        }
        fds = [all[0], all[1]];
        for (index, polled) in fds.iter().enumerate() {
            if polled.revents == 0 {
                continue;
            }
            let Some((fd, stream)) = open[index].as_ref() else {
                continue;
            };
            let stream = *stream;
            // SAFETY: read(2) into a buffer we own, on a descriptor we own.
            let count =
                unsafe { libc::read(fd.as_raw_fd(), buffer.as_mut_ptr().cast(), buffer.len()) };
            if count > 0 {
                let _ = log.write(stream, &buffer[..count as usize]);
            } else if count == 0
                || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
            {
                let _ = log.finish(stream);
                open[index] = None;
            }
        }
        if all[2].revents != 0 {
            exit = Some(wait_pidfd(pidfd).unwrap_or(ChildExit::Signaled(libc::SIGKILL)));
        }
    }
    let _ = log.finish(Stream::Stdout);
    let _ = log.finish(Stream::Stderr);
    exit.unwrap_or_else(|| wait_pidfd(pidfd).unwrap_or(ChildExit::Signaled(libc::SIGKILL)))
}
