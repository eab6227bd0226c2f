//! `kube-sandbox up`: writes a kubeconfig kubectl can use, prints `ready`, and stops cleanly on
//! SIGTERM and SIGINT.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

fn run_until(signal: &str) {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_kube-sandbox"))
        .args(["up", "--dir"])
        .arg(dir.path())
        .args(["--nodes", "2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kube-sandbox starts");
    let mut first_line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first_line)
        .unwrap();
    assert_eq!(first_line, "ready\n");
    let kubeconfig = dir.path().join("kubeconfig");
    let nodes = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["get", "nodes", "-o", "name"])
        .output()
        .unwrap();
    assert!(
        nodes.status.success(),
        "{}",
        String::from_utf8_lossy(&nodes.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&nodes.stdout),
        "node/node-1\nnode/node-2\n"
    );
    let killed = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    for _ in 0..100 {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "exits cleanly on {signal}: {status}");
            let after = Command::new("kubectl")
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .args(["get", "nodes", "--request-timeout=2s"])
                .output()
                .unwrap();
            assert!(!after.status.success(), "nothing serves after the stop");
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    panic!("kube-sandbox did not stop on {signal}");
}

#[test]
fn up_serves_until_sigterm() {
    run_until("-TERM");
}

#[test]
fn up_serves_until_sigint() {
    run_until("-INT");
}
