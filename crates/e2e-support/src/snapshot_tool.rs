//! `snapshot status` of a saved snapshot file, read by etcd's own tool: the one copy for the
//! snapshot end-to-end tests (through `support::snapshots`) and `etcd_snapshot_revision`.

use std::path::Path;
use std::process::Command;

/// etcd 3.5.1's etcdutl and 3.4.23's etcdctl (which still has `snapshot status`).
pub const ETCDUTL_35: &str = "/usr/local/lib/etcd-3.5.1/etcdutl";
pub const ETCDCTL_34: &str = "/usr/bin/etcdctl";

/// `snapshot status -w json` of the file, with the tool of that etcd version.
pub fn snapshot_status(version: &str, file: &Path) -> serde_json::Value {
    let out = if version == "3.4.23" {
        Command::new(ETCDCTL_34)
            .env("ETCDCTL_API", "3")
            .args(["snapshot", "status", "-w", "json"])
            .arg(file)
            .output()
    } else {
        Command::new(ETCDUTL_35)
            .args(["snapshot", "status", "-w", "json"])
            .arg(file)
            .output()
    }
    .expect("the snapshot status tool runs");
    assert!(
        out.status.success(),
        "snapshot status of {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("snapshot status prints JSON")
}
