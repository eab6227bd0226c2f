//! The restore benchmark (prints figures; not a timed test). Needs root, like the e2e tests.
//!
//!   cargo bench -p etcd-operator --bench restore
//!   RESTORE_BENCH_MIB=1024 RESTORE_BENCH_RUNS=3 cargo bench -p etcd-operator --bench restore
//!
//! A 1-member etcd cluster on the tests' default version (3.6.17) run by the operator in a
//! sandbox, filled with `RESTORE_BENCH_MIB` MiB of values (1 MiB each, default 256),
//! snapshotted by an EtcdSnapshot to moto_server (S3). That object is then restored
//! `RESTORE_BENCH_RUNS` times (default 2):
//!
//! - the floor: `benches/restore_floor.sh` with the same object downloaded to local disk:
//!   `etcdutl snapshot restore`, the seed started, the two other members joined by hand as
//!   learners and promoted, on loopback, until all three are healthy;
//! - the operator: a new 3-member EtcdCluster with `spec.bootstrap.restore` from the object,
//!   from `kubectl apply` to `Available` with 3 ready members (the seed's download, restore
//!   and start, then the two learner joins), and the peak resident memory of the seed's
//!   `restore-fetch` process. The cluster is deleted (and its volumes with it) between runs.

#[path = "common/mod.rs"]
mod bench_support;
#[path = "common/s3_source.rs"]
mod s3_source;
use etcd_operator_e2e_support as support;

use std::time::Instant;

use etcd_operator_api::EtcdSnapshot;
use kube::Api;

use bench_support::{PeakWatch, env_or, median};
use s3_source::{
    BUCKET, LIMIT, NAMESPACE, STORAGE, filled_source, s3_snapshot_yaml, snapshot_to_complete,
};
use support::get_cluster;
use support::status::wait_available;

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() {
    let mib: usize = env_or("RESTORE_BENCH_MIB", 256);
    let runs: usize = env_or("RESTORE_BENCH_RUNS", 2);
    let source = filled_source(3, mib).await;
    let (cluster, moto, dir) = (&source.cluster, &source.moto, &source.dir);
    let storage = STORAGE;

    // The snapshot both sides restore.
    let api: Api<EtcdSnapshot> = Api::namespaced(cluster.client(), NAMESPACE);
    let (_, snapshot) = snapshot_to_complete(
        cluster,
        &api,
        "source",
        &s3_snapshot_yaml("source", moto, ""),
    )
    .await;
    let status = snapshot.status.unwrap();
    let size = status.artifact.as_ref().unwrap().size_bytes.unwrap();
    let revision = status.revision.unwrap();
    // The source cluster goes: its volume is not needed, and the disk is.
    tokio::task::block_in_place(|| {
        support::kubectl(
            cluster,
            &[
                "-n",
                NAMESPACE,
                "delete",
                "etcdcluster",
                "etcd",
                "--timeout=300s",
            ],
        )
    });

    // The floor, with the same bytes on local disk.
    let file = dir.path().join("source.db");
    tokio::task::block_in_place(|| moto.download(BUCKET, "bench/source.db", &file));
    let script = support::repo_root().join("crates/operator/benches/restore_floor.sh");
    let out = tokio::task::block_in_place(|| {
        std::process::Command::new("bash")
            .arg(&script)
            .arg(&file)
            .arg(runs.to_string())
            .envs(["etcd", "etcdctl", "etcdutl"].map(|b| {
                (
                    b.to_uppercase(),
                    format!("{}/{b}", support::etcd_binaries(support::DEFAULT_VERSION)),
                )
            }))
            .output()
            .expect("the floor script runs")
    });
    assert!(
        out.status.success(),
        "the floor: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_file(&file);
    let floor_text = String::from_utf8_lossy(&out.stdout).to_string();
    let floor: Vec<f64> = floor_text
        .lines()
        .filter_map(|l| {
            l.strip_prefix("restore ")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .collect();
    assert_eq!(floor.len(), runs, "{floor_text}");
    print!("{floor_text}");

    // The operator.
    let mut operator = Vec::new();
    let mut peaks = Vec::new();
    for round in 0..runs {
        let name = format!("restored-{round}");
        let watch = PeakWatch::start("restore-fetch");
        let started = Instant::now();
        tokio::task::block_in_place(|| {
            cluster.apply(&format!(
                "apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdCluster\nmetadata:\n  name: {name}\n  namespace: {NAMESPACE}\nspec:\n  replicas: 3\n  version: \"{}\"\n{storage}  bootstrap:\n    restore:\n      source:\n        s3:\n          endpoint: {}\n          bucket: {BUCKET}\n          key: bench/source.db\n          forcePathStyle: true\n          credentialsSecretRef:\n            name: s3-credentials\n",
                support::DEFAULT_VERSION,
                moto.url
            ))
        });
        wait_available(&cluster.client(), NAMESPACE, &name, 3, LIMIT).await;
        let took = started.elapsed().as_secs_f64();
        let peak = watch.finish();
        let c = get_cluster(&cluster.client(), NAMESPACE, &name).await;
        let restored = c.status.and_then(|s| s.restored_from).map(|r| r.revision);
        assert_eq!(
            restored,
            Some(Some(revision)),
            "{name}: restored at the snapshot's revision"
        );
        println!(
            "round {round}: operator restore to Available (3 members) {took:.1} s; restore-fetch peak RSS {peak:.1} MiB"
        );
        operator.push(took);
        peaks.push(peak);
        tokio::task::block_in_place(|| {
            support::kubectl(
                cluster,
                &[
                    "-n",
                    NAMESPACE,
                    "delete",
                    "etcdcluster",
                    &name,
                    "--timeout=300s",
                ],
            )
        });
    }
    println!("| what | median s |");
    println!("| --- | ---: |");
    println!(
        "| floor: etcdutl snapshot restore + seed + 2 learner joins by hand | {:.1} |",
        median(&floor)
    );
    println!(
        "| operator: EtcdCluster with bootstrap.restore to Available (3 members) | {:.1} |",
        median(&operator)
    );
    println!(
        "snapshot {size} bytes at revision {revision}; operator / floor time {:.2}; restore-fetch peak RSS {:.1} MiB (aim < 64 MiB)",
        median(&operator) / median(&floor),
        peaks.iter().cloned().fold(0.0, f64::max)
    );
}
