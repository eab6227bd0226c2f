//! What the sandbox's own integration tests share: a sandbox in a temporary directory, and
//! kubectl run against it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Output;

use kube_sandbox::{Sandbox, SandboxOptions};

/// A running sandbox and the directory it lives in (removed when dropped).
pub struct TestSandbox {
    pub sandbox: Sandbox,
    pub dir: tempfile::TempDir,
}

impl std::ops::Deref for TestSandbox {
    type Target = Sandbox;
    fn deref(&self) -> &Sandbox {
        &self.sandbox
    }
}

pub async fn start() -> TestSandbox {
    start_with(|options| options).await
}

pub async fn start_with(configure: impl FnOnce(SandboxOptions) -> SandboxOptions) -> TestSandbox {
    let dir = tempfile::tempdir().expect("temporary directory");
    let options = configure(SandboxOptions::new(dir.path()));
    let sandbox = Sandbox::start(options).await.expect("sandbox starts");
    TestSandbox { sandbox, dir }
}

/// The test CRD of this crate: schema with defaults, CEL rules, status and scale, columns.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// The project's own CRDs.
pub fn project_crds() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/crds")
}

/// The result of one kubectl run.
pub struct Kubectl {
    pub stdout: String,
    pub stderr: String,
    pub success: bool,
}

impl Kubectl {
    fn from_output(output: Output) -> Self {
        Self {
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            success: output.status.success(),
        }
    }

    /// Stdout, after checking that kubectl succeeded.
    pub fn ok(self) -> String {
        assert!(
            self.success,
            "kubectl failed:\nstdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        self.stdout
    }

    /// Stderr, after checking that kubectl failed.
    pub fn err(self) -> String {
        assert!(
            !self.success,
            "kubectl unexpectedly succeeded:\nstdout: {}",
            self.stdout
        );
        self.stderr
    }
}

/// Runs `kubectl --kubeconfig <sandbox> args...`, feeding `stdin` if given.
pub async fn kubectl_with_input(sandbox: &Sandbox, args: &[&str], stdin: Option<&str>) -> Kubectl {
    use tokio::io::AsyncWriteExt;
    // KUBECTL names another kubectl (the Makefile runs the kubectl suites with v1.33 as well).
    let program = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into());
    let mut command = tokio::process::Command::new(program);
    command
        .arg("--kubeconfig")
        .arg(sandbox.kubeconfig_path())
        // A discovery cache per sandbox: ports are reused, kinds are not.
        .arg("--cache-dir")
        .arg(sandbox.kubeconfig_path().with_file_name("kubectl-cache"))
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = command.spawn().expect("kubectl is installed");
    let mut input = child.stdin.take().expect("stdin");
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).await.expect("write stdin");
    }
    drop(input);
    let output = tokio::time::timeout(std::time::Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("kubectl finishes within a minute")
        .expect("kubectl runs");
    Kubectl::from_output(output)
}

pub async fn kubectl(sandbox: &Sandbox, args: &[&str]) -> Kubectl {
    kubectl_with_input(sandbox, args, None).await
}

/// `kubectl apply -f -` of `manifest`.
pub async fn apply(sandbox: &Sandbox, manifest: &str) -> Kubectl {
    kubectl_with_input(sandbox, &["apply", "-f", "-"], Some(manifest)).await
}

/// Polls `check` every 50ms for up to 10s.
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..200 {
        if check().await {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

/// A Deployment with two containers.
pub const DEPLOYMENT: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.25
      - name: sidecar
        image: busybox:1.36
"#;

/// A Widget with two replicas.
pub const WIDGET: &str = r#"
apiVersion: example.com/v1
kind: Widget
metadata:
  name: w1
spec:
  replicas: 2
  color: blue
"#;

/// Installs the test CRD `widgets.example.com` with kubectl.
pub async fn install_widgets(sandbox: &kube_sandbox::Sandbox) {
    let crd = fixture("widgets-crd.yaml");
    kubectl(sandbox, &["apply", "-f", crd.to_str().unwrap()])
        .await
        .ok();
}

/// A ConfigMap with `labels` and one data key.
pub fn config_map(name: &str, labels: serde_json::Value) -> k8s_openapi::api::core::v1::ConfigMap {
    serde_json::from_value(
        serde_json::json!({"metadata": {"name": name, "labels": labels}, "data": {"k": "v"}}),
    )
    .unwrap()
}

/// The Status of an API error, failing the test on any other error.
pub fn api_error(err: kube::Error) -> Box<kube::core::Status> {
    match err {
        kube::Error::Api(status) => status,
        other => panic!("expected an API error, got {other:?}"),
    }
}
