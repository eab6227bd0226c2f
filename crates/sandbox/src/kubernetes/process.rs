//! The control plane's processes: each started from one thread that lives as long as this
//! process, with SIGKILL as its parent-death signal (sent when the *thread* that forked it
//! ends), so nothing outlives the sandbox even when the test process dies; its output goes to
//! `<dir>/<name>.log`.

use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, OnceLock, mpsc};

type Request = (Command, mpsc::Sender<io::Result<Child>>);

/// The thread every control-plane process is forked from.
fn spawner() -> &'static Mutex<mpsc::Sender<Request>> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<Request>>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (sender, requests) = mpsc::channel::<Request>();
        std::thread::Builder::new()
            .name("control-plane-spawner".into())
            .spawn(move || {
                for (mut command, reply) in requests {
                    let _ = reply.send(command.spawn());
                }
            })
            .expect("starting the control plane's spawner thread");
        Mutex::new(sender)
    })
}

/// A running control-plane process; killed when dropped.
pub struct Process {
    pub name: String,
    child: Child,
    log: PathBuf,
}

impl Process {
    /// Starts `command` as `name`, its stdout and stderr appended to `dir/<name>.log`.
    pub fn start(name: &str, mut command: Command, dir: &Path) -> io::Result<Self> {
        let log = dir.join(format!("{name}.log"));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)?;
        command
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file);
        // SAFETY: one system call in the forked child, before exec.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let (reply, replied) = mpsc::channel();
        spawner()
            .lock()
            .expect("spawner lock")
            .send((command, reply))
            .map_err(|_| io::Error::other("the control plane's spawner thread is gone"))?;
        let child = replied
            .recv()
            .map_err(|_| io::Error::other("the control plane's spawner thread is gone"))??;
        Ok(Self {
            name: name.to_string(),
            child,
            log,
        })
    }

    /// The exit status, if the process has ended.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The last `bytes` of its log, for error messages.
    pub fn log_tail(&self, bytes: u64) -> String {
        let Ok(mut file) = std::fs::File::open(&self.log) else {
            return String::new();
        };
        let length = file.metadata().map(|m| m.len()).unwrap_or(0);
        let _ = file.seek(SeekFrom::Start(length.saturating_sub(bytes)));
        let mut text = String::new();
        let _ = file.read_to_string(&mut text);
        text
    }

    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// SIGKILL, and waits for it to be gone.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}
