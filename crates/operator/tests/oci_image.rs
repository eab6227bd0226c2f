//! The operator's OCI image, built by `scripts/build-image.sh` from the binary this build made,
//! is proven to start: the archive is read back with skopeo (its digest is the one the script
//! printed), unpacked with umoci, and the sandbox runs the operator's Deployment from `deploy/`
//! on the image's own root filesystem (none of the machine's `/usr` or `/lib`), which then
//! bootstraps a real etcd cluster. The same image with its C library removed does not start,
//! so the test would notice an image that lacks what the binary links.

use etcd_operator_e2e_support as support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube_sandbox::runtime::ImageMap;
use support::cluster::{OPERATOR_IMAGE, start_cluster_with_images};
use support::{cluster_yaml, create_namespace, eventually, repo_root};

const LIMIT: Duration = Duration::from_secs(180);
const BROKEN_IMAGE: &str = "example.com/etcd-operator-without-libc:v1";

/// Runs a command to completion; its stdout, or a panic with its stderr.
fn run(program: &str, args: &[&str]) -> String {
    let output = Command::new(program)
        .args(args)
        .current_dir(repo_root())
        .output()
        .unwrap_or_else(|e| panic!("running {program}: {e} (run scripts/install-deps.sh)"));
    assert!(
        output.status.success(),
        "{program} {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Builds the image from this build's binary; the archive and the digest the script printed.
fn build_image(dir: &Path) -> (std::path::PathBuf, String) {
    let binary = dir.join("etcd-operator");
    std::fs::copy(env!("CARGO_BIN_EXE_etcd-operator"), &binary).expect("copy the binary");
    let archive = dir.join("etcd-operator.tar");
    let stdout = run(
        "bash",
        &[
            "scripts/build-image.sh",
            "--binary",
            binary.to_str().unwrap(),
            "--tag",
            "v0.0.0-test",
            "--out",
            archive.to_str().unwrap(),
        ],
    );
    let digest = stdout.lines().last().unwrap_or_default().trim().to_string();
    (archive, digest)
}

/// Unpacks an oci-archive the way a node would pull it; the root filesystem's path.
fn unpack(archive: &Path, dir: &Path) -> std::path::PathBuf {
    let layout = dir.join("layout");
    run(
        "skopeo",
        &[
            "copy",
            "--quiet",
            &format!("oci-archive:{}", archive.display()),
            &format!("oci:{}:pulled", layout.display()),
        ],
    );
    let bundle = dir.join("bundle");
    run(
        "umoci",
        &[
            "unpack",
            "--image",
            &format!("{}:pulled", layout.display()),
            bundle.to_str().unwrap(),
        ],
    );
    bundle.join("rootfs")
}

/// A copy of `rootfs` without its C library.
fn without_libc(rootfs: &Path, dir: &Path) -> std::path::PathBuf {
    let copy = dir.join("broken-rootfs");
    run(
        "cp",
        &["-a", rootfs.to_str().unwrap(), copy.to_str().unwrap()],
    );
    let mut removed = 0;
    for lib in [
        "usr/lib/x86_64-linux-gnu/libc.so.6",
        "lib/x86_64-linux-gnu/libc.so.6",
    ] {
        let path = copy.join(lib);
        if path.symlink_metadata().is_ok() && std::fs::remove_file(&path).is_ok() {
            removed += 1;
        }
    }
    assert!(removed > 0, "the image carries no libc.so.6 to remove");
    copy
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_operator_image_starts_and_runs_a_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let (archive, digest) = tokio::task::block_in_place(|| build_image(dir.path()));
    assert!(
        digest.starts_with("sha256:") && digest.len() == 71,
        "the script prints the manifest digest last, got {digest:?}"
    );
    let inspected = tokio::task::block_in_place(|| {
        run(
            "skopeo",
            &[
                "inspect",
                "--format",
                "{{.Digest}} {{.Architecture}} {{.Os}}",
                &format!("oci-archive:{}", archive.display()),
            ],
        )
    });
    assert_eq!(inspected.trim(), format!("{digest} amd64 linux"));
    let config = tokio::task::block_in_place(|| {
        run(
            "skopeo",
            &[
                "inspect",
                "--config",
                &format!("oci-archive:{}", archive.display()),
            ],
        )
    });
    let config: serde_json::Value = serde_json::from_str(&config).unwrap();
    assert_eq!(config["config"]["User"], "65532:65532");
    assert_eq!(
        config["config"]["Entrypoint"],
        serde_json::json!(["/usr/local/bin/etcd-operator"])
    );
    let rootfs = tokio::task::block_in_place(|| unpack(&archive, dir.path()));
    assert!(rootfs.join("usr/local/bin/etcd-operator").is_file());
    let broken = tokio::task::block_in_place(|| without_libc(&rootfs, dir.path()));

    let yaml = format!(
        "images:\n  - image: \"{OPERATOR_IMAGE}:*\"\n    rootfs: {}\n    entrypoint: [/usr/local/bin/etcd-operator]\n  - image: \"{BROKEN_IMAGE}\"\n    rootfs: {}\n    entrypoint: [/usr/local/bin/etcd-operator]\n",
        rootfs.display(),
        broken.display()
    );
    let images = ImageMap::from_yaml(&yaml, Path::new("/")).expect("the image map");
    let cluster = start_cluster_with_images(3, images).await;
    let client = cluster.client();

    // The image without libc: its container cannot start, and the Pod says so.
    create_namespace(&client, "broken").await;
    cluster.apply(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: no-libc\n  namespace: broken\nspec:\n  restartPolicy: Never\n  containers:\n    - name: operator\n      image: {BROKEN_IMAGE}\n      args: [\"--help\"]\n"
    ));
    let pods: Api<Pod> = Api::namespaced(client.clone(), "broken");
    let failure: String = eventually(
        "the Pod of the image without libc to fail",
        Duration::from_secs(60),
        || async {
            let pod = pods.get("no-libc").await.map_err(|e| e.to_string())?;
            let status = pod.status.unwrap_or_default();
            let container = status
                .container_statuses
                .unwrap_or_default()
                .into_iter()
                .next()
                .and_then(|c| c.state);
            // Exited with an error (the loader finds no libc), or refused a start.
            let failed = status.phase.as_deref() == Some("Failed")
                || container.as_ref().is_some_and(|s| {
                    s.terminated.as_ref().is_some_and(|t| t.exit_code != 0)
                        || s.waiting.as_ref().is_some_and(|w| {
                            w.reason
                                .as_deref()
                                .is_some_and(|r| r != "ContainerCreating")
                        })
                });
            if failed {
                Ok(format!("{:?} {container:?}", status.phase))
            } else {
                Err(format!("phase {:?}, container {container:?}", status.phase))
            }
        },
    )
    .await;
    println!("the image without libc: {failure}");

    // The image itself: the operator from deploy/ on the image's root, reconciling a cluster.
    cluster.deploy_operator(1).await;
    let operator = cluster.operator_pods().await;
    let image = operator[0]
        .spec
        .as_ref()
        .map(|s| s.containers[0].image.clone().unwrap_or_default())
        .unwrap_or_default();
    assert!(image.starts_with(OPERATOR_IMAGE), "operator image {image}");
    create_namespace(&client, "image").await;
    cluster.apply(&cluster_yaml("etcd", "image", 3, ""));
    cluster.wait_converged("image", "etcd", 3, LIMIT).await;
    cluster.put("image", "etcd", "from-the-image", "yes");
    assert_eq!(
        cluster.get("image", "etcd", "from-the-image").unwrap(),
        Some("yes".to_string())
    );
    println!("image {digest}: the operator ran from it and bootstrapped 3 members");
}
