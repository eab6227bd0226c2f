#![allow(dead_code)]
//! The set-up the snapshot and restore benchmarks share (included with `#[path]` beside
//! the e2e support crate, which it uses as `crate::support`): the operator deployed in a sandbox,
//! moto_server as the S3 store in the sandbox's network, a 1-member etcd cluster on the tests'
//! default version (`support::DEFAULT_VERSION`) with room for the data (an 8 GiB claim and
//! quota) and the S3 credentials Secret, filled with `mib` MiB of 1 MiB values; and an
//! EtcdSnapshot applied and waited for until Complete.

use std::time::{Duration, Instant};

use etcd_operator_api::EtcdSnapshot;
use kube::Api;

use crate::support::cluster::{Cluster, start_cluster};
use crate::support::moto::Moto;
use crate::support::workload::{client_service_url, cluster_client};
use crate::support::{create_namespace, eventually, kubectl};

pub const NAMESPACE: &str = "bench";
pub const BUCKET: &str = "backups";
/// The spec lines that give a member room for the data: an 8 GiB claim and quota.
pub const STORAGE: &str =
    "  storage:\n    size: 8Gi\n  options:\n    quotaBackendBytes: 8589934592\n";
/// How long one snapshot, or one restored cluster, may take.
pub const LIMIT: Duration = Duration::from_secs(1800);

/// A sandbox running the operator, moto_server, and the filled cluster `bench/etcd`.
pub struct Source {
    // Dropped in this order: moto_server, its directory, then the sandbox.
    pub moto: Moto,
    /// Where moto keeps its state and the benchmarks their files (removed when dropped).
    pub dir: tempfile::TempDir,
    pub cluster: Cluster,
}

/// Starts a sandbox of `nodes` nodes with the operator and moto_server, creates `bench/etcd`
/// (1 member) and the Secret `s3-credentials`, and fills the cluster with `mib` MiB.
pub async fn filled_source(nodes: usize, mib: usize) -> Source {
    let cluster = start_cluster(nodes).await;
    cluster.deploy_operator(1).await;
    let dir = tempfile::tempdir().unwrap();
    let moto = tokio::task::block_in_place(|| Moto::start(&cluster, dir.path(), BUCKET));
    create_namespace(&cluster.client(), NAMESPACE).await;
    tokio::task::block_in_place(|| {
        cluster.apply(&format!(
            "apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdCluster\nmetadata:\n  name: etcd\n  namespace: {NAMESPACE}\nspec:\n  replicas: 1\n  version: \"{}\"\n{STORAGE}",
            crate::support::DEFAULT_VERSION
        ));
        let (ok, _, stderr) = kubectl(
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
    Source { moto, dir, cluster }
}

/// An EtcdSnapshot `name` of `bench/etcd` to moto's bucket under the key `bench`, with
/// `extra_spec` (lines of the spec, two spaces in) added.
pub fn s3_snapshot_yaml(name: &str, moto: &Moto, extra_spec: &str) -> String {
    format!(
        "apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdSnapshot\nmetadata:\n  name: {name}\n  namespace: {NAMESPACE}\nspec:\n  clusterRef:\n    name: etcd\n  destination:\n    s3:\n      endpoint: {}\n      bucket: {BUCKET}\n      key: bench\n      forcePathStyle: true\n      credentialsSecretRef:\n        name: s3-credentials\n{extra_spec}",
        moto.url
    )
}

/// Applies an EtcdSnapshot and waits for it to be Complete: (seconds, the snapshot).
pub async fn snapshot_to_complete(
    cluster: &Cluster,
    api: &Api<EtcdSnapshot>,
    name: &str,
    manifest: &str,
) -> (f64, EtcdSnapshot) {
    let started = Instant::now();
    tokio::task::block_in_place(|| cluster.apply(manifest));
    let snapshot = eventually(&format!("{name} Complete"), LIMIT, || async {
        let s = api.get(name).await.map_err(|e| e.to_string())?;
        let phase = s
            .status
            .as_ref()
            .and_then(|s| s.phase)
            .map(|p| format!("{p:?}"));
        match phase.as_deref() {
            Some("Complete") => Ok(s),
            Some("Failed") => panic!("{name} failed: {:?}", s.status),
            _ => Err(format!("{phase:?}")),
        }
    })
    .await;
    (started.elapsed().as_secs_f64(), snapshot)
}
