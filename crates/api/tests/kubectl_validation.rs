//! The authority on the validation cases of `tests/validation/*.yaml`: the sandbox API server,
//! with our CRDs installed from `deploy/crds/` by `kubectl apply`, driven by the real kubectl.
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

use kubectl_replay::Replay;

/// kubectl calls at once: enough to overlap kubectl's start-up with the server's work on the
/// two cores the tests share.
const WORKERS: usize = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_case_gets_the_expected_answer_through_kubectl() {
    let started = Instant::now();
    let crds = etcd_operator_api::crds();
    let replay = Arc::new(Replay::start(&crds).await);
    let mut cases = harness::cases();
    cases.push(harness::reference_sample());
    let count = cases.len();
    let failures = replay.replay_all(cases, WORKERS).await;
    eprintln!(
        "replayed {count} cases through kubectl in {:.1?} ({WORKERS} at once)",
        started.elapsed()
    );
    assert!(
        failures.is_empty(),
        "{} of {count} cases failed through kubectl:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}
