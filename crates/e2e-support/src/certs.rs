//! Certificates made with `openssl`, independently of the operator's own code, for the TLS
//! tests and the TLS benchmark.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use super::cluster::{Cluster, ETCDCTL};
use super::kubectl;
use super::workload::SharedSecure;

/// openssl in `dir`; panics with its stderr when it fails.
pub fn openssl(dir: &Path, args: &[&str]) {
    let out = tokio::task::block_in_place(|| {
        Command::new("openssl").current_dir(dir).args(args).output()
    })
    .expect("openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A certificate authority `name` (`name.crt`, `name.key`), ECDSA P-256, 30 days.
pub fn make_ca(dir: &Path, name: &str) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.crt"),
            "-subj",
            &format!("/CN={name}"),
            "-days",
            "30",
        ],
    );
}

/// A leaf `name` signed by `ca`, with `sans` (openssl syntax) and `usage`.
pub fn make_leaf(dir: &Path, ca: &str, name: &str, cn: &str, sans: Option<&str>, usage: &str) {
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
            "-subj",
            &format!("/CN={cn}"),
        ],
    );
    let mut ext = format!("extendedKeyUsage={usage}\nkeyUsage=digitalSignature,keyEncipherment\n");
    if let Some(sans) = sans {
        ext.push_str(&format!("subjectAltName={sans}\n"));
    }
    std::fs::write(dir.join(format!("{name}.ext")), ext).unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            &format!("{ca}.crt"),
            "-CAkey",
            &format!("{ca}.key"),
            "-CAcreateserial",
            "-out",
            &format!("{name}.crt"),
            "-days",
            "30",
            "-extfile",
            &format!("{name}.ext"),
        ],
    );
}

/// The files of a `kubernetes.io/tls` Secret with a `ca.crt`.
pub fn tls_files(dir: &Path, leaf: &str, ca: &str) -> Vec<(&'static str, PathBuf)> {
    vec![
        ("tls.crt", dir.join(format!("{leaf}.crt"))),
        ("tls.key", dir.join(format!("{leaf}.key"))),
        ("ca.crt", dir.join(format!("{ca}.crt"))),
    ]
}

/// SANs (openssl syntax) covering every member of the cluster `etcd` in `namespace`, the client
/// Service and loopback.
pub fn member_sans(namespace: &str) -> String {
    format!(
        "DNS:*.etcd.{namespace}.svc,DNS:*.etcd.{namespace}.svc.cluster.local,DNS:etcd-client.{namespace}.svc,DNS:localhost,IP:127.0.0.1"
    )
}

/// A Secret's data as bytes, by key, if the Secret exists.
pub fn secret_data(
    cluster: &Cluster,
    namespace: &str,
    name: &str,
) -> Option<(
    serde_json::Value,
    std::collections::BTreeMap<String, Vec<u8>>,
)> {
    let (ok, out, _) = tokio::task::block_in_place(|| {
        kubectl(
            cluster,
            &["-n", namespace, "get", "secret", name, "-o", "json"],
        )
    });
    if !ok {
        return None;
    }
    let secret: serde_json::Value = serde_json::from_str(&out).ok()?;
    let data = secret["data"]
        .as_object()?
        .iter()
        .filter_map(|(k, v)| {
            serde_json::from_value::<k8s_openapi::ByteString>(v.clone())
                .ok()
                .map(|b| (k.clone(), b.0))
        })
        .collect();
    Some((secret, data))
}

/// `openssl verify` of a leaf against one CA (files in a directory of their own, so two
/// callers at once do not mix).
pub fn verifies(leaf: &[u8], ca: &[u8], _dir: &Path) -> bool {
    let own = tempfile::tempdir().unwrap();
    let (leaf_path, ca_path) = (own.path().join("leaf.pem"), own.path().join("ca.pem"));
    std::fs::write(&leaf_path, leaf).unwrap();
    std::fs::write(&ca_path, ca).unwrap();
    tokio::task::block_in_place(|| {
        Command::new("openssl")
            .arg("verify")
            .arg("-CAfile")
            .arg(&ca_path)
            .arg(&leaf_path)
            .output()
    })
    .is_ok_and(|o| o.status.success())
}

/// A client of an operator-issued cluster through a CA rotation, as a user's client re-reading
/// its files would be: it trusts the CA Secret's bundle (`ca.crt`) as soon as it changes, and
/// takes a client certificate (CN root) from the new CA once the members' certificates come
/// from it (made in `dir` with openssl, from the CA Secret's key). Until `stop`.
pub async fn follow_ca_secret(
    cluster: Arc<Cluster>,
    namespace: &'static str,
    shared: SharedSecure,
    dir: PathBuf,
    old_ca: Vec<u8>,
    stop: tokio_util::sync::CancellationToken,
) {
    let mut switched = false;
    while !stop.is_cancelled() {
        if let Some((_, ca)) = secret_data(&cluster, namespace, "etcd-ca") {
            shared.lock().unwrap().ca_pem = ca["ca.crt"].clone();
            let new_ca = ca["tls.crt"].clone();
            let member = secret_data(&cluster, namespace, "etcd-0-tls").map(|(_, m)| m);
            if !switched
                && new_ca != old_ca
                && member.is_some_and(|m| verifies(&m["tls.crt"], &new_ca, &dir))
            {
                std::fs::write(dir.join("newca.crt"), &new_ca).unwrap();
                std::fs::write(dir.join("newca.key"), &ca["tls.key"]).unwrap();
                make_leaf(&dir, "newca", "client2", "root", None, "clientAuth");
                shared.lock().unwrap().identity = Some((
                    std::fs::read(dir.join("client2.crt")).unwrap(),
                    std::fs::read(dir.join("client2.key")).unwrap(),
                ));
                switched = true;
                println!("{namespace}: the client takes a certificate from the new CA");
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// etcdctl with TLS material from `dir` (`None` for a plaintext or anonymous attempt).
pub fn etcdctl_tls(
    cluster: &Cluster,
    endpoint: &str,
    dir: &Path,
    cacert: Option<&str>,
    client: Option<&str>,
    args: &[&str],
) -> Result<String, String> {
    let mut command = cluster
        .network
        .command(ETCDCTL)
        .map_err(|e| e.to_string())?;
    command
        .arg(format!("--endpoints={endpoint}"))
        .arg("--dial-timeout=2s")
        .arg("--command-timeout=5s");
    if let Some(ca) = cacert {
        command.arg(format!(
            "--cacert={}",
            dir.join(format!("{ca}.crt")).display()
        ));
    }
    if let Some(client) = client {
        command
            .arg(format!(
                "--cert={}",
                dir.join(format!("{client}.crt")).display()
            ))
            .arg(format!(
                "--key={}",
                dir.join(format!("{client}.key")).display()
            ));
    }
    let out =
        tokio::task::block_in_place(|| command.args(args).output()).map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}
