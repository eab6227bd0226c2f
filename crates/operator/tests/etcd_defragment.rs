//! `EtcdClient::defragment` against real etcd 3.4.23 and 3.5.1: overwritten keys compacted
//! away leave free pages, the call shrinks the backend to about its live data, and a member
//! that is not there is an `Unreachable` error, not a hang.

mod etcd_harness;

use etcd_client::CompactionOptions;
use std::time::Duration;

use etcd_harness::{EtcdVersion, client_for, eventually, start_cluster, wait_healthy};
use etcd_operator::etcd::{EtcdClient, EtcdErrorKind, Timeouts};

async fn defragment_reclaims_compacted_space(version: EtcdVersion) {
    let members = start_cluster(version, 1, &[]);
    let refs: Vec<_> = members.iter().collect();
    wait_healthy(&refs).await;
    let endpoint = members[0].client_url();
    let mut raw = etcd_client::Client::connect([endpoint.clone()], None)
        .await
        .expect("raw client");
    let value = vec![b'x'; 16 * 1024];
    let mut revision = 0;
    for i in 0..500 {
        let put = raw.put(format!("k{}", i % 5), value.clone(), None).await;
        revision = put.expect("put").header().unwrap().revision();
    }
    raw.compact(revision, Some(CompactionOptions::new().with_physical()))
        .await
        .expect("compact");

    let client = client_for(&refs).await;
    // bbolt hands the pages the compaction freed back to its freelist only at a later write
    // transaction, so dbSizeInUse drops after a few more writes.
    let before = eventually(
        "about 8 MiB compacted away to be free",
        Duration::from_secs(10),
        || {
            let (client, endpoint, mut raw) = (&client, &endpoint, raw.clone());
            async move {
                raw.put("tick", "t", None).await.expect("put");
                let status = client.endpoint_status(endpoint).await.expect("status");
                (status.db_size - status.db_size_in_use > 4 << 20).then_some(status)
            }
        },
    )
    .await;
    client.defragment(&endpoint).await.expect("defragment");
    let after = client.endpoint_status(&endpoint).await.expect("status");
    eprintln!(
        "{version:?}: {} → {} bytes (in use {})",
        before.db_size, after.db_size, after.db_size_in_use
    );
    assert!(after.db_size < before.db_size / 4, "{before:?} → {after:?}");
    // The data is all there.
    let got = raw.get("k3", None).await.expect("get");
    assert_eq!(got.kvs()[0].value(), &value[..]);
}

#[tokio::test]
async fn defragment_reclaims_compacted_space_v3_5() {
    defragment_reclaims_compacted_space(EtcdVersion::V3_5).await;
}

#[tokio::test]
async fn defragment_reclaims_compacted_space_v3_4() {
    defragment_reclaims_compacted_space(EtcdVersion::V3_4).await;
}

#[tokio::test]
async fn defragment_of_a_member_that_is_not_there_is_unreachable() {
    // Port 1 on loopback: nothing listens, the connection is refused at once.
    let endpoint = "http://127.0.0.1:1";
    let client = EtcdClient::connect([endpoint], Timeouts::OBSERVE, &Default::default())
        .await
        .expect("connecting is lazy");
    let error = client
        .defragment(endpoint)
        .await
        .expect_err("nothing listens");
    assert_eq!(error.kind, EtcdErrorKind::Unreachable, "{error}");
    assert_eq!(error.call, "Connect", "{error}");
}
