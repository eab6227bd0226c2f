//! What the operator's end-to-end tests share: a sandbox with the project's CRDs, kubectl
//! against it, waiting for a condition, and cluster manifests. Events are listed in `events`,
//! a cluster's conditions read and waited for in `status`, a snapshot file's `snapshot
//! status` read in `snapshot_tool`.

pub mod certs;
pub mod cluster;
pub mod events;
pub mod failpoints;
pub mod healing;
pub mod history;
pub mod loopback;
pub mod manual_node;
pub mod moto;
pub mod rollouts;
pub mod snapshot_tool;
pub mod snapshots;
pub mod status;
pub mod stores;
pub mod timeline;
pub mod workload;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use etcd_operator_api::{EtcdCluster, EtcdMember};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use kube_sandbox::{Sandbox, SandboxOptions};

/// A sandbox in a temporary directory (removed when dropped, after the sandbox stopped).
pub struct TestSandbox {
    pub sandbox: std::sync::Arc<Sandbox>,
    pub dir: tempfile::TempDir,
}

impl std::ops::Deref for TestSandbox {
    type Target = Sandbox;
    fn deref(&self) -> &Sandbox {
        &self.sandbox
    }
}

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The directory of the build profile the running test or benchmark was built in
/// (`target/debug` or `target/release`): cargo puts the binary in its `deps/`. This crate is a
/// library, so cargo's `CARGO_BIN_EXE_*` and `CARGO_TARGET_TMPDIR`, which it gives integration
/// tests and benchmarks only, are found from there.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the path of the running test binary");
    exe.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| panic!("{} is not in a cargo target directory", exe.display()))
}

/// The operator binary this build made: nextest's `NEXTEST_BIN_EXE_etcd-operator`, else the
/// one beside the running test's `deps/` (where `CARGO_BIN_EXE_etcd-operator` points).
pub fn operator_binary() -> PathBuf {
    let path = std::env::var_os("NEXTEST_BIN_EXE_etcd-operator")
        .map(PathBuf::from)
        .unwrap_or_else(|| profile_dir().join("etcd-operator"));
    assert!(
        path.is_file(),
        "{} is missing: build the operator with the tests (`cargo nextest run -p etcd-operator` or `cargo build -p etcd-operator --features failpoints`)",
        path.display()
    );
    path
}

/// cargo's `CARGO_TARGET_TMPDIR` for the running test or benchmark: `target/tmp`.
pub fn target_tmpdir() -> PathBuf {
    let profile = profile_dir();
    profile.parent().unwrap_or(&profile).join("tmp")
}

/// The control plane the end-to-end tests run on: a real one (etcd, kube-apiserver,
/// kube-controller-manager, kube-scheduler built by `scripts/install-deps.sh`) unless
/// `E2E_CONTROL_PLANE=sandbox` asks for kube-sandbox's own API server and controllers.
pub fn control_plane() -> kube_sandbox::ControlPlane {
    match std::env::var("E2E_CONTROL_PLANE").as_deref() {
        Ok("sandbox") => kube_sandbox::ControlPlane::Sandbox,
        Ok("kubernetes") | Err(_) => kube_sandbox::ControlPlane::Kubernetes(Default::default()),
        Ok(other) => panic!("E2E_CONTROL_PLANE={other}: say kubernetes or sandbox"),
    }
}

/// Starts a sandbox whose `nodes` Node objects run nothing (the test plays the node agent, or
/// needs none), with the project's CRDs installed from `deploy/crds/`. On a real control plane
/// ([`control_plane`]) there are no Node objects at all: a real node registers itself.
pub async fn start_sandbox(nodes: usize) -> TestSandbox {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().expect("temporary directory");
    let options = match control_plane() {
        kube_sandbox::ControlPlane::Sandbox => SandboxOptions::new(dir.path()).nodes(nodes),
        real => SandboxOptions::cluster(dir.path())
            .nodes(0)
            .control_plane(real),
    };
    let sandbox = Sandbox::start(options).await.expect("the sandbox starts");
    let sandbox = TestSandbox {
        sandbox: std::sync::Arc::new(sandbox),
        dir,
    };
    install_crds(&sandbox.client()).await;
    sandbox
}

/// Creates the project's CRDs, exactly as generated from the Rust types.
pub async fn install_crds(client: &Client) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in etcd_operator_api::crds() {
        api.create(&PostParams::default(), &crd)
            .await
            .expect("the CRD is accepted");
    }
}

pub async fn create_namespace(client: &Client, name: &str) {
    let api: Api<Namespace> = Api::all(client.clone());
    let namespace: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap();
    api.create(&PostParams::default(), &namespace)
        .await
        .expect("the namespace is created");
}

/// Retries `check` every 100 ms until it returns `Some`, for at most `limit`; panics with
/// `what` and the last `describe` otherwise.
pub async fn eventually<T, F, Fut>(what: &str, limit: Duration, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    eventually_explained(what, limit, check, || async { String::new() }).await
}

/// [`eventually`], and on timeout what `explain` says too (say the operator's log): fetched
/// once, at the end, never on every try (a log fetched every 100 ms, with the list of Pods
/// before it, was 57 % of the API server's requests in e2e_scaling's first minute).
pub async fn eventually_explained<T, F, Fut, E, EFut>(
    what: &str,
    limit: Duration,
    mut check: F,
    explain: E,
) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
    E: FnOnce() -> EFut,
    EFut: Future<Output = String>,
{
    let started = Instant::now();
    loop {
        let last = match check().await {
            Ok(value) => return value,
            Err(why) => why,
        };
        if started.elapsed() > limit {
            let context = explain().await;
            let context = if context.is_empty() {
                context
            } else {
                format!("\n{context}")
            };
            panic!("timed out after {limit:?} waiting for {what}: {last}{context}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The e2e suite's default etcd version: the newest 3.6 patch `scripts/install-deps.sh`
/// builds (what `examples/` and the chart default to).
pub const DEFAULT_VERSION: &str = "3.6.17";

/// The newest 3.5 patch the machine has (built from etcd's Go modules; at or above etcd's
/// 3.5 → 3.6 floor, 3.5.32).
pub const NEWEST_35: &str = "3.5.36";

/// The newest 3.7 patch the machine has.
pub const NEWEST_37: &str = "3.7.4";

/// An EtcdCluster manifest as YAML, on [`DEFAULT_VERSION`].
pub fn cluster_yaml(name: &str, namespace: &str, replicas: i32, extra_spec: &str) -> String {
    cluster_yaml_on(name, namespace, replicas, DEFAULT_VERSION, extra_spec)
}

/// An EtcdCluster manifest as YAML, on `version`.
pub fn cluster_yaml_on(
    name: &str,
    namespace: &str,
    replicas: i32,
    version: &str,
    extra_spec: &str,
) -> String {
    format!(
        "apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdCluster\nmetadata:\n  name: {name}\n  namespace: {namespace}\nspec:\n  replicas: {replicas}\n  version: \"{version}\"\n{extra_spec}"
    )
}

/// The EtcdCluster, read now.
pub async fn get_cluster(client: &Client, namespace: &str, name: &str) -> EtcdCluster {
    Api::<EtcdCluster>::namespaced(client.clone(), namespace)
        .get(name)
        .await
        .expect("the EtcdCluster exists")
}

/// The cluster's EtcdMembers, by name.
pub async fn members(client: &Client, namespace: &str, cluster: &str) -> Vec<EtcdMember> {
    let list = Api::<EtcdMember>::namespaced(client.clone(), namespace)
        .list(&ListParams::default().labels(&etcd_operator_api::labels::cluster_selector(cluster)))
        .await
        .expect("listing EtcdMembers");
    let mut items = list.items;
    items.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    items
}

/// The status of a condition of the cluster, e.g. `Available` → `Some("True")`.
pub fn condition(cluster: &EtcdCluster, kind: &str) -> Option<String> {
    cluster
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind)
        .map(|c| c.status.clone())
}

/// The reason and message of the cluster's Progressing condition, read now.
pub async fn progressing(client: &Client, namespace: &str, name: &str) -> (String, String) {
    let (_, reason, message) = status::cluster_condition(client, namespace, name, "Progressing")
        .await
        .unwrap_or_default();
    (reason, message)
}

/// kubectl against the sandbox; returns (success, stdout, stderr).
pub fn kubectl(sandbox: &TestSandbox, args: &[&str]) -> (bool, String, String) {
    kubectl_with_stdin(sandbox, args, None)
}

/// kubectl that must succeed, tried three times a second apart (a create that finds its
/// object already there counts as done); blocking.
pub fn kubectl_retrying_blocking(sandbox: &TestSandbox, args: &[&str]) {
    let mut last = String::new();
    for _ in 0..3 {
        let (ok, _, stderr) = kubectl(sandbox, args);
        if ok || stderr.contains("AlreadyExists") || stderr.contains("already exists") {
            return;
        }
        last = stderr;
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
    panic!("kubectl {args:?}: {last}");
}

/// The Secret of a cluster's root credentials (`auth.rootCredentialsSecretRef`): a
/// `kubernetes.io/basic-auth` Secret `name` with user `root` and `password`. Blocking.
pub fn create_root_secret(sandbox: &TestSandbox, namespace: &str, name: &str, password: &str) {
    kubectl_retrying_blocking(
        sandbox,
        &[
            "-n",
            namespace,
            "create",
            "secret",
            "generic",
            name,
            "--type=kubernetes.io/basic-auth",
            "--from-literal=username=root",
            &format!("--from-literal=password={password}"),
        ],
    );
}

/// kubectl with `stdin` piped (for `apply -f -`).
pub fn kubectl_with_stdin(
    sandbox: &TestSandbox,
    args: &[&str],
    stdin: Option<&str>,
) -> (bool, String, String) {
    use std::io::Write;
    let mut command = Command::new("kubectl");
    command
        .arg("--kubeconfig")
        .arg(sandbox.kubeconfig_path())
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = command.spawn().expect("kubectl runs");
    if let Some(text) = stdin {
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(text.as_bytes())
            .expect("writing kubectl's stdin");
    }
    drop(child.stdin.take());
    // Called from async code: the wait blocks a worker, so the runtime is told (its other tasks
    // move on, the node agents' and the workload's among them).
    let wait = || child.wait_with_output().expect("kubectl finishes");
    let output = match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(wait)
        }
        _ => wait(),
    };
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The operator's controller running in this process (not as a Deployment), stopped when
/// dropped or with [`InProcessOperator::stop`].
pub struct InProcessOperator {
    pub metrics: std::sync::Arc<etcd_operator::metrics::Metrics>,
    shutdown: tokio_util::sync::CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl InProcessOperator {
    /// Starts the controller over `namespace`, dialling etcd through `etcd_urls`.
    pub fn start(
        client: &Client,
        namespace: &str,
        etcd_urls: etcd_operator::observe::EtcdUrlMap,
    ) -> InProcessOperator {
        use etcd_operator::reconcile::{ControllerOptions, run_controller};
        let metrics = std::sync::Arc::new(etcd_operator::metrics::Metrics::new());
        let shutdown = tokio_util::sync::CancellationToken::new();
        let options = ControllerOptions {
            scope: etcd_operator::observe::Scope::Namespace(namespace.to_string()),
            settings: Default::default(),
            etcd_urls,
            concurrency: 4,
            etcd_connections_kept: etcd_operator::etcd::DEFAULT_KEPT,
        };
        let stop = shutdown.clone();
        let task = tokio::spawn(run_controller(
            client.clone(),
            options,
            metrics.clone(),
            async move { stop.cancelled().await },
            || {},
        ));
        InProcessOperator {
            metrics,
            shutdown,
            task: Some(task),
        }
    }

    /// Stops the controller and waits for the passes in flight (at most 10 s).
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(10), task)
                .await
                .expect("the controller stops on shutdown")
                .expect("the controller task does not panic");
        }
    }
}

impl Drop for InProcessOperator {
    fn drop(&mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Writes `key` through any of `urls`; panics unless etcd acknowledges it.
pub async fn put_key(urls: &[String], key: &str, value: &str) {
    let mut client = etcd_client::Client::connect(urls, None)
        .await
        .expect("etcd connects");
    client
        .put(key, value, None)
        .await
        .expect("the write is acknowledged");
}

/// Reads `key` (linearizable) through any of `urls`.
pub async fn get_key(urls: &[String], key: &str) -> Result<Option<String>, String> {
    let mut client = etcd_client::Client::connect(urls, None)
        .await
        .map_err(|e| e.to_string())?;
    let response = client.get(key, None).await.map_err(|e| e.to_string())?;
    Ok(response
        .kvs()
        .first()
        .map(|kv| kv.value_str().unwrap_or_default().to_string()))
}

/// etcd's member list as `(name, hex ID, is_learner)`, sorted by name.
pub async fn etcd_members(urls: &[String]) -> Result<Vec<(String, String, bool)>, String> {
    let mut client = etcd_client::Client::connect(urls, None)
        .await
        .map_err(|e| e.to_string())?;
    let response = client.member_list().await.map_err(|e| e.to_string())?;
    let mut members: Vec<(String, String, bool)> = response
        .members()
        .iter()
        .map(|m| {
            (
                m.name().to_string(),
                format!("{:x}", m.id()),
                m.is_learner(),
            )
        })
        .collect();
    members.sort();
    Ok(members)
}

/// Checks that etcd's member list and the EtcdMembers agree: the same names, the same IDs,
/// all voters, `expected` of them.
pub async fn membership_agrees(
    client: &Client,
    namespace: &str,
    cluster: &str,
    urls: &[String],
    expected: usize,
) -> Result<(), String> {
    let listed = etcd_members(urls).await?;
    let recorded: Vec<(String, String, bool)> = members(client, namespace, cluster)
        .await
        .iter()
        .map(|m| {
            let status = m.status.clone().unwrap_or_default();
            (
                m.metadata.name.clone().unwrap_or_default(),
                status.member_id.unwrap_or_default(),
                status.is_voter != Some(true),
            )
        })
        .collect();
    if listed.len() == expected && listed == recorded {
        Ok(())
    } else {
        Err(format!(
            "etcd lists {listed:?}, the EtcdMembers say {recorded:?}"
        ))
    }
}

/// Applies the operator's Namespace and RBAC from `deploy/` with kubectl, and returns a client
/// authenticated as its service account (so every request is authorized by those rules).
pub async fn operator_identity(sandbox: &TestSandbox) -> Client {
    let root = repo_root();
    let namespace = root.join("deploy/operator/namespace.yaml");
    let rbac = root.join("deploy/rbac");
    let (ok, _, stderr) = kubectl(
        sandbox,
        &[
            "apply",
            "-f",
            namespace.to_str().unwrap(),
            "-f",
            rbac.to_str().unwrap(),
        ],
    );
    assert!(ok, "kubectl apply of deploy/rbac: {stderr}");
    sandbox
        .service_account_client("etcd-operator-system", "etcd-operator")
        .await
        .expect("a service-account client")
}

/// Runs a benchmark's scripted floor (`benches/<script>` with `args`) and returns the lines it
/// prints as `(what, seconds)`: each line is a label, a space, and a number of seconds.
pub fn floor_script(script: &str, args: &[&str]) -> Vec<(String, f64)> {
    floor_script_with(script, args, &[])
}

/// The directory of etcd `version`'s binaries (`etcd`, `etcdctl`, `etcdutl`) where
/// `scripts/install-deps.sh` puts them; 3.4 is Debian's, in `/usr/bin`.
pub fn etcd_binaries(version: &str) -> String {
    if version.starts_with("3.4.") {
        "/usr/bin".to_string()
    } else {
        format!("/usr/local/lib/etcd-{version}")
    }
}

/// As [`floor_script`], on etcd `version`'s binaries (`ETCD` and `ETCDCTL` from
/// `/usr/local/lib/etcd-<version>/`, where `scripts/install-deps.sh` puts them), so the floor
/// runs the same etcd as the operator's clusters.
pub fn floor_script_on(version: &str, script: &str, args: &[&str]) -> Vec<(String, f64)> {
    let dir = etcd_binaries(version);
    let (etcd, etcdctl) = (format!("{dir}/etcd"), format!("{dir}/etcdctl"));
    floor_script_with(script, args, &[("ETCD", &etcd), ("ETCDCTL", &etcdctl)])
}

/// As [`floor_script`], with environment variables for the script (e.g. `FLOOR_TLS=1`).
pub fn floor_script_with(script: &str, args: &[&str], envs: &[(&str, &str)]) -> Vec<(String, f64)> {
    let path = repo_root().join("crates/operator/benches").join(script);
    let output = Command::new("bash")
        .arg(&path)
        .args(args)
        .envs(envs.iter().copied())
        .output()
        .expect("bash runs the floor script");
    assert!(
        output.status.success(),
        "{script} {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| {
            let (what, seconds) = line.rsplit_once(' ')?;
            Some((what.to_string(), seconds.parse().ok()?))
        })
        .collect()
}
