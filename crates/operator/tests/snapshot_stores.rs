//! The snapshot store layer (`snapshot::store`) and the restore agent's download
//! (`snapshot::restore::fetch`) against real emulators on the loopback: fake-gcs-server for
//! GCS, Azurite for Azure Blob Storage, and a directory for the local store. Each object the
//! layer writes is read back with a plain client of that store (`support/stores_client.py`).
//!
//! Per store: a 12 MiB streaming upload in 5 MiB parts, its size, SHA-256 and writer metadata
//! as the plain client reads them, the overwrite guard's view of an object this snapshot wrote
//! and of one another wrote, an aborted upload that leaves no object, a delete, a download of
//! a real snapshot file (etcd's trailing hash checked), of a file that is not a snapshot and of
//! a missing one; and the bad inputs each store can show: a missing bucket or container, an
//! unreachable endpoint, wrong or malformed credentials. The end-to-end path (the operator,
//! etcd, restores) is `e2e_snapshot_stores.rs`.

use etcd_operator_e2e_support as support;

use std::path::Path;

use etcd_operator::snapshot::decide::Existing;
use etcd_operator::snapshot::restore::{FetchArgs, fetch};
use etcd_operator::snapshot::store::{self, SnapshotStore, StoreCredentials, StoreSettings};
use etcd_operator_api::shared::{
    AzureSnapshotLocation, GcsSnapshotLocation, LocalSnapshotLocation, SnapshotLocation,
};
use k8s_openapi::api::core::v1::LocalObjectReference;
use support::stores::{Azurite, FakeGcs, Place, free_port, service_account_key};

const UID: &str = "5f1c0e4a-0000-4000-8000-000000000001";
const MIB: usize = 1024 * 1024;

fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

/// Deterministic bytes, different per `seed`.
fn bytes(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_mul(2654435761).wrapping_add(seed) >> 13) as u8)
        .collect()
}

fn sha256_hex(data: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, data)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Something shaped like an etcd snapshot: the data, then the SHA-256 of the data.
fn snapshot_file(len: usize) -> Vec<u8> {
    let mut data = bytes(len, 7);
    let trailer = ring::digest::digest(&ring::digest::SHA256, &data);
    data.extend_from_slice(trailer.as_ref());
    data
}

/// Streams `data` through the layer's upload, as the controller does (two parts in flight).
async fn upload(store: &SnapshotStore, key: &object_store::path::Path, data: &[u8]) {
    let mut writer = store::start_upload(store, key, UID, "tests/nightly")
        .await
        .expect("the upload starts");
    for chunk in data.chunks(MIB / 2 + 17) {
        writer
            .wait_for_capacity(store::PARTS_IN_FLIGHT)
            .await
            .expect("a part is stored");
        writer.write(chunk);
    }
    writer.finish().await.expect("the upload completes");
}

/// What every store must do, checked through the layer and through `plain` (the plain
/// client's head: size, sha256, metadata; `None` for no such object). `put_file` uploads a
/// file with the plain client, `metadata_key` is where the writer's uid is.
async fn exercise(
    location: &SnapshotLocation,
    credentials: &StoreCredentials,
    settings: &StoreSettings,
    plain: &(dyn Fn(&str) -> Option<serde_json::Value> + Sync),
    put_file: &(dyn Fn(&str, &Path) + Sync),
    metadata_key: Option<&str>,
) {
    let store = store::open(location, credentials, settings).expect("the store opens");
    let target = store::target(location, "nightly").unwrap();
    assert_eq!(
        store::existing(&store, &target.path).await.unwrap(),
        Existing::Absent
    );

    // 12 MiB and a bit: three parts.
    let data = bytes(12 * MIB + 4321, 1);
    upload(&store, &target.path, &data).await;
    let (size, sha) = store::read_back(&store, &target.path).await.unwrap();
    assert_eq!(
        (size, sha.as_str()),
        (data.len() as u64, sha256_hex(&data).as_str())
    );
    let held = blocking(|| plain(&target.key)).expect("the plain client finds the object");
    assert_eq!(held["size"].as_u64(), Some(data.len() as u64), "{held}");
    assert_eq!(held["sha256"].as_str(), Some(sha256_hex(&data).as_str()));
    if let Some(key) = metadata_key {
        assert_eq!(held["metadata"][key].as_str(), Some(UID), "{held}");
    }
    assert_eq!(
        store::existing(&store, &target.path).await.unwrap(),
        Existing::Present {
            writer: Some(UID.to_string())
        },
        "the guard reads who wrote it"
    );

    // An upload given up after a part went out leaves nothing that looks like an object.
    let aborted = store::target(location, "aborted").unwrap();
    let mut writer = store::start_upload(&store, &aborted.path, UID, "tests/aborted")
        .await
        .unwrap();
    writer.write(&bytes(6 * MIB, 2));
    writer.wait_for_capacity(0).await.unwrap();
    writer.abort().await.unwrap();
    assert!(
        blocking(|| plain(&aborted.key)).is_none(),
        "an aborted upload left {}",
        aborted.key
    );
    assert_eq!(
        store::existing(&store, &aborted.path).await.unwrap(),
        Existing::Absent
    );

    // A download for a restore: a snapshot, a file that is not one, a missing object.
    let dir = tempfile::tempdir().unwrap();
    let snapshot = snapshot_file(3 * MIB);
    let file = dir.path().join("snapshot.db");
    std::fs::write(&file, &snapshot).unwrap();
    let restore_key = format!("{}restore/snapshot.db", prefix_of(&target.key));
    blocking(|| put_file(&restore_key, &file));
    let exact = |key: &str| exact_location(location, key);
    let work = dir.path().join("work");
    let fetched = fetch(&FetchArgs {
        work_dir: work.clone(),
        location: exact(&restore_key),
        credentials: Ok(credentials.clone()),
        identity: None,
    })
    .await
    .expect("the snapshot downloads");
    assert_eq!(fetched, (snapshot.len() as u64, sha256_hex(&snapshot)));
    assert_eq!(std::fs::read(work.join("snapshot.db")).unwrap(), snapshot);
    // The same snapshot compressed (zstd) and encrypted (age), as an EtcdSnapshot with both
    // stores it: decoded on the way down with the identity, refused without it.
    let identity = age::x25519::Identity::generate();
    let mut encoder = etcd_operator::snapshot::codec::Encoder::new(
        etcd_operator_api::snapshot::SnapshotCompression::Zstd,
        &[identity.to_public()],
    )
    .unwrap();
    let mut encoded = Vec::new();
    for chunk in snapshot.chunks(MIB) {
        encoded.extend_from_slice(encoder.push(chunk).unwrap());
    }
    encoded.extend(encoder.finish().unwrap().0);
    assert_ne!(encoded, snapshot);
    let encoded_file = dir.path().join("snapshot.db.zst.age");
    std::fs::write(&encoded_file, &encoded).unwrap();
    let encoded_key = format!("{}restore/encoded.db", prefix_of(&target.key));
    blocking(|| put_file(&encoded_key, &encoded_file));
    {
        use age::secrecy::ExposeSecret;
        let decoded = fetch(&FetchArgs {
            work_dir: work.clone(),
            location: exact(&encoded_key),
            credentials: Ok(credentials.clone()),
            identity: Some(identity.to_string().expose_secret().to_string()),
        })
        .await
        .expect("the encoded snapshot downloads and decodes");
        assert_eq!(decoded, (snapshot.len() as u64, sha256_hex(&snapshot)));
        assert_eq!(std::fs::read(work.join("snapshot.db")).unwrap(), snapshot);
    }
    let without = fetch(&FetchArgs {
        work_dir: work.clone(),
        location: exact(&encoded_key),
        credentials: Ok(credentials.clone()),
        identity: None,
    })
    .await
    .unwrap_err();
    assert_eq!(without.reason, "EncryptedSnapshot", "{without:?}");
    let not_a_snapshot = fetch(&FetchArgs {
        work_dir: work.clone(),
        location: exact(&target.key),
        credentials: Ok(credentials.clone()),
        identity: None,
    })
    .await
    .unwrap_err();
    assert_eq!(not_a_snapshot.reason, "NotASnapshot", "{not_a_snapshot:?}");
    let missing = fetch(&FetchArgs {
        work_dir: work.clone(),
        location: exact("nowhere/gone.db"),
        credentials: Ok(credentials.clone()),
        identity: None,
    })
    .await
    .unwrap_err();
    assert_eq!(missing.reason, "SnapshotNotFound", "{missing:?}");
    assert!(missing.message.contains("gone.db"), "{}", missing.message);

    // Delete: gone for the plain client too, and deleting again is not an error.
    store::delete(&store, &target.path).await.unwrap();
    assert!(blocking(|| plain(&target.key)).is_none());
    store::delete(&store, &target.path).await.unwrap();
    assert_eq!(
        store::existing(&store, &target.path).await.unwrap(),
        Existing::Absent
    );
}

fn prefix_of(key: &str) -> String {
    match key.rsplit_once('/') {
        Some((prefix, _)) => format!("{prefix}/"),
        None => String::new(),
    }
}

/// `location` as a restore source naming `key` exactly.
fn exact_location(location: &SnapshotLocation, key: &str) -> SnapshotLocation {
    let mut exact = location.clone();
    if let Some(gcs) = exact.gcs.as_mut() {
        gcs.key = Some(key.to_string());
    }
    if let Some(azure) = exact.azure.as_mut() {
        azure.key = Some(key.to_string());
    }
    exact
}

fn gcs_location(endpoint: &str, bucket: &str) -> SnapshotLocation {
    SnapshotLocation {
        gcs: Some(GcsSnapshotLocation {
            bucket: bucket.into(),
            key: Some("prod/etcd".into()),
            endpoint: Some(endpoint.into()),
            credentials_secret_ref: LocalObjectReference {
                name: "gcs-key".into(),
            },
        }),
        ..Default::default()
    }
}

fn azure_location(endpoint: &str, container: &str) -> SnapshotLocation {
    SnapshotLocation {
        azure: Some(AzureSnapshotLocation {
            account: support::stores::AZURITE_ACCOUNT.into(),
            container: container.into(),
            key: Some("prod/etcd".into()),
            endpoint: Some(endpoint.into()),
            credentials_secret_ref: LocalObjectReference {
                name: "azure-key".into(),
            },
        }),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcs_through_fake_gcs_server() {
    let dir = tempfile::tempdir().unwrap();
    let place = Place::Host;
    let gcs =
        blocking(|| FakeGcs::start(&place, dir.path(), free_port(&place, 4443), &["backups"]));
    let credentials = StoreCredentials::Gcs {
        service_account_key: blocking(|| service_account_key(dir.path())),
    };
    let settings = StoreSettings::default();
    let location = gcs_location(&gcs.url, "backups");
    exercise(
        &location,
        &credentials,
        &settings,
        &|key| gcs.head("backups", key),
        &|key, file| gcs.upload("backups", key, file),
        Some("etcd-snapshot-uid"),
    )
    .await;
    // Another snapshot's object is read as another writer's.
    blocking(|| gcs.put_foreign("backups", "prod/etcd/foreign.db", "someone-else"));
    let store = store::open(&location, &credentials, &settings).unwrap();
    let foreign = store::target(&location, "foreign").unwrap();
    assert_eq!(
        store::existing(&store, &foreign.path).await.unwrap(),
        Existing::Present {
            writer: Some("someone-else".into())
        }
    );

    // No such bucket: the upload cannot start.
    let missing = gcs_location(&gcs.url, "no-such-bucket");
    let store = store::open(&missing, &credentials, &settings).unwrap();
    let target = store::target(&missing, "nightly").unwrap();
    let failure = store::start_upload(&store, &target.path, UID, "tests/x")
        .await
        .unwrap_err();
    assert_eq!(failure.reason(), "BucketNotFound", "{}", failure.message());
    assert!(
        failure
            .message()
            .starts_with("bucket not found: the store has no bucket no-such-bucket"),
        "{}",
        failure.message()
    );
    assert!(
        gcs.list("backups").iter().all(|k| !k.contains("nightly")),
        "{:?}",
        gcs.list("backups")
    );

    // Nothing listens there.
    let closed = format!("http://127.0.0.1:{}", free_port(&place, 1));
    let store = store::open(&gcs_location(&closed, "backups"), &credentials, &settings).unwrap();
    let failure = store::existing(&store, &target.path).await.unwrap_err();
    assert_eq!(
        failure.reason(),
        "EndpointUnreachable",
        "{}",
        failure.message()
    );
    assert!(failure.message().contains("the GCS endpoint"));

    // A key that is not a service account key fails before any request, without its content.
    let failure = store::open(
        &location,
        &StoreCredentials::Gcs {
            service_account_key: "{\"private_key\": \"-----BEGIN PRIVATE KEY-----\\nAAAA\"}".into(),
        },
        &settings,
    )
    .unwrap_err();
    assert_eq!(failure.reason(), "CredentialsSecretInvalid");
    assert!(!failure.message().contains("AAAA"), "{}", failure.message());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn azure_through_azurite() {
    let started = std::time::Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let place = Place::Host;
    let azurite = blocking(|| {
        Azurite::start(
            &place,
            dir.path(),
            free_port(&place, 10000),
            &["etcd", "sas"],
        )
    });
    println!("azurite up in {:.1} s", started.elapsed().as_secs_f64());
    let credentials = StoreCredentials::Azure {
        account_key: Some(azurite.key.clone()),
        sas_token: None,
    };
    let settings = StoreSettings::default();
    let location = azure_location(&azurite.url, "etcd");
    exercise(
        &location,
        &credentials,
        &settings,
        &|key| azurite.head("etcd", key),
        &|key, file| azurite.upload("etcd", key, file),
        Some("etcd_snapshot_uid"),
    )
    .await;
    println!(
        "azure: the common part done at {:.1} s",
        started.elapsed().as_secs_f64()
    );
    blocking(|| azurite.put_foreign("etcd", "prod/etcd/foreign.db", "someone-else"));
    let store = store::open(&location, &credentials, &settings).unwrap();
    let foreign = store::target(&location, "foreign").unwrap();
    assert_eq!(
        store::existing(&store, &foreign.path).await.unwrap(),
        Existing::Present {
            writer: Some("someone-else".into())
        }
    );

    // A SAS token instead of the account key.
    let sas = StoreCredentials::Azure {
        account_key: None,
        sas_token: Some(format!("?{}", blocking(|| azurite.sas("sas")))),
    };
    let sas_location = azure_location(&azurite.url, "sas");
    let store = store::open(&sas_location, &sas, &settings).unwrap();
    let target = store::target(&sas_location, "nightly").unwrap();
    let data = bytes(6 * MIB, 3);
    upload(&store, &target.path, &data).await;
    let held = blocking(|| azurite.head("sas", &target.key)).unwrap();
    assert_eq!(held["sha256"].as_str(), Some(sha256_hex(&data).as_str()));
    // The SAS token rides in every URL's query: no failure repeats it.
    let token = match &sas {
        StoreCredentials::Azure {
            sas_token: Some(t), ..
        } => t.clone(),
        _ => unreachable!(),
    };
    let signature = token
        .split('&')
        .find_map(|p| p.strip_prefix("sig="))
        .expect("a signature")
        .to_string();
    for endpoint in [
        azurite.url.clone(),
        format!(
            "http://127.0.0.1:{}/{}",
            free_port(&place, 1),
            azurite.account
        ),
    ] {
        let gone = azure_location(&endpoint, "no-such-container");
        let store = store::open(&gone, &sas, &settings).unwrap();
        let mut writer = store::start_upload(&store, &target.path, UID, "tests/x")
            .await
            .unwrap();
        writer.write(&bytes(MIB, 8));
        let failure = store.classify(&writer.finish().await.unwrap_err());
        assert!(
            !failure.message().contains(&signature),
            "the SAS signature in: {}",
            failure.message()
        );
    }

    // A wrong account key: refused, and said so (not taken for a missing permission).
    let wrong = StoreCredentials::Azure {
        account_key: Some("d3Jvbmcta2V5LXdyb25nLWtleS13cm9uZy1rZXktd3Jvbmc=".into()),
        sas_token: None,
    };
    let store = store::open(&location, &wrong, &settings).unwrap();
    let failure = store::existing(&store, &target.path).await.unwrap_err();
    assert_eq!(failure.reason(), "Unauthorized", "{}", failure.message());
    assert!(
        failure
            .message()
            .starts_with("the Azure credentials were refused"),
        "{}",
        failure.message()
    );

    println!(
        "azure: SAS and a wrong key done at {:.1} s",
        started.elapsed().as_secs_f64()
    );
    // No such container: found out when the blocks go up; nothing is left.
    let missing = azure_location(&azurite.url, "no-such-container");
    let store = store::open(&missing, &credentials, &settings).unwrap();
    let target = store::target(&missing, "nightly").unwrap();
    assert_eq!(
        store::existing(&store, &target.path).await.unwrap(),
        Existing::Absent
    );
    let mut writer = store::start_upload(&store, &target.path, UID, "tests/x")
        .await
        .unwrap();
    writer.write(&bytes(MIB, 4));
    let error = writer.finish().await.unwrap_err();
    let failure = store.classify(&error);
    assert_eq!(failure.reason(), "BucketNotFound", "{}", failure.message());
    assert!(
        failure
            .message()
            .starts_with("container not found: the store has no container no-such-container"),
        "{}",
        failure.message()
    );

    let closed = format!(
        "http://127.0.0.1:{}/{}",
        free_port(&place, 1),
        support::stores::AZURITE_ACCOUNT
    );
    let store = store::open(&azure_location(&closed, "etcd"), &credentials, &settings).unwrap();
    let failure = store::existing(&store, &target.path).await.unwrap_err();
    assert_eq!(
        failure.reason(),
        "EndpointUnreachable",
        "{}",
        failure.message()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_directory() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("snapshots");
    std::fs::create_dir_all(&root).unwrap();
    let settings = StoreSettings {
        local_root: root.clone(),
    };
    let path = root.join("prod/etcd");
    let location = SnapshotLocation {
        local: Some(LocalSnapshotLocation {
            path: path.display().to_string(),
        }),
        ..Default::default()
    };
    let file_of = |key: &str| path.join(key);
    let plain = |key: &str| {
        let data = std::fs::read(file_of(key)).ok()?;
        let owner = std::fs::read_to_string(file_of(&format!("{key}.uid"))).ok();
        Some(serde_json::json!({
            "size": data.len(), "sha256": sha256_hex(&data),
            "metadata": {"owner": owner},
        }))
    };
    let store = store::open(&location, &StoreCredentials::None, &settings).unwrap();
    let target = store::target(&location, "nightly").unwrap();
    assert_eq!(
        target.uri,
        format!("file://{}/nightly.db", path.display()),
        "{target:?}"
    );
    // The upload writes the owner file first, then the file appears whole, fsynced.
    let data = bytes(12 * MIB, 5);
    upload(&store, &target.path, &data).await;
    let held = plain("nightly.db").unwrap();
    assert_eq!(held["metadata"]["owner"].as_str(), Some(UID));
    assert_eq!(held["sha256"].as_str(), Some(sha256_hex(&data).as_str()));
    let leftovers: Vec<_> = std::fs::read_dir(&path)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains('#'))
        .collect();
    assert!(leftovers.is_empty(), "staging files left: {leftovers:?}");

    // An aborted upload leaves no file (its staging file is removed).
    let aborted = store::target(&location, "aborted").unwrap();
    let mut writer = store::start_upload(&store, &aborted.path, UID, "tests/aborted")
        .await
        .unwrap();
    writer.write(&bytes(6 * MIB, 6));
    writer.wait_for_capacity(0).await.unwrap();
    writer.abort().await.unwrap();
    assert!(!file_of("aborted.db").exists());
    assert!(
        std::fs::read_dir(&path).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .contains("aborted.db#")),
        "no staging file of the aborted upload"
    );

    // A file someone put there by hand has no owner: never replaced.
    std::fs::write(file_of("by-hand.db"), b"mine").unwrap();
    let by_hand = store::target(&location, "by-hand").unwrap();
    assert_eq!(
        store::existing(&store, &by_hand.path).await.unwrap(),
        Existing::Present { writer: None }
    );

    store::delete(&store, &target.path).await.unwrap();
    assert!(!file_of("nightly.db").exists() && !file_of("nightly.db.uid").exists());

    // Outside the root, or without the root's volume: refused before anything is written.
    let outside = SnapshotLocation {
        local: Some(LocalSnapshotLocation {
            path: dir.path().join("elsewhere").display().to_string(),
        }),
        ..Default::default()
    };
    let failure = store::open(&outside, &StoreCredentials::None, &settings).unwrap_err();
    assert_eq!(failure.reason(), "InvalidDestination");
    assert!(failure.message().contains("--local-store-root"));
    assert!(!dir.path().join("elsewhere").exists());

    // A local store is never a restore source.
    let refused = fetch(&FetchArgs {
        work_dir: dir.path().join("work"),
        location: location.clone(),
        credentials: Ok(StoreCredentials::None),
        identity: None,
    })
    .await
    .unwrap_err();
    assert!(
        refused.message.contains("the restoring Pod cannot read"),
        "{refused:?}"
    );
}
