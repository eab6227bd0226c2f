//! `kube-sandbox up` runs a whole cluster: `kubectl run` Pods with a mapped image run and are
//! reachable through `kube-sandbox exec` (kubectl with `DIR/kubeconfig` works there too),
//! `kube-sandbox fault` reaches the running sandbox, and a killed sandbox leaves no process
//! behind (needs root).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const SANDBOX: &str = env!("CARGO_BIN_EXE_kube-sandbox");

struct Up(Child);

impl Drop for Up {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `kube-sandbox up` in `dir` and waits for its `ready` line.
fn up(dir: &Path) -> Up {
    let images = dir.join("images.yaml");
    std::fs::write(
        &images,
        "images:\n  - image: \"sandbox.local/tools:*\"\n    cmd: [/bin/sh]\n",
    )
    .unwrap();
    let mut child = Command::new(SANDBOX)
        .args([
            "up",
            "--dir",
            dir.to_str().unwrap(),
            "--nodes",
            "2",
            "--time-scale",
            "0.1",
            "--images",
            images.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "ready");
    Up(child)
}

fn run(program: &str, args: &[&str]) -> Output {
    Command::new(program).args(args).output().unwrap()
}

fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn eventually(what: &str, check: impl Fn() -> bool) {
    let started = Instant::now();
    while !check() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{what} did not happen within a minute"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn processes_with(marker: &str) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|entry| {
            std::fs::read(entry.path().join("cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker))
        })
        .count()
}

#[test]
fn kube_sandbox_up_runs_kubectl_pods_reachable_through_exec_and_faults() {
    let dir = tempfile::tempdir().unwrap();
    let sandbox = up(dir.path());
    let dir_text = dir.path().to_str().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let kubectl = |args: &[&str]| {
        let mut all = vec!["--kubeconfig", kubeconfig.to_str().unwrap()];
        all.extend_from_slice(args);
        run("kubectl", &all)
    };
    stdout(&kubectl(&[
        "run",
        "web",
        "--image=sandbox.local/tools:latest",
        "--port=8080",
        "--command",
        "--",
        "python3",
        "-m",
        "http.server",
        "8080",
    ]));
    stdout(&kubectl(&[
        "wait",
        "--for=condition=Ready",
        "pod/web",
        "--timeout=60s",
    ]));
    let ip = stdout(&kubectl(&[
        "get",
        "pod",
        "web",
        "-o",
        "jsonpath={.status.podIP}",
    ]));
    let page = stdout(&run(
        SANDBOX,
        &[
            "exec",
            "--dir",
            dir_text,
            "--",
            "wget",
            "-qO-",
            "-T",
            "5",
            &format!("http://{ip}:8080/"),
        ],
    ));
    assert!(page.contains("Directory listing"), "{page}");
    // The kubeconfig works inside the cluster network too.
    let inside = stdout(&run(
        SANDBOX,
        &[
            "exec",
            "--dir",
            dir_text,
            "--",
            "kubectl",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "get",
            "pods",
            "-o",
            "name",
        ],
    ));
    assert_eq!(inside, "pod/web\n");
    // And inside the Pod's container, as `kubectl exec` would.
    let hostname = stdout(&run(
        SANDBOX,
        &[
            "exec",
            "--dir",
            dir_text,
            "--pod",
            "web",
            "--",
            "cat",
            "/etc/hostname",
        ],
    ));
    assert_eq!(hostname, "web\n");
    let nodes = stdout(&kubectl(&[
        "get",
        "nodes",
        "-o",
        "jsonpath={.items[*].status.conditions[?(@.type==\"Ready\")].status}",
    ]));
    assert_eq!(nodes, "True True");

    let killed = stdout(&run(
        SANDBOX,
        &[
            "fault", "--dir", dir_text, "kill", "web", "--signal", "KILL",
        ],
    ));
    assert_eq!(killed, "sent SIGKILL to Pod default/web\n");
    eventually("web restarted", || {
        kubectl(&[
            "get",
            "pod",
            "web",
            "-o",
            "jsonpath={.status.containerStatuses[0].restartCount}",
        ])
        .stdout
            == b"1"
    });
    let unknown = run(
        SANDBOX,
        &["fault", "--dir", dir_text, "crash-node", "node-9"],
    );
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no node node-9 in this sandbox"));

    // Killed outright, the sandbox takes its Pods' processes with it.
    let marker = format!("{}.5", 80000 + std::process::id() % 5000);
    stdout(&kubectl(&[
        "run",
        "sleeper",
        "--image=sandbox.local/tools:latest",
        "--command",
        "--",
        "sleep",
        &marker,
    ]));
    eventually("the sleeper running", || processes_with(&marker) == 1);
    drop(sandbox);
    eventually("the sleeper gone with its sandbox", || {
        processes_with(&marker) == 0
    });
    let gone = run(
        SANDBOX,
        &["fault", "--dir", dir_text, "crash-node", "node-1"],
    );
    assert!(String::from_utf8_lossy(&gone.stderr).contains("no sandbox with nodes is running"));
    // The next sandbox in the same directory sweeps what the killed one left.
    let again = up(dir.path());
    let state: Vec<_> = std::fs::read_dir(dir.path().join("state"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(
        state.len(),
        1,
        "only the new runtime's state directory: {state:?}"
    );
    drop(again);
}
