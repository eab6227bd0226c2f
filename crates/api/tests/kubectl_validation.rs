//! The authority on the validation cases of `tests/validation/*.yaml`: a real kube-apiserver
//! (Kubernetes v1.37.2, built by `scripts/install-deps.sh`) and kube-sandbox's own API server,
//! each with our CRDs installed from `deploy/crds/` by `kubectl apply` (no warning), driven by
//! the real kubectl. Both must give every case the verdict and the message it expects; where
//! the two servers worded an error differently, the real one's words are the expectation.
//!
//! Every case is replayed as a user would send it (`kubectl create`, then `kubectl replace` for
//! an update; see `kubectl_replay/plan.rs`). An accepted case must be stored; a rejected one
//! must fail with kubectl printing the expected text and leave the object as it was (or
//! absent). `sandbox_validation.rs` runs the same cases through the same schema engine as a
//! library, faster, with the checks that need each error as a value.

mod harness;
mod kubectl_replay;

use std::sync::Arc;
use std::time::Instant;

use kube_sandbox::ControlPlane;
use kube_sandbox::kubernetes::{
    KUBERNETES_VERSION, KubernetesOptions, PREVIOUS_KUBERNETES_VERSION,
};
use kubectl_replay::Replay;

/// kubectl calls at once: enough to overlap kubectl's start-up with the server's work on the
/// two cores the tests share.
const WORKERS: usize = 4;

async fn replay_every_case(control_plane: ControlPlane, name: &str) -> Replay {
    let started = Instant::now();
    let crds = etcd_operator_api::crds();
    let replay = Arc::new(Replay::start(&crds, control_plane).await);
    let mut cases = harness::cases();
    cases.push(harness::reference_sample());
    let count = cases.len();
    let failures = replay.replay_all(cases, WORKERS).await;
    eprintln!(
        "{name}: replayed {count} cases through kubectl in {:.1?} ({WORKERS} at once)",
        started.elapsed()
    );
    assert!(
        failures.is_empty(),
        "{name}: {} of {count} cases failed through kubectl:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    Arc::into_inner(replay).expect("the replay is no longer shared")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_case_gets_the_expected_answer_through_kubectl() {
    replay_every_case(ControlPlane::Sandbox, "kube-sandbox").await;
}

/// On the real API server, beside the verdicts: our CEL rules compiled within its cost budget
/// (the CRDs were accepted), the printer columns, the `/scale` subresource and `kubectl
/// explain` work.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_case_gets_the_expected_answer_on_a_real_api_server() {
    real_api_server(KubernetesOptions::default(), KUBERNETES_VERSION).await;
}

/// The same on the release before.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_case_gets_the_expected_answer_on_the_previous_kubernetes_release() {
    real_api_server(
        KubernetesOptions::release(PREVIOUS_KUBERNETES_VERSION),
        PREVIOUS_KUBERNETES_VERSION,
    )
    .await;
}

async fn real_api_server(options: KubernetesOptions, version: &str) {
    let replay = replay_every_case(
        ControlPlane::Kubernetes(options),
        &format!("kube-apiserver v{version}"),
    )
    .await;
    let kubectl = replay.kubectl();
    let sample = std::fs::read_to_string(harness::reference_sample_path()).unwrap();
    kubectl
        .run(&["create", "namespace", "columns"], None)
        .await
        .expect_success("a namespace");
    kubectl
        .run(&["-n", "columns", "create", "-f", "-"], Some(&sample))
        .await
        .expect_success("the reference sample");
    let listed = kubectl
        .run(&["-n", "columns", "get", "etcdclusters"], None)
        .await
        .expect_success("kubectl get etcdclusters");
    let header = listed.lines().next().unwrap_or_default().to_string();
    let crd = etcd_operator_api::crds()
        .into_iter()
        .find(|crd| crd.spec.names.kind == "EtcdCluster")
        .unwrap();
    for column in crd.spec.versions[0]
        .additional_printer_columns
        .iter()
        .flatten()
        .filter(|c| c.priority.unwrap_or(0) == 0)
    {
        assert!(
            header.contains(&column.name.to_uppercase()),
            "the column {} in {header:?}",
            column.name
        );
    }
    let name = sample_name(&sample);
    kubectl
        .run(
            &[
                "-n",
                "columns",
                "scale",
                &format!("etcdcluster/{name}"),
                "--replicas=5",
            ],
            None,
        )
        .await
        .expect_success("kubectl scale through /scale");
    let replicas = kubectl
        .run(
            &[
                "-n",
                "columns",
                "get",
                &format!("etcdcluster/{name}"),
                "-o",
                "jsonpath={.spec.replicas}",
            ],
            None,
        )
        .await
        .expect_success("reading the replicas");
    assert_eq!(replicas.trim(), "5");
    let explained = kubectl
        .run(&["explain", "etcdcluster.spec.replicas"], None)
        .await
        .expect_success("kubectl explain");
    assert!(explained.contains("FIELD: replicas"), "{explained}");
}

fn sample_name(yaml: &str) -> String {
    let value: serde_json::Value = serde_yaml::from_str(yaml).expect("the sample parses");
    value["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}
