//! The TLS benchmark (prints figures; not a timed test). Needs root, like the e2e tests.
//!
//!   cargo bench -p etcd-operator --bench tls
//!   TLS_BENCH_RUNS=3 TLS_BENCH_ROTATIONS=2 cargo bench -p etcd-operator --bench tls
//!
//! In one sandbox with the operator deployed from `deploy/`, etcd 3.5.1, rounds of:
//! 1. the floor: `FLOOR_TLS=1 benches/floor.sh 3` (the same etcd binaries on loopback with mutual
//!    TLS on both ports, certificates made by openssl before the clock starts, joined one at a
//!    time as learners, no Kubernetes);
//! 2. the operator, user Secrets: a 3-member cluster with mutual TLS on both ports from Secrets
//!    made by openssl before the clock starts, from `kubectl apply`-equivalent creation to
//!    Available;
//! 3. the operator, operator-issued certificates: the same with `operatorIssued` on both
//!    sides (the CA and every certificate made by the operator inside the measured time).
//!
//! Then `TLS_BENCH_ROTATIONS` CA rotations of an operator-issued 3-member cluster on request
//! (the `rotate-ca` annotation) with the client workload running over TLS and following the CA
//! Secret: the time from the annotation until the old CA is dropped and every member is Ready
//! on restarted Pods, and the workload's longest unavailability and failed requests.

#[path = "common/mod.rs"]
mod bench_support;
use etcd_operator_e2e_support as support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::PostParams;

use bench_support::env_or;
use support::certs::{make_ca, make_leaf, member_sans, secret_data, verifies};
use support::cluster::{Cluster, start_cluster};
use support::workload::{Secure, Workload};
use support::{condition, create_namespace, get_cluster};

const CONVERGE_LIMIT: Duration = Duration::from_secs(300);

/// Time until `namespace/etcd` is Available with `replicas` Ready members and not Progressing.
async fn available(cluster: &Cluster, namespace: &str, replicas: i32, since: Instant) -> f64 {
    let client = cluster.client();
    loop {
        let c = get_cluster(&client, namespace, "etcd").await;
        if c.status.as_ref().and_then(|s| s.ready_members) == Some(replicas)
            && condition(&c, "Available").as_deref() == Some("True")
            && condition(&c, "Progressing").as_deref() == Some("False")
        {
            return since.elapsed().as_secs_f64();
        }
        assert!(
            since.elapsed() < CONVERGE_LIMIT,
            "{namespace} did not converge: {:?}",
            c.status
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn tls_secret(name: &str, dir: &std::path::Path, leaf: &str) -> Secret {
    let read = |f: String| k8s_openapi::ByteString(std::fs::read(dir.join(f)).unwrap());
    Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        type_: Some("kubernetes.io/tls".to_string()),
        data: Some(
            [
                ("tls.crt".to_string(), read(format!("{leaf}.crt"))),
                ("tls.key".to_string(), read(format!("{leaf}.key"))),
                ("ca.crt".to_string(), read("ca.crt".to_string())),
            ]
            .into(),
        ),
        ..Default::default()
    }
}

/// A 3-member cluster with mutual TLS on both ports from user Secrets (made before the clock
/// starts); seconds from creating the EtcdCluster to Available.
async fn user_secrets(cluster: &Cluster, namespace: &str) -> f64 {
    create_namespace(&cluster.client(), namespace).await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    make_ca(d, "ca");
    let sans = member_sans(namespace);
    make_leaf(
        d,
        "ca",
        "server",
        "etcd",
        Some(&sans),
        "serverAuth,clientAuth",
    );
    make_leaf(
        d,
        "ca",
        "peer",
        "etcd",
        Some(&sans),
        "serverAuth,clientAuth",
    );
    make_leaf(d, "ca", "client", "root", None, "clientAuth");
    let secrets: Api<Secret> = Api::namespaced(cluster.client(), namespace);
    for (name, leaf) in [
        ("etcd-server", "server"),
        ("etcd-peer", "peer"),
        ("etcd-operator-client", "client"),
    ] {
        secrets
            .create(&PostParams::default(), &tls_secret(name, d, leaf))
            .await
            .unwrap();
    }
    let started = Instant::now();
    tokio::task::block_in_place(|| {
        cluster.apply(&format!(
            "apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdCluster\nmetadata:\n  name: etcd\n  namespace: {namespace}\nspec:\n  replicas: 3\n  version: \"3.5.1\"\n  tls:\n    client:\n      serverSecretRef:\n        name: etcd-server\n      operatorClientSecretRef:\n        name: etcd-operator-client\n    peer:\n      secretRef:\n        name: etcd-peer\n"
        ))
    });
    available(cluster, namespace, 3, started).await
}

fn issued_yaml(namespace: &str) -> String {
    format!(
        "apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdCluster\nmetadata:\n  name: etcd\n  namespace: {namespace}\nspec:\n  replicas: 3\n  version: \"3.5.1\"\n  tls:\n    client:\n      operatorIssued: {{}}\n    peer:\n      operatorIssued: {{}}\n"
    )
}

/// A 3-member cluster with operator-issued certificates; seconds from creating it to Available.
async fn operator_issued(cluster: &Cluster, namespace: &str) -> f64 {
    create_namespace(&cluster.client(), namespace).await;
    let started = Instant::now();
    tokio::task::block_in_place(|| cluster.apply(&issued_yaml(namespace)));
    available(cluster, namespace, 3, started).await
}

/// One CA rotation of the operator-issued cluster in `namespace` with the workload running:
/// (seconds, longest unavailability, failed requests, acknowledged writes).
async fn rotation(
    cluster: &Arc<Cluster>,
    namespace: &'static str,
    token: &str,
) -> (f64, Duration, usize, usize) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_path_buf();
    let (_, ca) = secret_data(cluster, namespace, "etcd-ca").expect("the CA Secret");
    std::fs::write(d.join("ca.crt"), &ca["tls.crt"]).unwrap();
    std::fs::write(d.join("ca.key"), &ca["tls.key"]).unwrap();
    make_leaf(&d, "ca", "client", "root", None, "clientAuth");
    let shared = Arc::new(std::sync::Mutex::new(Secure {
        ca_pem: ca["ca.crt"].clone(),
        identity: Some((
            std::fs::read(d.join("client.crt")).unwrap(),
            std::fs::read(d.join("client.key")).unwrap(),
        )),
        credentials: None,
    }));
    let workload = Workload::start_shared(
        cluster.network.clone(),
        namespace,
        "etcd",
        token,
        Some(shared.clone()),
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let pods = |cluster: Arc<Cluster>| async move {
        let mut uids = Vec::new();
        for m in ["etcd-0", "etcd-1", "etcd-2"] {
            uids.push(
                cluster
                    .member_pod(namespace, m)
                    .await
                    .and_then(|p| p.metadata.uid),
            );
        }
        uids
    };
    let before = pods(cluster.clone()).await;
    let stop = tokio_util::sync::CancellationToken::new();
    let follower = tokio::spawn(support::certs::follow_ca_secret(
        cluster.clone(),
        namespace,
        shared,
        d.clone(),
        ca["tls.crt"].clone(),
        stop.clone(),
    ));
    let started = Instant::now();
    let (ok, _, stderr) = tokio::task::block_in_place(|| {
        support::kubectl(
            cluster,
            &[
                "-n",
                namespace,
                "annotate",
                "--overwrite",
                "etcdcluster",
                "etcd",
                &format!("etcd-operator.cozystack.io/rotate-ca={token}"),
            ],
        )
    });
    assert!(ok, "{stderr}");
    loop {
        assert!(
            started.elapsed() < CONVERGE_LIMIT * 2,
            "{namespace}: the rotation did not finish"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        let Some((_, now)) = secret_data(cluster, namespace, "etcd-ca") else {
            continue;
        };
        if now["tls.crt"] == ca["tls.crt"] || now.contains_key("previous.crt") {
            continue;
        }
        let leaves_new = ["etcd-0", "etcd-1", "etcd-2"].iter().all(|m| {
            secret_data(cluster, namespace, &format!("{m}-tls")).is_some_and(|(_, s)| {
                s["ca.crt"] == now["tls.crt"] && verifies(&s["tls.crt"], &now["tls.crt"], &d)
            })
        });
        let restarted = pods(cluster.clone())
            .await
            .iter()
            .zip(&before)
            .all(|(a, b)| a != b);
        let c = get_cluster(&cluster.client(), namespace, "etcd").await;
        if leaves_new
            && restarted
            && c.status.as_ref().and_then(|s| s.ready_members) == Some(3)
            && condition(&c, "Available").as_deref() == Some("True")
        {
            break;
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    stop.cancel();
    follower.await.unwrap();
    let report = workload.stop().await;
    report.assert_no_loss();
    (
        seconds,
        report.longest_unavailable,
        report.failed,
        report.acknowledged,
    )
}

fn summary(samples: &[f64]) -> String {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let median = if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    };
    format!("{:.2} / {median:.2} / {:.2}", sorted[0], sorted[n - 1])
}

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let runs = env_or("TLS_BENCH_RUNS", 5);
    let rotations = env_or("TLS_BENCH_ROTATIONS", 3);
    println!("# TLS benchmark (etcd 3.5.1; {runs} rounds, {rotations} CA rotations)");
    let cluster = Arc::new(start_cluster(3).await);
    cluster.deploy_operator(1).await;
    let (mut floor, mut user, mut issued) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..runs {
        let f = support::floor_script_with("floor.sh", &["3"], &[("FLOOR_TLS", "1")])
            .into_iter()
            .find(|(what, _)| what == "bootstrap 3")
            .map(|(_, s)| s)
            .expect("the floor prints its bootstrap");
        floor.push(f);
        let u = user_secrets(&cluster, &format!("tls-user-{round}")).await;
        user.push(u);
        let i = operator_issued(&cluster, &format!("tls-issued-{round}")).await;
        issued.push(i);
        println!(
            "round {}/{runs}: floor {f:.2} s, user Secrets {u:.2} s, operator-issued {i:.2} s",
            round + 1
        );
    }
    if runs > 0 {
        println!();
        println!("| bootstrap 3, mutual TLS on both ports | min / median / max (s) |");
        println!("| --- | --- |");
        println!("| floor (`FLOOR_TLS=1 floor.sh 3`) | {} |", summary(&floor));
        println!("| operator, user Secrets | {} |", summary(&user));
        println!("| operator, operator-issued | {} |", summary(&issued));
    }
    if rotations > 0 {
        let namespace = "tls-rotate";
        let _ = operator_issued(&cluster, namespace).await;
        let mut lines = Vec::new();
        for r in 0..rotations {
            let (seconds, gap, failed, acknowledged) =
                rotation(&cluster, namespace, &format!("r{r}")).await;
            println!(
                "rotation {}/{rotations}: {seconds:.1} s, longest unavailability {} ms, {failed} failed requests of {acknowledged} acknowledged writes",
                r + 1,
                gap.as_millis()
            );
            lines.push((seconds, gap.as_secs_f64() * 1000.0, failed as f64));
        }
        println!();
        println!("| CA rotation of 3 members (two restarts each) | min / median / max |");
        println!("| --- | --- |");
        println!(
            "| total (s) | {} |",
            summary(&lines.iter().map(|l| l.0).collect::<Vec<_>>())
        );
        println!(
            "| client's longest unavailability (ms) | {} |",
            summary(&lines.iter().map(|l| l.1).collect::<Vec<_>>())
        );
        println!(
            "| client's failed requests | {} |",
            summary(&lines.iter().map(|l| l.2).collect::<Vec<_>>())
        );
    }
}
