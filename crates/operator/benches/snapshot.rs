//! The snapshot benchmark (prints figures; not a timed test). Needs root, like the e2e tests.
//!
//!   cargo bench -p etcd-operator --bench snapshot
//!   SNAPSHOT_BENCH_MIB=1024 SNAPSHOT_BENCH_RUNS=3 cargo bench -p etcd-operator --bench snapshot
//!
//! A 1-member etcd cluster on the tests' default version (3.6.17) run by the operator
//! (deployed from `deploy/`) in a sandbox, filled with `SNAPSHOT_BENCH_MIB` MiB of values (1 MiB
//! each, default 256), and moto_server as the S3 store in the sandbox's network. Then
//! `SNAPSHOT_BENCH_RUNS` rounds (default 3), each:
//!
//! - the floor: `etcdctl snapshot save` to a local file, then the same file uploaded by a plain
//!   client (boto3's managed multipart upload), timed separately and summed;
//! - the operator: an EtcdSnapshot from `kubectl apply` to `Complete` (stream, upload, and the
//!   read-back verification the floor does not do), its own split of that time (streamed /
//!   read back, from its log), its CPU time, and the operator process's peak resident memory
//!   (VmHWM) before and after;
//! - the operator to a PVC: an EtcdSnapshot with `destination.pvc` to `Complete` (the agent
//!   Pod's start, stream, fsync, read-back), beside the floor's `etcdctl snapshot save` to local
//!   disk alone, and the agent process's peak resident memory;
//! - the operator with the codec (`SNAPSHOT_BENCH_CODEC=0` skips it): zstd + age to S3 with
//!   the identity, so that the read-back decrypts and decompresses the whole object, and the
//!   operator's peak memory.
//!
//! Objects and files are deleted after each round (moto keeps objects in memory).

#[path = "common/mod.rs"]
mod bench_support;
#[path = "common/s3_source.rs"]
mod s3_source;
use etcd_operator_e2e_support as support;

use std::time::Instant;

use etcd_operator_api::EtcdSnapshot;
use kube::Api;

use bench_support::{PeakWatch, cpu_seconds, env_or, median, memory_mib, operator_pid};
use s3_source::{BUCKET, NAMESPACE, filled_source, s3_snapshot_yaml, snapshot_to_complete};
use support::cluster::ETCDCTL;

/// The operator's own account of snapshot `name`'s two halves, from its log line "snapshot
/// stored and read back".
async fn operator_split(cluster: &support::cluster::Cluster, name: &str) -> String {
    let logs = cluster.operator_log_tail(2000).await;
    // The operator logs JSON: `"streamed_seconds":"23.31"`.
    let field = |line: &str, key: &str| {
        line.split(&format!("\"{key}\":\""))
            .nth(1)
            .and_then(|rest| rest.split('"').next().map(str::to_string))
    };
    let about = format!("\"snapshot\":\"{name}\"");
    logs.lines()
        .rfind(|l| l.contains("snapshot stored and read back") && l.contains(&about))
        .and_then(|l| {
            Some(format!(
                "streamed {} s, read back {} s",
                field(l, "streamed_seconds")?,
                field(l, "read_back_seconds")?
            ))
        })
        .unwrap_or_else(|| {
            let said: Vec<&str> = logs.lines().filter(|l| l.contains(&about)).collect();
            format!(
                "no split in the operator's log; its lines on {name}:\n{}",
                said.join("\n")
            )
        })
}

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() {
    let mib: usize = env_or("SNAPSHOT_BENCH_MIB", 256);
    let runs: usize = env_or("SNAPSHOT_BENCH_RUNS", 3);
    let codec: usize = env_or("SNAPSHOT_BENCH_CODEC", 1);
    let source = filled_source(1, mib).await;
    let (cluster, moto, dir) = (&source.cluster, &source.moto, &source.dir);
    // The claim of the PVC rounds, and the age keys of the codec rounds.
    let identity = age::x25519::Identity::generate();
    tokio::task::block_in_place(|| {
        use age::secrecy::ExposeSecret;
        cluster.apply(&format!(
            "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: backups\n  namespace: {NAMESPACE}\nspec:\n  accessModes: [ReadWriteOnce]\n  resources:\n    requests:\n      storage: 8Gi\n"
        ));
        for (name, key, text) in [
            ("backup-age", "recipients", identity.to_public().to_string()),
            (
                "backup-age-identity",
                "identity",
                identity.to_string().expose_secret().to_string(),
            ),
        ] {
            let (ok, _, stderr) = support::kubectl(
                cluster,
                &[
                    "-n",
                    NAMESPACE,
                    "create",
                    "secret",
                    "generic",
                    name,
                    &format!("--from-literal={key}={text}"),
                ],
            );
            assert!(ok, "{stderr}");
        }
    });

    let pid = operator_pid();
    let api: Api<EtcdSnapshot> = Api::namespaced(cluster.client(), NAMESPACE);
    let (mut floor_save, mut floor_upload, mut operator) = (Vec::new(), Vec::new(), Vec::new());
    let mut size = 0i64;
    let mut peaks = Vec::new();
    let (mut pvc, mut agent_peaks, mut codec_runs) = (Vec::new(), Vec::new(), Vec::new());
    let mut codec_stored = 0i64;
    for round in 0..runs {
        // The floor: etcdctl snapshot save, then a plain upload of the file.
        let file = dir.path().join("floor.db");
        let started = Instant::now();
        let out = tokio::task::block_in_place(|| {
            cluster
                .network
                .command(ETCDCTL)
                .unwrap()
                .arg(format!(
                    "--endpoints=http://etcd-0.etcd.{NAMESPACE}.svc:2379"
                ))
                .args(["snapshot", "save"])
                .arg(&file)
                .output()
                .expect("etcdctl runs")
        });
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let saved = started.elapsed().as_secs_f64();
        let started = Instant::now();
        let floor_key = format!("floor/{round}.db");
        tokio::task::block_in_place(|| moto.upload(BUCKET, &floor_key, &file));
        let uploaded = started.elapsed().as_secs_f64();
        let _ = std::fs::remove_file(&file);
        tokio::task::block_in_place(|| moto.delete(BUCKET, &floor_key));

        // The operator.
        let before = memory_mib(pid, "VmHWM");
        let cpu_before = cpu_seconds(pid);
        let name = format!("run-{round}");
        let (took, snapshot) =
            snapshot_to_complete(cluster, &api, &name, &s3_snapshot_yaml(&name, moto, "")).await;
        let after = memory_mib(pid, "VmHWM");
        let cpu = cpu_seconds(pid) - cpu_before;
        size = snapshot
            .status
            .unwrap()
            .artifact
            .unwrap()
            .size_bytes
            .unwrap();
        tokio::task::block_in_place(|| moto.delete(BUCKET, &format!("bench/{name}.db")));
        println!(
            "round {round}: floor save {saved:.1} s + upload {uploaded:.1} s = {:.1} s; operator {took:.1} s (stream, upload, read-back; {}), {cpu:.1} s of CPU; operator peak RSS {before:.1} -> {after:.1} MiB",
            saved + uploaded,
            operator_split(cluster, &name).await
        );
        floor_save.push(saved);
        floor_upload.push(uploaded);
        operator.push(took);
        peaks.push(after);

        // The operator to a PVC (its agent Pod), beside `etcdctl snapshot save` alone.
        let name = format!("pvc-{round}");
        let watch = PeakWatch::start("snapshot-save");
        let (took, _) = snapshot_to_complete(
            cluster,
            &api,
            &name,
            &format!(
                "apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdSnapshot\nmetadata:\n  name: {name}\n  namespace: {NAMESPACE}\nspec:\n  clusterRef:\n    name: etcd\n  destination:\n    pvc:\n      claimName: backups\n      subPath: bench\n"
            ),
        )
        .await;
        let agent_peak = watch.finish();
        if let Ok(claim) = cluster.kubelet.claim_dir(NAMESPACE, "backups") {
            let _ = std::fs::remove_file(claim.join(format!("bench/{name}.db")));
        }
        println!(
            "round {round}: floor etcdctl snapshot save {saved:.1} s; operator to a PVC {took:.1} s (agent Pod, stream, fsync, read-back); agent peak RSS {agent_peak:.1} MiB"
        );
        pvc.push(took);
        agent_peaks.push(agent_peak);

        // The operator with zstd + age, read back decrypted and decompressed.
        if codec > 0 {
            let name = format!("codec-{round}");
            let codec_spec = "  compression: Zstd\n  encryption:\n    age:\n      recipientsSecretRef:\n        name: backup-age\n      identitySecretRef:\n        name: backup-age-identity\n";
            let (took, snapshot) = snapshot_to_complete(
                cluster,
                &api,
                &name,
                &s3_snapshot_yaml(&name, moto, codec_spec),
            )
            .await;
            let after = memory_mib(pid, "VmHWM");
            codec_stored = snapshot
                .status
                .unwrap()
                .artifact
                .unwrap()
                .size_bytes
                .unwrap();
            tokio::task::block_in_place(|| moto.delete(BUCKET, &format!("bench/{name}.db")));
            println!(
                "round {round}: operator zstd + age to S3 {took:.1} s ({codec_stored} bytes stored, read back decrypted and decompressed); operator peak RSS now {after:.1} MiB"
            );
            codec_runs.push(took);
            peaks.push(after);
        }
    }
    let floor: Vec<f64> = floor_save
        .iter()
        .zip(&floor_upload)
        .map(|(a, b)| a + b)
        .collect();
    let mb = size as f64 / 1e6;
    println!("| what | median s | MB/s |");
    println!("| --- | ---: | ---: |");
    println!(
        "| floor: etcdctl snapshot save | {:.1} | {:.0} |",
        median(&floor_save),
        mb / median(&floor_save)
    );
    println!(
        "| floor: boto3 upload of the file | {:.1} | {:.0} |",
        median(&floor_upload),
        mb / median(&floor_upload)
    );
    println!(
        "| floor: both | {:.1} | {:.0} |",
        median(&floor),
        mb / median(&floor)
    );
    println!(
        "| operator: EtcdSnapshot to Complete (incl. read-back) | {:.1} | {:.0} |",
        median(&operator),
        mb / median(&operator)
    );
    println!(
        "| operator: EtcdSnapshot to a PVC to Complete (agent Pod, incl. read-back) | {:.1} | {:.0} |",
        median(&pvc),
        mb / median(&pvc)
    );
    if !codec_runs.is_empty() {
        println!(
            "| operator: zstd + age to S3 to Complete (incl. decoding read-back) | {:.1} | {:.0} |",
            median(&codec_runs),
            mb / median(&codec_runs)
        );
    }
    println!(
        "snapshot {size} bytes; throughput ratio operator/floor {:.2} (aim >= 0.8); operator peak RSS {:.1} MiB (aim < 64 MiB), now {:.1} MiB",
        median(&floor) / median(&operator),
        peaks.iter().cloned().fold(0.0, f64::max),
        memory_mib(pid, "VmRSS")
    );
    println!(
        "PVC: throughput ratio operator/floor (etcdctl snapshot save) {:.2} (aim >= 0.8); agent peak RSS {:.1} MiB (aim < 64 MiB)",
        median(&floor_save) / median(&pvc),
        agent_peaks.iter().cloned().fold(0.0, f64::max)
    );
    if !codec_runs.is_empty() {
        println!(
            "zstd + age: {codec_stored} bytes stored for {size} ({:.2}); {:.2} x the plain S3 snapshot's time",
            codec_stored as f64 / size as f64,
            median(&codec_runs) / median(&operator)
        );
    }
}
