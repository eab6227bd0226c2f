//! Leader election over the Lease, against a sandbox API server, as the operator's service
//! account under the Role of `deploy/rbac/leader_election.yaml`: one leader at a time; the
//! holder keeps it while it renews; a released Lease is taken over at the next retry; a holder
//! that died is replaced once its Lease expires; a holder that finds another holder steps down.

use etcd_operator_e2e_support as support;

use std::time::{Duration, Instant};

use etcd_operator::leader::{Attempt, HoldEnd, LeaderElector, LeaseConfig};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use support::{operator_identity, start_sandbox};
use tokio_util::sync::CancellationToken;

const NS: &str = "etcd-operator-system";
const LEASE: &str = "etcd-operator-leader";

fn elector(client: &Client, identity: &str) -> LeaderElector {
    LeaderElector::new(
        client.clone(),
        LeaseConfig {
            lease_duration: Duration::from_secs(3),
            renew_deadline: Duration::from_secs(2),
            retry_period: Duration::from_millis(300),
            ..LeaseConfig::new(NS, LEASE, identity)
        },
    )
}

async fn holder(client: &Client) -> Option<String> {
    Api::<Lease>::namespaced(client.clone(), NS)
        .get(LEASE)
        .await
        .unwrap()
        .spec
        .and_then(|s| s.holder_identity)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2e_lease_one_leader_release_expiry_and_step_down() {
    let sandbox = start_sandbox(0).await;
    let client = operator_identity(&sandbox).await;

    // One leader at a time.
    let mut a = elector(&client, "a");
    let mut b = elector(&client, "b");
    assert_eq!(a.try_acquire_or_renew().await.unwrap(), Attempt::Leading);
    assert_eq!(b.try_acquire_or_renew().await.unwrap(), Attempt::Following);

    // The holder keeps it while it renews, well past the lease duration.
    let stop_a = CancellationToken::new();
    let holding = tokio::spawn({
        let stop_a = stop_a.clone();
        async move {
            let end = a.hold(&stop_a).await;
            (a, end)
        }
    });
    let never = CancellationToken::new();
    let waited = tokio::time::timeout(Duration::from_secs(5), b.acquire(&never)).await;
    assert!(waited.is_err(), "b must not lead while a renews");
    assert_eq!(holder(&client).await.as_deref(), Some("a"));

    // Released on shutdown: b takes over at its next retry, without waiting for expiry.
    stop_a.cancel();
    let (mut a, end) = holding.await.unwrap();
    assert_eq!(end, HoldEnd::Shutdown);
    a.release().await.unwrap();
    let released = Instant::now();
    assert!(b.acquire(&never).await);
    assert!(
        released.elapsed() < Duration::from_secs(2),
        "{:?}",
        released.elapsed()
    );
    assert_eq!(holder(&client).await.as_deref(), Some("b"));

    // b dies without releasing: c takes over only once the Lease expired.
    drop(b);
    let died = Instant::now();
    let mut c = elector(&client, "c");
    assert!(c.acquire(&never).await);
    let waited = died.elapsed();
    assert!(
        waited >= Duration::from_secs(3) && waited < Duration::from_secs(8),
        "took over after {waited:?}"
    );
    assert_eq!(holder(&client).await.as_deref(), Some("c"));

    // Someone else writes the Lease: c steps down at its next renewal.
    let api: Api<Lease> = Api::namespaced(sandbox.client(), NS);
    api.patch(
        LEASE,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"spec": {"holderIdentity": "intruder"}})),
    )
    .await
    .unwrap();
    let end = tokio::time::timeout(Duration::from_secs(5), c.hold(&never))
        .await
        .expect("c notices within a few retries");
    assert_eq!(end, HoldEnd::Lost);
}
