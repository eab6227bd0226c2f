//! Certificates made with openssl (independently of the operator's own code), for TLS
//! clusters in tests: a CA, and leaves signed by it with given names and usages.

use std::path::{Path, PathBuf};
use std::process::Command;

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `<name>.crt` and `<name>.key`: a self-signed P-256 CA.
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

/// `<name>.crt` and `<name>.key` signed by `ca`, with `sans` (openssl syntax) and the
/// extended key `usage`.
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

/// The names a member certificate of cluster `cluster` in `namespace` needs.
pub fn member_sans(cluster: &str, namespace: &str) -> String {
    format!(
        "DNS:*.{cluster}.{namespace}.svc,DNS:*.{cluster}.{namespace}.svc.cluster.local,DNS:{cluster}-client.{namespace}.svc,DNS:localhost,IP:127.0.0.1"
    )
}
