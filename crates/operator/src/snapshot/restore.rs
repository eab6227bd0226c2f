//! The restore agent: what `etcd-operator restore-fetch` and `restore-commit` do inside the
//! seed's first Pod (see `build::restore` for the init containers). Failures end with one
//! line `RestoreFailed <Reason>: <message>` on stderr, which the kubelet hands to the operator
//! as the container's termination message (`FallbackToLogsOnError`); never a secret.

use std::io::Write;
use std::path::{Path, PathBuf};

use etcd_operator_api::shared::SnapshotLocation;
use object_store::GetOptions;

use super::codec::{DecodeError, Decoded, decode, decode_stream, parse_identities};
use super::decide::{Failure, StoreWords};
use super::store::{self, StoreCredentials};
use crate::build::RESTORE_FAILED_MARK;

/// Why a restore step failed: a reason (CamelCase, the condition's) and what to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestoreError {
    pub reason: &'static str,
    pub message: String,
}

impl RestoreError {
    fn new(reason: &'static str, message: impl Into<String>) -> Self {
        RestoreError {
            reason,
            message: message.into(),
        }
    }

    /// The line the operator reads back.
    pub fn line(&self) -> String {
        format!("{RESTORE_FAILED_MARK} {}: {}", self.reason, self.message)
    }
}

/// The fix every fetch failure shares.
const FIX: &str = "fix spec.bootstrap.restore.source or the store; the Pod retries by itself";

/// A store failure, worded for reading a restore source.
pub fn restore_failure_of(failure: &Failure, uri: &str) -> RestoreError {
    match failure {
        Failure::Unauthorized { store } => {
            let words = StoreWords::of(store);
            RestoreError::new(
                "Unauthorized",
                format!(
                    "the {} credentials were refused reading {uri}: fix {} in the credentials Secret; the Pod retries by itself",
                    words.name, words.keys
                ),
            )
        }
        Failure::AccessDenied { detail, store } => RestoreError::new(
            "AccessDenied",
            format!(
                "access denied reading {uri} ({detail}): let the {} credentials read the object; {FIX}",
                StoreWords::of(store).name
            ),
        ),
        Failure::BucketNotFound { bucket, store } => {
            let words = StoreWords::of(store);
            RestoreError::new(
                "BucketNotFound",
                format!(
                    "{0} not found: the store has no {0} {bucket}; {FIX}",
                    words.bucket
                ),
            )
        }
        Failure::EndpointUnreachable {
            endpoint,
            detail,
            store,
        } => RestoreError::new(
            "EndpointUnreachable",
            format!(
                "the {} endpoint {endpoint} is unreachable ({detail}); {FIX}",
                StoreWords::of(store).name
            ),
        ),
        Failure::CredentialsSecret { detail } => RestoreError::new(
            "CredentialsSecretInvalid",
            format!("{detail}; add it to the credentials Secret; the Pod retries by itself"),
        ),
        Failure::InvalidDestination { detail } => RestoreError::new(
            "InvalidSource",
            format!("the restore source is not usable: {detail}; {FIX}"),
        ),
        other => RestoreError::new(
            "StoreError",
            format!("reading {uri} failed ({}); {FIX}", other.reason()),
        ),
    }
}

/// The restore source as the agent gets it on its command line (credentials from the
/// environment, which the Pod fills from the credentials Secret; `Err` says which is missing).
#[derive(Clone, Debug)]
pub struct FetchArgs {
    pub work_dir: PathBuf,
    pub location: SnapshotLocation,
    pub credentials: Result<StoreCredentials, Failure>,
    /// The age identity file's text (from the environment), for an encrypted snapshot.
    pub identity: Option<String>,
}

/// The object-store flags of `etcd-operator restore-fetch`, as `build::restore` writes them.
#[derive(Clone, Debug, Default)]
pub struct FetchFlags {
    /// `s3` (the default), `gcs` or `azure`.
    pub store: String,
    pub endpoint: Option<String>,
    pub bucket: Option<String>,
    pub account: Option<String>,
    pub container: Option<String>,
    pub key: Option<String>,
    pub region: Option<String>,
    pub force_path_style: bool,
    pub credentials_secret: Option<String>,
}

impl FetchFlags {
    /// The restore source the flags name; a missing flag or an unknown store is refused.
    pub fn location(&self) -> Result<SnapshotLocation, RestoreError> {
        use etcd_operator_api::shared::{
            AzureSnapshotLocation, GcsSnapshotLocation, S3SnapshotLocation,
        };
        let needed = |value: &Option<String>, flag: &str| {
            value.clone().filter(|v| !v.is_empty()).ok_or_else(|| {
                RestoreError::new(
                    "InvalidSource",
                    format!("restore-fetch --store={} needs --{flag}", self.store),
                )
            })
        };
        let key = needed(&self.key, "key")?;
        let secret = k8s_openapi::api::core::v1::LocalObjectReference {
            name: self.credentials_secret.clone().unwrap_or_default(),
        };
        let endpoint = self.endpoint.clone().filter(|e| !e.is_empty());
        match self.store.as_str() {
            "" | "s3" => Ok(SnapshotLocation {
                s3: Some(S3SnapshotLocation {
                    endpoint: needed(&self.endpoint, "endpoint")?,
                    bucket: needed(&self.bucket, "bucket")?,
                    key: Some(key),
                    credentials_secret_ref: secret,
                    region: self.region.clone(),
                    force_path_style: Some(self.force_path_style),
                }),
                ..Default::default()
            }),
            "gcs" => Ok(SnapshotLocation {
                gcs: Some(GcsSnapshotLocation {
                    bucket: needed(&self.bucket, "bucket")?,
                    key: Some(key),
                    endpoint,
                    credentials_secret_ref: secret,
                }),
                ..Default::default()
            }),
            "azure" => Ok(SnapshotLocation {
                azure: Some(AzureSnapshotLocation {
                    account: needed(&self.account, "account")?,
                    container: needed(&self.container, "container")?,
                    key: Some(key),
                    endpoint,
                    credentials_secret_ref: secret,
                }),
                ..Default::default()
            }),
            "local" => Err(RestoreError::new(
                "InvalidSource",
                format!(
                    "{}; {FIX}",
                    etcd_operator_api::shared::LOCAL_NOT_A_RESTORE_SOURCE
                ),
            )),
            other => Err(RestoreError::new(
                "InvalidSource",
                format!("restore-fetch --store={other:?} is not s3, gcs or azure"),
            )),
        }
    }

    /// Where the credentials come from, for a message about a missing one.
    pub fn secret_words(&self) -> String {
        match self.credentials_secret.as_deref().filter(|s| !s.is_empty()) {
            Some(name) => format!("the credentials Secret {name}"),
            None => "the credentials Secret".to_string(),
        }
    }
}

/// The identities of the identity text given (none: an encrypted snapshot fails).
pub fn identities(text: Option<&str>) -> Result<Vec<age::x25519::Identity>, RestoreError> {
    match text {
        None => Ok(Vec::new()),
        Some(text) => parse_identities(text).map_err(|e| {
            RestoreError::new(
                "IdentityInvalid",
                format!(
                    "the age identity Secret key (ageIdentitySecretRef) is not usable: {e}; put the AGE-SECRET-KEY-1... line of one of the snapshot's recipients there"
                ),
            )
        }),
    }
}

/// A decoding failure as the restore's reason and words.
pub fn decode_failure(error: &DecodeError, uri: &str, fix: &str) -> RestoreError {
    match error {
        DecodeError::Encrypted => RestoreError::new(
            "EncryptedSnapshot",
            format!(
                "{uri} is encrypted with age and no identity was given: set ageIdentitySecretRef of the restore source to a Secret key holding the AGE-SECRET-KEY-1... of one of its recipients"
            ),
        ),
        DecodeError::WrongIdentity => RestoreError::new(
            "WrongIdentity",
            format!(
                "{uri} is encrypted with age to other recipients: the identity of ageIdentitySecretRef cannot decrypt it; give the identity of one of the recipients listed (as fingerprints) in the EtcdSnapshot's status.encryption"
            ),
        ),
        DecodeError::Corrupt { .. } | DecodeError::TrailingData { .. } => RestoreError::new(
            "NotASnapshot",
            format!("{uri} is damaged: {error} (checksum mismatch); use another snapshot, {fix}"),
        ),
        DecodeError::Input(_) => RestoreError::new(
            "SourceUnreadable",
            format!("reading {uri} failed: {error}; {fix}"),
        ),
        DecodeError::Output(e) => RestoreError::new(
            "VolumeError",
            format!(
                "writing the snapshot on the member's volume failed: {e}; check the PVC (free space, permissions)"
            ),
        ),
    }
}

/// Downloads the snapshot into `<work>/snapshot.db`: a fresh work directory, the bytes
/// streamed into `snapshot.db.part` with etcd's trailing SHA-256 checked on the way, fsync,
/// rename. Returns (size, SHA-256 hex).
pub async fn fetch(args: &FetchArgs) -> Result<(u64, String), RestoreError> {
    let target = store::source(&args.location).map_err(|f| restore_failure_of(&f, ""))?;
    let uri = target.uri.clone();
    let credentials = args
        .credentials
        .clone()
        .map_err(|f| restore_failure_of(&f, &uri))?;
    let store = store::open(
        &args.location,
        &credentials,
        &store::StoreSettings::default(),
    )
    .map_err(|f| restore_failure_of(&f, &uri))?;
    let io = |what: &str, e: std::io::Error| {
        RestoreError::new(
            "VolumeError",
            format!(
                "{what} on the member's volume failed: {e}; check the PVC (free space, permissions)"
            ),
        )
    };
    let _ = std::fs::remove_dir_all(&args.work_dir);
    std::fs::create_dir_all(&args.work_dir).map_err(|e| io("creating the work directory", e))?;
    let part = args.work_dir.join("snapshot.db.part");
    let mut file = std::fs::File::create(&part).map_err(|e| io("creating the snapshot file", e))?;

    let identities = identities(args.identity.as_deref())?;
    let path = target.path;
    let result = match store.store.get_opts(&path, GetOptions::default()).await {
        Ok(result) => result,
        Err(e @ object_store::Error::NotFound { .. })
            if store.classify(&e).reason() != "BucketNotFound" =>
        {
            return Err(RestoreError::new(
                "SnapshotNotFound",
                format!("the restore source {uri} does not exist; {FIX}"),
            ));
        }
        Err(e) => return Err(restore_failure_of(&store.classify(&e), &uri)),
    };
    let write = move |chunk: &[u8]| file.write_all(chunk);
    let (decoded, failed) = decode_stream(result.into_stream(), identities, Box::new(write)).await;
    let decoded = match (decoded, failed) {
        (Ok(decoded), _) => decoded,
        (Err(_), Some(e)) => return Err(restore_failure_of(&store.classify(&e), &uri)),
        (Err(e), None) => return Err(decode_failure(&e, &uri, FIX)),
    };
    commit_download(&args.work_dir, &part, &decoded, &uri)
}

/// The end of a download: etcd's trailing hash, fsync, rename. Returns (size, SHA-256 hex)
/// of etcd's bytes.
fn commit_download(
    work_dir: &Path,
    part: &Path,
    decoded: &Decoded,
    uri: &str,
) -> Result<(u64, String), RestoreError> {
    let io = |what: &str, e: std::io::Error| {
        RestoreError::new(
            "VolumeError",
            format!(
                "{what} on the member's volume failed: {e}; check the PVC (free space, permissions)"
            ),
        )
    };
    if !decoded.snapshot.trailer_matches {
        let _ = std::fs::remove_dir_all(work_dir);
        return Err(RestoreError::new(
            "NotASnapshot",
            format!(
                "{uri} ({} bytes{}) is not an etcd snapshot, or is damaged: its last 32 bytes are not the SHA-256 of the rest (checksum mismatch); point spec.bootstrap.restore.source at a snapshot an EtcdSnapshot or `etcdctl snapshot save` made",
                decoded.stored_size,
                match decoded.layers.describe().as_str() {
                    d if d.starts_with("none") => String::new(),
                    d => format!(", decoded from {d}"),
                }
            ),
        ));
    }
    std::fs::OpenOptions::new()
        .write(true)
        .open(part)
        .and_then(|f| f.sync_all())
        .map_err(|e| io("syncing the snapshot", e))?;
    std::fs::rename(part, work_dir.join("snapshot.db"))
        .map_err(|e| io("renaming the snapshot", e))?;
    sync_dir(work_dir).map_err(|e| io("syncing the work directory", e))?;
    Ok((decoded.snapshot.size, decoded.snapshot.sha256.clone()))
}

/// Copies the snapshot file `file` of a mounted claim (a PVC restore source) into
/// `<work>/snapshot.db` the same way [`fetch`] downloads one: decrypted and decompressed
/// (each recognised by its first bytes), etcd's trailing SHA-256 checked on the way, fsync,
/// rename. Returns (size, SHA-256 hex) of etcd's bytes.
pub fn fetch_file(
    work_dir: &Path,
    file: &Path,
    uri: &str,
    identity: Option<&str>,
) -> Result<(u64, String), RestoreError> {
    const PVC_FIX: &str = "fix spec.bootstrap.restore.source.pvc (claimName, subPath: the exact file); the Pod retries by itself";
    let io = |what: &str, e: std::io::Error| {
        RestoreError::new(
            "VolumeError",
            format!(
                "{what} on the member's volume failed: {e}; check the PVC (free space, permissions)"
            ),
        )
    };
    let identities = identities(identity)?;
    let source = match std::fs::File::open(file) {
        Ok(f) if f.metadata().is_ok_and(|m| m.is_dir()) => {
            return Err(RestoreError::new(
                "InvalidSource",
                format!("the restore source {uri} is a directory, not a snapshot file; {PVC_FIX}"),
            ));
        }
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(RestoreError::new(
                "SnapshotNotFound",
                format!("the restore source {uri} does not exist on the claim; {PVC_FIX}"),
            ));
        }
        Err(e) => {
            return Err(RestoreError::new(
                "SourceUnreadable",
                format!("the restore source {uri} cannot be read: {e}; {PVC_FIX}"),
            ));
        }
    };
    let _ = std::fs::remove_dir_all(work_dir);
    std::fs::create_dir_all(work_dir).map_err(|e| io("creating the work directory", e))?;
    let part = work_dir.join("snapshot.db.part");
    let mut out = std::fs::File::create(&part).map_err(|e| io("creating the snapshot file", e))?;
    let decoded = decode(source, &identities, &mut |chunk| out.write_all(chunk));
    drop(out);
    let decoded = match decoded {
        Ok(decoded) => decoded,
        Err(e) => {
            let _ = std::fs::remove_dir_all(work_dir);
            return Err(decode_failure(&e, uri, PVC_FIX));
        }
    };
    commit_download(work_dir, &part, &decoded, uri)
}

/// What `commit` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Committed {
    /// The restored member directory is now the data directory's.
    Restored,
    /// The data directory already held a member (a restore committed before, or etcd ran):
    /// kept as it is.
    KeptExisting,
}

/// Moves `<work>/data/member` to `<data_dir>/member` (one rename on one filesystem, so etcd
/// sees either nothing or the whole restored directory), unless the data directory already
/// holds a member; removes the work directory either way.
pub fn commit(work_dir: &Path, data_dir: &Path) -> Result<Committed, RestoreError> {
    let io = |what: &str, e: std::io::Error| {
        RestoreError::new(
            "VolumeError",
            format!(
                "{what} on the member's volume failed: {e}; check the PVC (free space, permissions)"
            ),
        )
    };
    let target = data_dir.join("member");
    if target.exists() {
        let _ = std::fs::remove_dir_all(work_dir);
        return Ok(Committed::KeptExisting);
    }
    let restored = work_dir.join("data").join("member");
    if !restored.is_dir() {
        return Err(RestoreError::new(
            "SnapshotRestoreFailed",
            format!(
                "{} is missing: the restore step produced no member directory",
                restored.display()
            ),
        ));
    }
    std::fs::create_dir_all(data_dir).map_err(|e| io("creating the data directory", e))?;
    std::fs::rename(&restored, &target).map_err(|e| io("moving the restored data", e))?;
    sync_dir(data_dir).map_err(|e| io("syncing the data directory", e))?;
    std::fs::remove_dir_all(work_dir).map_err(|e| io("removing the work directory", e))?;
    Ok(Committed::Restored)
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("restore-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn commit_moves_the_restored_member_and_removes_the_work_dir() {
        let root = scratch("move");
        let work = root.join(".restore");
        std::fs::create_dir_all(work.join("data/member/wal")).unwrap();
        std::fs::write(work.join("data/member/wal/0.wal"), b"x").unwrap();
        let data = root.join("data");
        assert_eq!(commit(&work, &data).unwrap(), Committed::Restored);
        assert!(data.join("member/wal/0.wal").is_file());
        assert!(!work.exists());
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn commit_never_replaces_an_existing_member() {
        let root = scratch("keep");
        let work = root.join(".restore");
        std::fs::create_dir_all(work.join("data/member/wal")).unwrap();
        std::fs::create_dir_all(root.join("member/snap")).unwrap();
        std::fs::write(root.join("member/snap/db"), b"live").unwrap();
        assert_eq!(commit(&work, &root).unwrap(), Committed::KeptExisting);
        assert_eq!(std::fs::read(root.join("member/snap/db")).unwrap(), b"live");
        assert!(!root.join("member/wal").exists());
        assert!(!work.exists());
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn commit_without_restored_data_fails_and_leaves_the_data_dir_empty() {
        let root = scratch("none");
        let work = root.join(".restore");
        std::fs::create_dir_all(&work).unwrap();
        let error = commit(&work, &root.join("data")).unwrap_err();
        assert_eq!(error.reason, "SnapshotRestoreFailed");
        assert!(!root.join("data/member").exists());
        let _ = std::fs::remove_dir_all(&root);
    }

    fn with_trailer(db: &[u8]) -> Vec<u8> {
        let mut bytes = db.to_vec();
        bytes.extend_from_slice(ring::digest::digest(&ring::digest::SHA256, db).as_ref());
        bytes
    }

    #[test]
    fn a_pvc_source_is_copied_with_etcds_hash_checked() {
        let root = scratch("file");
        let source = root.join("nightly.db");
        let snapshot = with_trailer(&vec![7u8; 3 << 20]);
        std::fs::write(&source, &snapshot).unwrap();
        let work = root.join(".restore");
        let (size, sha) = fetch_file(&work, &source, "pvc://b/nightly.db", None).unwrap();
        assert_eq!(size, snapshot.len() as u64);
        assert_eq!(std::fs::read(work.join("snapshot.db")).unwrap(), snapshot);
        assert_eq!(
            sha,
            super::super::digest::hex(
                ring::digest::digest(&ring::digest::SHA256, &snapshot).as_ref()
            )
        );

        let missing =
            fetch_file(&work, &root.join("gone.db"), "pvc://b/gone.db", None).unwrap_err();
        assert_eq!(missing.reason, "SnapshotNotFound");
        assert!(missing.message.contains("pvc://b/gone.db"));
        let dir = fetch_file(&work, &root, "pvc://b/", None).unwrap_err();
        assert_eq!(dir.reason, "InvalidSource");
        std::fs::write(&source, b"not a snapshot at all, just some bytes here").unwrap();
        let bad = fetch_file(&work, &source, "pvc://b/nightly.db", None).unwrap_err();
        assert_eq!(bad.reason, "NotASnapshot");
        assert!(!work.join("snapshot.db").exists());
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn failure_lines_parse_back() {
        let error = RestoreError::new(
            "SnapshotNotFound",
            "the restore source s3://b/k does not exist",
        );
        let (reason, message) = crate::build::parse_restore_failure(&error.line());
        assert_eq!(reason, "SnapshotNotFound");
        assert_eq!(message, "the restore source s3://b/k does not exist");
    }

    #[test]
    fn store_failures_name_the_source_and_never_say_snapshot_retry() {
        let cases = [
            (
                Failure::Unauthorized {
                    store: String::new(),
                },
                "Unauthorized",
            ),
            (
                Failure::BucketNotFound {
                    bucket: "b".into(),
                    store: "GCS".into(),
                },
                "BucketNotFound",
            ),
            (
                Failure::EndpointUnreachable {
                    endpoint: "http://x".into(),
                    detail: "refused".into(),
                    store: "Azure".into(),
                },
                "EndpointUnreachable",
            ),
            (
                Failure::CredentialsSecret {
                    detail: "the environment has no (or an empty) key GOOGLE_SERVICE_ACCOUNT_KEY"
                        .into(),
                },
                "CredentialsSecretInvalid",
            ),
        ];
        for (failure, reason) in cases {
            let error = restore_failure_of(&failure, "s3://b/k.db");
            assert_eq!(error.reason, reason);
            assert!(!error.message.contains("EtcdSnapshot"), "{}", error.message);
        }
        let azure = restore_failure_of(
            &Failure::Unauthorized {
                store: "Azure".into(),
            },
            "azure://a/c/k.db",
        );
        assert!(
            azure
                .message
                .starts_with("the Azure credentials were refused reading azure://a/c/k.db: fix AZURE_STORAGE_ACCOUNT_KEY/AZURE_STORAGE_SAS_TOKEN"),
            "{}",
            azure.message
        );
        let container = restore_failure_of(
            &Failure::BucketNotFound {
                bucket: "c".into(),
                store: "Azure".into(),
            },
            "azure://a/c/k.db",
        );
        assert!(
            container
                .message
                .starts_with("container not found: the store has no container c"),
            "{}",
            container.message
        );
    }
}
