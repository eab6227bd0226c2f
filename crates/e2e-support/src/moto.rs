//! moto_server (PyPI `moto[server]`, installed by scripts/install-deps.sh), the S3 emulator
//! of the snapshot tests, run inside the sandbox's cluster network on the bridge address so
//! that Pods (the operator's among them) reach it at `http://<gateway>:9000`. Authentication
//! is on (`INITIAL_NO_AUTH_ACTION_COUNT=3`: the three IAM calls that create the test's user
//! and access key, then every request is checked), so wrong credentials are refused as real
//! S3 refuses them. `moto_client.py` (boto3) is the plain client the tests check with.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use super::cluster::Cluster;

const PORT: u16 = 9000;
const CLIENT: &str = include_str!("moto_client.py");

pub struct Moto {
    child: Child,
    /// The endpoint as Pods dial it.
    pub url: String,
    pub key_id: String,
    pub secret: String,
    script: PathBuf,
    log: PathBuf,
    network: std::sync::Arc<kube_sandbox::network::ClusterNetwork>,
}

impl Moto {
    /// Starts moto_server in `cluster`'s network, creates an access key and `bucket`.
    /// Blocking: call inside `tokio::task::block_in_place`.
    pub fn start(cluster: &Cluster, dir: &Path, bucket: &str) -> Moto {
        let gateway = cluster.network.gateway();
        let log = dir.join("moto.log");
        let script = dir.join("moto_client.py");
        std::fs::write(&script, CLIENT).expect("writing moto_client.py");
        let child = cluster
            .network
            .command("python3")
            .expect("a command in the cluster network")
            .args([
                "-m",
                "moto.server",
                "-H",
                &gateway.to_string(),
                "-p",
                &PORT.to_string(),
            ])
            .env("INITIAL_NO_AUTH_ACTION_COUNT", "3")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).expect("moto log"))
            .stderr(std::fs::File::create(dir.join("moto.err")).expect("moto log"))
            .spawn()
            .expect(
                "python3 -m moto.server starts (scripts/install-deps.sh installs moto[server])",
            );
        let url = format!("http://{gateway}:{PORT}");
        let mut moto = Moto {
            child,
            url,
            key_id: String::new(),
            secret: String::new(),
            script,
            log,
            network: cluster.network.clone(),
        };
        let started = Instant::now();
        let keys = loop {
            match moto.python(&["setup", &moto.url, bucket]) {
                Ok(out) => break out,
                Err(e) if started.elapsed() < Duration::from_secs(60) && e.contains("onnect") => {
                    std::thread::sleep(Duration::from_millis(300));
                }
                Err(e) => panic!(
                    "moto setup: {e}\nmoto log: {}",
                    std::fs::read_to_string(&moto.log).unwrap_or_default()
                ),
            }
        };
        let keys: serde_json::Value = serde_json::from_str(&keys).expect("setup prints the keys");
        moto.key_id = keys["id"].as_str().unwrap().to_string();
        moto.secret = keys["secret"].as_str().unwrap().to_string();
        moto
    }

    fn python(&self, args: &[&str]) -> Result<String, String> {
        let out = self
            .network
            .command("python3")
            .map_err(|e| e.to_string())?
            .arg(&self.script)
            .args(args)
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// The object's size, SHA-256 (read whole) and user metadata. Blocking.
    pub fn head(&self, bucket: &str, key: &str) -> Result<serde_json::Value, String> {
        let out = self.python(&["head", &self.url, &self.key_id, &self.secret, bucket, key])?;
        serde_json::from_str(&out).map_err(|e| format!("{e}: {out}"))
    }

    /// Writes a small object carrying `uid` as its etcd-snapshot-uid. Blocking.
    pub fn put_foreign(&self, bucket: &str, key: &str, uid: &str) {
        self.python(&[
            "put",
            &self.url,
            &self.key_id,
            &self.secret,
            bucket,
            key,
            uid,
        ])
        .expect("putting an object");
    }

    /// Downloads the object to `out`. Blocking.
    pub fn download(&self, bucket: &str, key: &str, out: &Path) {
        self.python(&[
            "get",
            &self.url,
            &self.key_id,
            &self.secret,
            bucket,
            key,
            out.to_str().unwrap(),
        ])
        .expect("downloading the object");
    }

    /// Uploads `file` to the object with boto3 (the benchmark's floor). Blocking.
    pub fn upload(&self, bucket: &str, key: &str, file: &Path) {
        self.python(&[
            "upload",
            &self.url,
            &self.key_id,
            &self.secret,
            bucket,
            key,
            file.to_str().unwrap(),
        ])
        .expect("uploading the file");
    }

    /// Deletes the object. Blocking.
    pub fn delete(&self, bucket: &str, key: &str) {
        self.python(&["delete", &self.url, &self.key_id, &self.secret, bucket, key])
            .expect("deleting the object");
    }

    /// Multipart uploads started and neither completed nor aborted. Blocking.
    pub fn unfinished_uploads(&self, bucket: &str) -> usize {
        self.python(&["uploads", &self.url, &self.key_id, &self.secret, bucket])
            .expect("listing multipart uploads")
            .parse()
            .expect("a count")
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
