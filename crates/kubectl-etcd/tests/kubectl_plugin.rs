//! The built `kubectl-etcdop` binary found by the real kubectl (v1.32) as the `etcdop` plugin on
//! PATH, against an API-only sandbox with the project's CRDs (no root needed): kubectl's
//! `--kubeconfig`, `--context` and `-n` reach it, errors say what to do, and exit codes are
//! the documented ones (the commands against running etcd are in
//! crates/operator/tests/e2e_kubectl_etcd.rs).

use std::path::Path;
use std::process::{Command, Output};

use kube_sandbox::{Sandbox, SandboxOptions};

fn kubectl(path_dir: &Path, args: &[&str]) -> Output {
    let path = format!(
        "{}:{}",
        path_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new("kubectl")
        .args(args)
        .env("PATH", path)
        .env_remove("KUBECONFIG")
        .output()
        .expect("kubectl is installed (bash scripts/install-deps.sh)")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_runs_the_plugin_with_its_flags() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::start(SandboxOptions::new(dir.path()).nodes(0))
        .await
        .expect("an API-only sandbox starts");
    let kubeconfig = sandbox.kubeconfig_path().display().to_string();
    let bin = Path::new(env!("CARGO_BIN_EXE_kubectl-etcdop"))
        .parent()
        .unwrap()
        .to_path_buf();
    let crds = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/crds");
    tokio::task::block_in_place(|| {
        let out = kubectl(
            &bin,
            &[
                "--kubeconfig",
                &kubeconfig,
                "apply",
                "-f",
                crds.to_str().unwrap(),
            ],
        );
        assert!(out.status.success(), "{}", text(&out.stderr));

        // kubectl lists and runs the plugin.
        let out = kubectl(&bin, &["plugin", "list"]);
        assert!(
            text(&out.stdout).contains("kubectl-etcdop"),
            "{}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        let out = kubectl(&bin, &["etcdop", "--help"]);
        assert!(out.status.success());
        for command in [
            "status",
            "members",
            "health",
            "defrag",
            "compact",
            "alarm",
            "forfeit-leadership",
            "leave",
            "remove-member",
            "add-member",
            "snapshot",
            "pause",
            "resume",
            "recover-quorum",
            "migrate",
            "promote-member",
            "hashkv",
            "check",
            "certificate",
            "report",
            "completion",
        ] {
            assert!(text(&out.stdout).contains(command), "{command} in --help");
        }

        // No EtcdCluster in the namespace: exit 1 and advice; -n is honoured.
        let out = kubectl(
            &bin,
            &[
                "etcdop",
                "--kubeconfig",
                &kubeconfig,
                "-n",
                "kube-system",
                "status",
            ],
        );
        assert_eq!(out.status.code(), Some(1));
        assert_eq!(
            text(&out.stderr),
            "error: no EtcdCluster in namespace kube-system; pass -n <namespace>\n"
        );
        // A cluster named that does not exist.
        let out = kubectl(
            &bin,
            &["etcdop", "--kubeconfig", &kubeconfig, "health", "main"],
        );
        assert_eq!(out.status.code(), Some(1));
        assert!(
            text(&out.stderr).contains("EtcdCluster default/main not found"),
            "{}",
            text(&out.stderr)
        );
        // A context the kubeconfig does not have.
        let out = kubectl(
            &bin,
            &[
                "etcdop",
                "--kubeconfig",
                &kubeconfig,
                "--context",
                "nope",
                "status",
            ],
        );
        assert_eq!(out.status.code(), Some(1));
        assert!(
            text(&out.stderr).contains("--context"),
            "{}",
            text(&out.stderr)
        );
        // Bad usage: exit 2.
        let out = kubectl(&bin, &["etcdop", "frobnicate"]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
        // migrate: no legacy cluster (its CRDs are not even installed) says where to look;
        // a malformed Deployment coordinate and the snapshot flags together are bad usage.
        let out = kubectl(
            &bin,
            &[
                "etcdop",
                "--kubeconfig",
                &kubeconfig,
                "-n",
                "prod",
                "migrate",
            ],
        );
        assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
        assert!(
            text(&out.stderr)
                .contains("no EtcdCluster of etcd.aenix.io/v1alpha1 in namespace prod")
                && text(&out.stderr).contains("kubectl get etcdclusters.etcd.aenix.io -A"),
            "{}",
            text(&out.stderr)
        );
        let out = kubectl(&bin, &["etcdop", "migrate", "--operator", "just-a-name"]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains("NAMESPACE/NAME"),
            "{}",
            text(&out.stderr)
        );
        let out = kubectl(
            &bin,
            &[
                "etcdop",
                "migrate",
                "--skip-snapshot",
                "--snapshot-file",
                "x.db",
            ],
        );
        assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
        let out = kubectl(&bin, &["etcdop", "--kubeconfig", &kubeconfig, "snapshot"]);
        assert_eq!(out.status.code(), Some(1));
        assert!(
            text(&out.stderr).contains("kubectl etcdop snapshot save <file>"),
            "{}",
            text(&out.stderr)
        );

        // Shell completion, for the name kubectl runs it under.
        let out = kubectl(&bin, &["etcdop", "completion", "bash"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let script = text(&out.stdout);
        assert!(script.contains("complete -F"), "{script}");
        for word in ["recover-quorum", "hashkv", "--namespace"] {
            assert!(script.contains(word), "{word} in the bash completion");
        }

        // The alias: a link named kubectl-etcd (where the reference operator's plugin is not
        // installed) is the same plugin, and says so under that name.
        let alias = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(
            bin.join("kubectl-etcdop"),
            alias.path().join("kubectl-etcd"),
        )
        .unwrap();
        let out = kubectl(alias.path(), &["etcd", "--help"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(
            text(&out.stdout).contains("Usage: kubectl etcd "),
            "{}",
            text(&out.stdout)
        );
        let out = kubectl(&bin, &["etcdop", "--help"]);
        assert!(
            text(&out.stdout).contains("Usage: kubectl etcdop "),
            "{}",
            text(&out.stdout)
        );
    });
}
