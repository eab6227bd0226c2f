//! The real kubectl, run against the sandbox.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncWriteExt;

/// Where the cases expect the real kubectl (v1.32).
pub const KUBECTL: &str = "/usr/bin/kubectl";

/// Fails the test, saying how to install kubectl, when it is missing: the cases are replayed
/// through it, and a test that skips itself would prove nothing.
pub fn require_installed() {
    assert!(
        Path::new(KUBECTL).is_file(),
        "{KUBECTL} is missing; the validation cases are replayed through the real kubectl. \
         Install kubectl v1.32 with: \
         curl -fsSLo /tmp/kubectl \"https://dl.k8s.io/release/v1.32.4/bin/linux/$(dpkg --print-architecture)/kubectl\" \
         && install -m 0755 /tmp/kubectl {KUBECTL}"
    );
}

/// kubectl with a sandbox's kubeconfig and a discovery cache of its own.
pub struct Kubectl {
    kubeconfig: PathBuf,
    cache_dir: PathBuf,
}

/// What one kubectl run printed.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub command: String,
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Outcome {
    /// The command and, when it failed, everything it printed, for a failure report (the
    /// object a successful call prints back would bury the error).
    pub fn show(&self) -> String {
        if self.success {
            return format!("    $ {}    # succeeded", self.command);
        }
        let indent = |text: &str| text.trim_end().replace('\n', "\n      ");
        format!(
            "    $ {}    # failed\n    stdout: {}\n    stderr: {}",
            self.command,
            indent(&self.stdout),
            indent(&self.stderr)
        )
    }

    /// Stdout, failing the test with the output when kubectl failed.
    pub fn expect_success(self, what: &str) -> String {
        assert!(self.success, "{what} failed:\n{}", self.show());
        self.stdout
    }
}

impl Kubectl {
    pub fn new(kubeconfig: &Path) -> Self {
        Self {
            kubeconfig: kubeconfig.to_path_buf(),
            // A cache per sandbox: its port may be reused by a later sandbox with other kinds.
            cache_dir: kubeconfig.with_file_name("kubectl-cache"),
        }
    }

    /// Runs `kubectl args...` with `stdin` (when given) on its standard input.
    pub async fn run(&self, args: &[&str], stdin: Option<&str>) -> Outcome {
        let mut child = tokio::process::Command::new(KUBECTL)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(&self.cache_dir)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|error| panic!("cannot run {KUBECTL}: {error}"));
        let mut input = child.stdin.take().expect("kubectl's stdin is piped");
        if let Some(text) = stdin {
            input
                .write_all(text.as_bytes())
                .await
                .expect("writing kubectl's stdin");
        }
        drop(input);
        let command = format!("kubectl {}", args.join(" "));
        let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
            .await
            .unwrap_or_else(|_| panic!("`{command}` did not finish within a minute"))
            .expect("kubectl runs");
        Outcome {
            command,
            success: output.status.success(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }
}
