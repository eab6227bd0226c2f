//! The revision and key count read from a snapshot's own pages (`snapshot::revision::
//! SnapshotScan`) against real etcd: they equal what `etcdutl snapshot status` (etcdctl for 3.4)
//! reads from the saved file (its revision and TOTAL KEYS), with writes, overwrites, deletes and
//! a compaction behind it, on a database of many pages, and while a writer keeps writing during
//! the snapshot (where asking etcd for its revision before the stream is off, and where the
//! first version of the scan, which took the highest revision on any page, said 3643 for 3642:
//! a free page reused during the copy).

mod etcd_harness;
use etcd_operator_e2e_support::snapshot_tool;

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use etcd_harness::{EtcdVersion, start_cluster, wait_healthy};
use etcd_operator::etcd::{EtcdClient, Timeouts};
use etcd_operator::snapshot::revision::{Scanned, SnapshotScan};

/// `snapshot status` of a saved file, as etcd's own tool reads it: (revision, total keys).
fn status_of(version: EtcdVersion, file: &Path) -> Scanned {
    let json = snapshot_tool::snapshot_status(version.reported(), file);
    Scanned {
        revision: json["revision"].as_i64().expect("a revision"),
        total_keys: json["totalKey"].as_u64().expect("a key count"),
    }
}

/// Takes a snapshot through the operator's client, scanning it and saving it to `file`.
async fn snapshot_to(client: &EtcdClient, file: &Path) -> Option<Scanned> {
    let mut stream = client.snapshot().await.expect("snapshot");
    let mut scan = SnapshotScan::default();
    let mut out = std::fs::File::create(file).expect("file");
    while let Some(chunk) = stream.next_chunk().await.expect("chunk") {
        scan.update(&chunk);
        out.write_all(&chunk).expect("write");
    }
    scan.finish()
}

async fn scenario(version: EtcdVersion) {
    let members = start_cluster(version, 1, &[]);
    wait_healthy(&members.iter().collect::<Vec<_>>()).await;
    let url = members[0].client_url();
    let mut kv = etcd_client::Client::connect([url.as_str()], None)
        .await
        .expect("client");
    let dir = tempfile::tempdir().expect("tempdir");

    // Many pages: 3000 keys of 1 KiB, some overwritten, some deleted, a compaction.
    let value = vec![b'v'; 1024];
    for i in 0..3000 {
        kv.put(format!("/k/{i:05}"), value.clone(), None)
            .await
            .expect("put");
    }
    for i in 0..500 {
        kv.put(format!("/k/{i:05}"), b"again".to_vec(), None)
            .await
            .expect("put");
    }
    let compacted = kv.get("/k/00000", None).await.expect("get");
    let compact_at = compacted.header().expect("header").revision();
    kv.compact(compact_at, None).await.expect("compact");
    for i in 1000..1100 {
        kv.delete(format!("/k/{i:05}"), None).await.expect("delete");
    }
    // The last write is a delete: the head revision is a tombstone.
    let last = kv.delete("/k/02999", None).await.expect("delete");
    let head = last.header().expect("header").revision();

    let client = EtcdClient::connect_endpoint(&url, Timeouts::SNAPSHOT, &Default::default())
        .await
        .expect("snapshot client");
    let file = dir.path().join("quiet.db");
    let scanned = snapshot_to(&client, &file)
        .await
        .expect("the pages are read");
    assert_eq!(scanned.revision, head, "{version:?}: the head revision");
    assert_eq!(scanned, status_of(version, &file), "{version:?}");
    assert!(
        scanned.total_keys > 3000,
        "{version:?}: every revision of every key and etcd's records: {scanned:?}"
    );

    // A writer keeps writing while snapshots stream: each snapshot's scan equals what etcd's
    // tool reads from that same file, whatever was written around it.
    let writing = Arc::new(AtomicBool::new(true));
    let writer = {
        let writing = writing.clone();
        let mut kv = kv.clone();
        tokio::spawn(async move {
            let mut n = 0u64;
            while writing.load(Ordering::Relaxed) {
                let _ = kv
                    .put(format!("/w/{}", n % 200), vec![b'w'; 512], None)
                    .await;
                n += 1;
            }
            n
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut later = Vec::new();
    for round in 0..5 {
        let file = dir.path().join(format!("busy-{round}.db"));
        let scanned = snapshot_to(&client, &file).await;
        let status = status_of(version, &file);
        assert_eq!(scanned, Some(status), "{version:?}, round {round}");
        later.push(status.revision);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    writing.store(false, Ordering::Relaxed);
    let writes = writer.await.expect("writer");
    assert!(writes > 0, "the writer wrote");
    assert!(
        later.windows(2).all(|w| w[0] <= w[1]) && later[0] > head,
        "revisions move on under writes: {later:?} after {head}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revision_read_from_the_pages_equals_snapshot_status_3_5() {
    scenario(EtcdVersion::V3_5).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revision_read_from_the_pages_equals_snapshot_status_3_4() {
    scenario(EtcdVersion::V3_4).await;
}
