//! Network namespaces held by file descriptors, a thread that lives inside one, and `ip`
//! commands that run inside one.
//!
//! Nothing here ever changes the namespace of a thread it did not create: namespaces are made
//! on short-lived threads, entered only by the worker thread, and `ip` runs in a child that
//! joins the namespace before it executes (if joining fails, `ip` never runs).

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;

use nix::sched::{CloneFlags, setns, unshare};

use super::NetworkError;

/// A network namespace, alive as long as this descriptor (or a process inside it) is.
#[derive(Debug)]
pub struct NetNamespace {
    fd: OwnedFd,
    inode: u64,
}

impl NetNamespace {
    /// A new namespace holding only a loopback interface (down).
    pub fn create() -> io::Result<Self> {
        // The thread that unshares ends right after, so no thread of ours keeps running in
        // a namespace it did not start in.
        std::thread::Builder::new()
            .name("netns-create".into())
            .spawn(|| {
                unshare(CloneFlags::CLONE_NEWNET).map_err(io::Error::from)?;
                Self::open("/proc/thread-self/ns/net")
            })?
            .join()
            .map_err(|_| io::Error::other("the thread creating a network namespace panicked"))?
    }

    /// Opens an existing namespace, e.g. `/proc/<pid>/task/<tid>/ns/net`.
    pub fn open(path: &str) -> io::Result<Self> {
        let file = File::open(path)?;
        let inode = file.metadata()?.ino();
        Ok(Self {
            fd: OwnedFd::from(file),
            inode,
        })
    }

    /// The namespace's inode number, which identifies it (as `ls -l /proc/PID/ns/net` shows).
    pub fn inode(&self) -> u64 {
        self.inode
    }

    /// A path other processes (such as `ip`) can open to reach this namespace while we live.
    pub fn proc_path(&self) -> String {
        format!("/proc/{}/fd/{}", std::process::id(), self.fd.as_raw_fd())
    }

    /// Moves the calling thread into this namespace. Only for threads made for that purpose.
    pub(crate) fn enter_current_thread(&self) -> io::Result<()> {
        setns(&self.fd, CloneFlags::CLONE_NEWNET).map_err(io::Error::from)
    }
}

impl AsFd for NetNamespace {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for NetNamespace {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.fd.as_raw_fd()
    }
}

type Job = Box<dyn FnOnce() + Send>;

/// A thread living in a network namespace, running jobs there: creating sockets, serving the
/// `enter` helpers. A socket stays in the namespace it was created in, so sockets made here
/// can be used from any thread afterwards.
pub(crate) struct NetnsWorker {
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    netns_path: PathBuf,
}

impl NetnsWorker {
    pub(crate) fn start(namespace: Arc<NetNamespace>, name: &str) -> io::Result<Self> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let (ready, started) = mpsc::channel::<io::Result<i32>>();
        let thread = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                if let Err(error) = namespace.enter_current_thread() {
                    let _ = ready.send(Err(error));
                    return;
                }
                let _ = ready.send(Ok(nix::unistd::gettid().as_raw()));
                while let Ok(job) = queue.recv() {
                    job();
                }
            })?;
        let tid = started
            .recv()
            .map_err(|_| io::Error::other("the network worker thread ended at start"))??;
        Ok(Self {
            jobs: Mutex::new(Some(jobs)),
            thread: Mutex::new(Some(thread)),
            netns_path: PathBuf::from(format!("/proc/{}/task/{tid}/ns/net", std::process::id())),
        })
    }

    /// `/proc/PID/task/TID/ns/net` of the worker: valid as long as the worker runs.
    pub(crate) fn netns_path(&self) -> &PathBuf {
        &self.netns_path
    }

    /// Runs `job` inside the namespace and waits for its result (blocking).
    pub(crate) fn run<R: Send + 'static>(
        &self,
        job: impl FnOnce() -> R + Send + 'static,
    ) -> io::Result<R> {
        let (reply, result) = mpsc::channel();
        self.submit(Box::new(move || {
            let _ = reply.send(job());
        }))?;
        result.recv().map_err(|_| stopped())
    }

    /// Runs `job` inside the namespace without blocking the async caller.
    pub(crate) async fn run_async<R: Send + 'static>(
        &self,
        job: impl FnOnce() -> R + Send + 'static,
    ) -> io::Result<R> {
        let (reply, result) = tokio::sync::oneshot::channel();
        self.submit(Box::new(move || {
            let _ = reply.send(job());
        }))?;
        result.await.map_err(|_| stopped())
    }

    fn submit(&self, job: Job) -> io::Result<()> {
        let jobs = self.jobs.lock().expect("worker queue lock");
        jobs.as_ref()
            .ok_or_else(stopped)?
            .send(job)
            .map_err(|_| stopped())
    }

    pub(crate) fn stop(&self) {
        drop(self.jobs.lock().expect("worker queue lock").take());
        if let Some(thread) = self.thread.lock().expect("worker thread lock").take() {
            let _ = thread.join();
        }
    }
}

impl Drop for NetnsWorker {
    fn drop(&mut self) {
        self.stop();
    }
}

fn stopped() -> io::Error {
    io::Error::other("the cluster network has been shut down")
}

/// Runs `ip -batch -` with `commands` inside `namespace`.
pub(crate) async fn ip_batch(
    namespace: &NetNamespace,
    commands: &[String],
) -> Result<(), NetworkError> {
    let mut child = tokio::process::Command::from(ip_batch_command(namespace))
        .kill_on_drop(true)
        .spawn()
        .map_err(NetworkError::IpCommand)?;
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let written = {
        use tokio::io::AsyncWriteExt;
        stdin.write_all(batch_script(commands).as_bytes()).await
    };
    drop(stdin);
    let output = child
        .wait_with_output()
        .await
        .map_err(NetworkError::IpCommand)?;
    written.map_err(NetworkError::IpCommand)?;
    batch_result(commands, &output)
}

/// [`ip_batch`] for places that cannot await, such as `Drop`.
pub(crate) fn ip_batch_blocking(
    namespace: &NetNamespace,
    commands: &[String],
) -> Result<(), NetworkError> {
    let mut child = ip_batch_command(namespace)
        .spawn()
        .map_err(NetworkError::IpCommand)?;
    let written = child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(batch_script(commands).as_bytes());
    let output = child.wait_with_output().map_err(NetworkError::IpCommand)?;
    written.map_err(NetworkError::IpCommand)?;
    batch_result(commands, &output)
}

fn ip_batch_command(namespace: &NetNamespace) -> std::process::Command {
    let mut command = namespaced_command(namespace, "ip");
    command
        .args(["-batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    command
}

fn batch_script(commands: &[String]) -> String {
    let mut script = commands.join("\n");
    script.push('\n');
    script
}

fn batch_result(commands: &[String], output: &std::process::Output) -> Result<(), NetworkError> {
    if output.status.success() {
        return Ok(());
    }
    Err(NetworkError::IpFailed {
        commands: commands.join("; "),
        stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
    })
}

/// A command (`ip`, `tc`) that joins `namespace` before it runs: if joining fails, the
/// program is never executed, so it cannot act on the namespace of the machine.
pub(crate) fn namespaced_command(namespace: &NetNamespace, program: &str) -> std::process::Command {
    use std::os::unix::process::CommandExt;
    let mut command = std::process::Command::new(program);
    let fd = namespace.fd.as_raw_fd();
    // SAFETY: the closure only calls setns(2), which is async-signal-safe; the descriptor is
    // still open in the child because close-on-exec acts only at exec.
    unsafe {
        command.pre_exec(move || {
            if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command
}

/// Writes `content` to `path` atomically (a temporary file renamed over it).
pub(crate) fn write_atomically(path: &std::path::Path, content: &[u8]) -> io::Result<()> {
    let temporary = path.with_extension("tmp");
    let mut file = File::create(&temporary)?;
    file.write_all(content)?;
    file.sync_all()?;
    std::fs::rename(&temporary, path)
}
