//! The restore benchmark (prints figures; not a timed test). Needs root, like the e2e tests.
//!
//!   cargo bench -p etcd-operator --bench restore
//!   RESTORE_BENCH_MIB=1024 RESTORE_BENCH_RUNS=2 cargo bench -p etcd-operator --bench restore
//!
//! A 1-member etcd 3.5.1 cluster run by the operator in a sandbox, filled with
//! `RESTORE_BENCH_MIB` MiB of values (1 MiB each, default 256), snapshotted by an EtcdSnapshot
//! to moto_server (S3). That object is then restored `RESTORE_BENCH_RUNS` times (default 2):
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
#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use bench_support::{PeakWatch, env_or, median};
use etcd_operator_api::EtcdSnapshot;
use kube::Api;
use support::moto::Moto;
use support::workload::{client_service_url, cluster_client};
use support::{condition, create_namespace, eventually, get_cluster};

const NAMESPACE: &str = "bench";
const BUCKET: &str = "backups";

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() {
    let mib: usize = env_or("RESTORE_BENCH_MIB", 256);
    let runs: usize = env_or("RESTORE_BENCH_RUNS", 2);
    let cluster = support::cluster::start_cluster(3).await;
    cluster.deploy_operator(1).await;
    let dir = tempfile::tempdir().unwrap();
    let moto = tokio::task::block_in_place(|| Moto::start(&cluster, dir.path(), BUCKET));
    create_namespace(&cluster.client(), NAMESPACE).await;
    let storage = "  storage:\n    size: 8Gi\n  options:\n    quotaBackendBytes: 8589934592\n";
    tokio::task::block_in_place(|| {
        cluster.apply(&format!(
            "apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdCluster\nmetadata:\n  name: etcd\n  namespace: {NAMESPACE}\nspec:\n  replicas: 1\n  version: \"3.5.1\"\n{storage}"
        ));
        let (ok, _, stderr) = support::kubectl(
            &cluster,
            &[
                "-n",
                NAMESPACE,
                "create",
                "secret",
                "generic",
                "s3-credentials",
                &format!("--from-literal=AWS_ACCESS_KEY_ID={}", moto.key_id),
                &format!("--from-literal=AWS_SECRET_ACCESS_KEY={}", moto.secret),
            ],
        );
        assert!(ok, "{stderr}");
    });
    cluster
        .wait_converged(NAMESPACE, "etcd", 1, Duration::from_secs(240))
        .await;
    let endpoint = client_service_url(NAMESPACE, "etcd");
    let mut client = cluster_client(&cluster.network, &endpoint, None)
        .await
        .expect("an etcd client");
    let filling = Instant::now();
    for i in 0..mib as u32 {
        let value: Vec<u8> = (0..1024 * 1024u32)
            .map(|j| {
                (j.wrapping_mul(2654435761)
                    .wrapping_add(i.wrapping_mul(40503))
                    >> 13) as u8
            })
            .collect();
        client
            .put(format!("bench/{i:05}"), value, None)
            .await
            .expect("a 1 MiB put");
    }
    println!(
        "filled {mib} MiB in {:.1} s",
        filling.elapsed().as_secs_f64()
    );

    // The snapshot both sides restore.
    let api: Api<EtcdSnapshot> = Api::namespaced(cluster.client(), NAMESPACE);
    tokio::task::block_in_place(|| {
        cluster.apply(&format!(
            "apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdSnapshot\nmetadata:\n  name: source\n  namespace: {NAMESPACE}\nspec:\n  clusterRef:\n    name: etcd\n  destination:\n    s3:\n      endpoint: {}\n      bucket: {BUCKET}\n      key: bench\n      forcePathStyle: true\n      credentialsSecretRef:\n        name: s3-credentials\n",
            moto.url
        ))
    });
    let snapshot = eventually("source Complete", Duration::from_secs(1800), || async {
        let s = api.get("source").await.map_err(|e| e.to_string())?;
        match s
            .status
            .as_ref()
            .and_then(|s| s.phase)
            .map(|p| format!("{p:?}"))
        {
            Some(p) if p == "Complete" => Ok(s),
            Some(p) if p == "Failed" => panic!("the source snapshot failed: {:?}", s.status),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let status = snapshot.status.unwrap();
    let size = status.artifact.as_ref().unwrap().size_bytes.unwrap();
    let revision = status.revision.unwrap();
    // The source cluster goes: its volume is not needed, and the disk is.
    tokio::task::block_in_place(|| {
        support::kubectl(
            &cluster,
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
                "apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdCluster\nmetadata:\n  name: {name}\n  namespace: {NAMESPACE}\nspec:\n  replicas: 3\n  version: \"3.5.1\"\n{storage}  bootstrap:\n    restore:\n      source:\n        s3:\n          endpoint: {}\n          bucket: {BUCKET}\n          key: bench/source.db\n          forcePathStyle: true\n          credentialsSecretRef:\n            name: s3-credentials\n",
                moto.url
            ))
        });
        let client = cluster.client();
        eventually(
            &format!("{name} Available with 3 members"),
            Duration::from_secs(1800),
            || async {
                let c = get_cluster(&client, NAMESPACE, &name).await;
                let ready = c.status.as_ref().and_then(|s| s.ready_members);
                (ready == Some(3) && condition(&c, "Available").as_deref() == Some("True"))
                    .then_some(())
                    .ok_or_else(|| format!("ready {ready:?}"))
            },
        )
        .await;
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
                &cluster,
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
