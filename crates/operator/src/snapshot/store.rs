//! The object stores, one layer for all of them: an `Arc<dyn ObjectStore>` (object_store) for
//! every location a snapshot is written to or restored from (S3, Google Cloud Storage, Azure
//! Blob Storage, a local directory of the operator's Pod), the naming of the object, the
//! overwrite guard's read of an existing object, the streaming upload, the read-back, and the
//! store's errors in plain words.
//!
//! What differs per store stays here:
//! - who wrote an object: user metadata on S3 (`x-amz-meta-etcd-snapshot-uid`), GCS
//!   (`x-goog-meta-etcd-snapshot-uid`) and Azure (`x-ms-meta-etcd_snapshot_uid`: Azure's
//!   metadata names are C# identifiers, no dashes); a local directory has no metadata, so an
//!   owner file `<name>.db.uid` beside the file records it (as on a PVC);
//! - the upload: S3 multipart, Azure blocks (Put Block / Put Block List), a local staging file
//!   renamed into place (fsynced), all through object_store's multipart API; GCS through its
//!   JSON API's resumable upload ([`gcs`]), the same bounded parts in order, because GCS
//!   emulators (fake-gcs-server) do not serve the XML multipart API object_store uses, and the
//!   resumable upload is what GCS documents for large objects. Reads and deletes of GCS go
//!   through object_store as for every store. In every store an unfinished upload is invisible:
//!   no object that looks complete appears before the last byte is in;
//! - the error codes each store answers with (classified in `errors`).

use std::collections::BTreeMap;
use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use etcd_operator_api::shared::{
    AzureSnapshotLocation, GcsSnapshotLocation, LocalSnapshotLocation, S3SnapshotLocation,
    SnapshotLocation, StoreKind,
};
use futures::StreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    Attribute, AttributeValue, Attributes, ClientOptions, GetOptions, GetRange, ObjectStore,
    ObjectStoreExt, PutMultipartOptions, PutPayload, RetryConfig, WriteMultipart,
};

use super::decide::{Existing, Failure, NAME_METADATA, UID_METADATA};
use super::digest::PlainDigest;
use crate::domain::location::{
    AZURE_ACCOUNT_KEY, AZURE_SAS_TOKEN, DEFAULT_LOCAL_ROOT, GCS_SERVICE_ACCOUNT_KEY,
    S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY,
};
use crate::domain::location::{object_key, source_key, uri_of};

mod errors;
pub mod gcs;

pub(crate) use errors::chain;
use errors::local_io_failure;
pub use errors::{classify, classify_for, store_name, without_queries};

/// Parts of a multipart upload: S3's minimum (5 MiB) for every part but the last (also a
/// multiple of the 256 KiB GCS's resumable uploads need).
pub const PART_SIZE: usize = 5 * 1024 * 1024;
/// Parts in flight at once: with the part being filled, memory stays near 3 parts.
pub const PARTS_IN_FLIGHT: usize = 2;

/// The S3 access keys from the credentials Secret (never printed).
#[derive(Clone)]
pub struct S3Credentials {
    pub access_key_id: String,
    pub secret_access_key: String,
}

impl std::fmt::Debug for S3Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("S3Credentials(..)")
    }
}

/// What a store is opened with, read from the location's credentials Secret (or, in the
/// restore agent, from the environment the Pod fills from it). Never printed.
#[derive(Clone)]
pub enum StoreCredentials {
    /// A local directory needs none.
    None,
    S3(S3Credentials),
    /// A service account's JSON key.
    Gcs {
        service_account_key: String,
    },
    /// The account's shared key, or a SAS token (the key wins when both are given).
    Azure {
        account_key: Option<String>,
        sas_token: Option<String>,
    },
}

impl std::fmt::Debug for StoreCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StoreCredentials(..)")
    }
}

/// The credentials of `location`, each value looked up by its key with `lookup` (the Secret's
/// data, or the environment). `secret` describes where they come from, for the message when
/// one is missing: a `CredentialsSecret` failure naming the key.
pub fn credentials_with(
    location: &SnapshotLocation,
    secret: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<StoreCredentials, Failure> {
    let value = |key: &str| {
        lookup(key)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let required = |key: &str| {
        value(key).ok_or_else(|| Failure::CredentialsSecret {
            detail: format!("{secret} has no (or an empty) key {key}"),
        })
    };
    match location.store() {
        Some(StoreKind::S3) => Ok(StoreCredentials::S3(S3Credentials {
            access_key_id: required(S3_ACCESS_KEY_ID)?,
            secret_access_key: required(S3_SECRET_ACCESS_KEY)?,
        })),
        Some(StoreKind::Gcs) => Ok(StoreCredentials::Gcs {
            service_account_key: required(GCS_SERVICE_ACCOUNT_KEY)?,
        }),
        Some(StoreKind::Azure) => {
            let account_key = value(AZURE_ACCOUNT_KEY);
            let sas_token = value(AZURE_SAS_TOKEN);
            if account_key.is_none() && sas_token.is_none() {
                return Err(Failure::CredentialsSecret {
                    detail: format!(
                        "{secret} has neither {AZURE_ACCOUNT_KEY} nor {AZURE_SAS_TOKEN} (one is needed)"
                    ),
                });
            }
            Ok(StoreCredentials::Azure {
                account_key,
                sas_token,
            })
        }
        Some(StoreKind::Local) | Some(StoreKind::Pvc) | None => Ok(StoreCredentials::None),
    }
}

/// The credentials from a Secret's data (`None`: no such Secret in `namespace`).
pub fn credentials_from_secret(
    location: &SnapshotLocation,
    namespace: &str,
    data: Option<&BTreeMap<String, k8s_openapi::ByteString>>,
) -> Result<StoreCredentials, Failure> {
    let Some(secret) = location.credentials_secret() else {
        return Ok(StoreCredentials::None);
    };
    let field = location
        .store()
        .map(|k| k.field())
        .unwrap_or("s3")
        .to_string();
    let Some(data) = data else {
        return Err(Failure::CredentialsSecret {
            detail: format!(
                "the credentials Secret {secret} (destination.{field}.credentialsSecretRef) does not exist in namespace {namespace}"
            ),
        });
    };
    credentials_with(
        location,
        &format!("the credentials Secret {secret}"),
        |key| {
            data.get(key)
                .map(|v| String::from_utf8_lossy(&v.0).into_owned())
        },
    )
}

/// Operator-wide settings of the stores.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreSettings {
    /// `destination.local` must lie under this directory.
    pub local_root: PathBuf,
}

impl Default for StoreSettings {
    fn default() -> Self {
        StoreSettings {
            local_root: DEFAULT_LOCAL_ROOT.into(),
        }
    }
}

/// One opened store: the object_store client, and what the messages and the guard need.
pub struct SnapshotStore {
    pub kind: StoreKind,
    pub store: Arc<dyn ObjectStore>,
    /// The bucket (S3, GCS), `<account>/<container>` (Azure) or directory (local).
    pub container: String,
    /// The endpoint (or directory) as the user wrote it, for messages.
    pub endpoint: String,
    /// GCS writes through resumable uploads.
    gcs: Option<gcs::ResumableUploads>,
}

impl std::fmt::Debug for SnapshotStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotStore")
            .field("kind", &self.kind)
            .field("container", &self.container)
            .field("endpoint", &self.endpoint)
            .finish()
    }
}

impl SnapshotStore {
    /// An object_store error as the user's problem, in this store's words.
    pub fn classify(&self, error: &object_store::Error) -> Failure {
        classify_for(self.kind, &self.container, &self.endpoint, error)
    }
}

/// The object an EtcdSnapshot writes (or a restore source reads): its key in the store, as
/// an object_store path, and its URI for the status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub key: String,
    pub path: Path,
    pub uri: String,
}

impl Target {
    fn new(key: String, uri: String) -> Target {
        Target {
            path: Path::from(key.as_str()),
            key,
            uri,
        }
    }
}

/// Where the snapshot `snapshot` goes in the destination: `<key>/<snapshot>.db` in a bucket
/// or container (the reference's naming), `<path>/<snapshot>.db` in a local directory.
pub fn target(destination: &SnapshotLocation, snapshot: &str) -> Result<Target, Failure> {
    let prefix = match destination.store() {
        Some(StoreKind::S3) => destination.s3.as_ref().and_then(|l| l.key.as_deref()),
        Some(StoreKind::Gcs) => destination.gcs.as_ref().and_then(|l| l.key.as_deref()),
        Some(StoreKind::Azure) => destination.azure.as_ref().and_then(|l| l.key.as_deref()),
        // The local store is rooted at the directory itself.
        Some(StoreKind::Local) => None,
        Some(StoreKind::Pvc) | None => {
            return Err(Failure::InvalidDestination {
                detail: "the destination names no single object store".to_string(),
            });
        }
    };
    let key = object_key(prefix, snapshot);
    let uri = uri_of(destination, &key);
    Ok(Target::new(key, uri))
}

/// The object a restore source names: its exact key.
pub fn source(location: &SnapshotLocation) -> Result<Target, Failure> {
    let key = source_key(location).ok_or_else(|| Failure::InvalidDestination {
        detail: etcd_operator_api::shared::LOCAL_NOT_A_RESTORE_SOURCE.to_string(),
    })?;
    let uri = uri_of(location, &key);
    Ok(Target::new(key, uri))
}

/// An endpoint as object_store takes it: `http://` or `https://`, no trailing slash.
fn endpoint_url(endpoint: &str) -> Result<String, Failure> {
    let endpoint = endpoint.trim_end_matches('/');
    if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
        return Err(Failure::InvalidDestination {
            detail: format!("endpoint {endpoint:?} is not an http:// or https:// URL"),
        });
    }
    Ok(endpoint.to_string())
}

/// Client options for `endpoint`: plain HTTP only for an `http://` endpoint (which needs no
/// CA certificates: an image without them could not build the client otherwise), short
/// timeouts so that a wrong endpoint fails in seconds.
fn client_options(endpoint: &str) -> ClientOptions {
    let plain = endpoint.starts_with("http://");
    ClientOptions::new()
        .with_allow_http(plain)
        .with_no_system_certificates(plain)
        .with_connect_timeout(Duration::from_secs(5))
        .with_timeout(Duration::from_secs(60))
}

fn retry() -> RetryConfig {
    RetryConfig {
        max_retries: 2,
        retry_timeout: Duration::from_secs(15),
        ..Default::default()
    }
}

/// The S3 store for `location`: path-style addressing with `forcePathStyle`, plain HTTP
/// allowed only for an `http://` endpoint, the region "us-east-1" when none is given (stores
/// that ignore it accept any). Retries are short so that a wrong endpoint fails in seconds.
pub fn s3_store(
    location: &S3SnapshotLocation,
    credentials: &S3Credentials,
) -> Result<object_store::aws::AmazonS3, Failure> {
    // reqwest is built without a crypto provider of its own: use the process's (ring).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let endpoint = endpoint_url(&location.endpoint)?;
    AmazonS3Builder::new()
        .with_endpoint(&endpoint)
        .with_bucket_name(&location.bucket)
        .with_region(
            location
                .region
                .as_deref()
                .filter(|r| !r.is_empty())
                .unwrap_or("us-east-1"),
        )
        .with_access_key_id(&credentials.access_key_id)
        .with_secret_access_key(&credentials.secret_access_key)
        .with_virtual_hosted_style_request(!location.force_path_style.unwrap_or(false))
        // No SHA-256 of every part for its signature (a second pass over every byte, on a
        // core the stream from etcd needs): the read-back checks the stored bytes' digest,
        // which covers what the signature of the payload would.
        .with_unsigned_payload(true)
        // Client options replace the builder's allow_http: set it in them.
        .with_client_options(client_options(&endpoint))
        .with_retry(retry())
        .build()
        .map_err(|e| Failure::InvalidDestination { detail: chain(&e) })
}

/// The public GCS API.
pub const GCS_DEFAULT_ENDPOINT: &str = "https://storage.googleapis.com";

fn gcs_store(
    location: &GcsSnapshotLocation,
    service_account_key: &str,
) -> Result<SnapshotStore, Failure> {
    let endpoint = endpoint_url(
        location
            .endpoint
            .as_deref()
            .filter(|e| !e.is_empty())
            .unwrap_or(GCS_DEFAULT_ENDPOINT),
    )?;
    let options = client_options(&endpoint);
    let store = GoogleCloudStorageBuilder::new()
        .with_bucket_name(&location.bucket)
        .with_base_url(&endpoint)
        .with_service_account_key(service_account_key)
        .with_client_options(options.clone())
        .with_retry(retry())
        .build()
        .map_err(|e| {
            let text = chain(&e);
            // The endpoint is checked above, the bucket is set: what fails here is the key,
            // parsed (its RSA key loaded) now. That is the Secret's problem, said without the
            // key's content.
            if !text.contains("URL") && !text.contains("url") {
                Failure::CredentialsSecret {
                    detail: format!(
                        "{GCS_SERVICE_ACCOUNT_KEY} of the credentials Secret {} is not a usable service account JSON key ({})",
                        location.credentials_secret_ref.name,
                        gcs::without_secrets(&text)
                    ),
                }
            } else {
                Failure::InvalidDestination { detail: text }
            }
        })?;
    let uploads = gcs::ResumableUploads::new(
        &endpoint,
        &location.bucket,
        store.credentials().clone(),
        &options,
    )
    .map_err(|e| Failure::InvalidDestination { detail: chain(&e) })?;
    Ok(SnapshotStore {
        kind: StoreKind::Gcs,
        store: Arc::new(store),
        container: location.bucket.clone(),
        endpoint,
        gcs: Some(uploads),
    })
}

fn azure_store(
    location: &AzureSnapshotLocation,
    account_key: Option<&str>,
    sas_token: Option<&str>,
) -> Result<SnapshotStore, Failure> {
    let endpoint = match location.endpoint.as_deref().filter(|e| !e.is_empty()) {
        Some(endpoint) => endpoint_url(endpoint)?,
        None => format!("https://{}.blob.core.windows.net", location.account),
    };
    let mut builder = MicrosoftAzureBuilder::new()
        .with_account(&location.account)
        .with_container_name(&location.container)
        .with_endpoint(endpoint.clone())
        .with_allow_http(endpoint.starts_with("http://"))
        .with_client_options(client_options(&endpoint))
        .with_retry(retry());
    let secret = &location.credentials_secret_ref.name;
    builder = match (account_key, sas_token) {
        (Some(key), _) => builder.with_access_key(key),
        (None, Some(sas)) => {
            builder.with_config(AzureConfigKey::SasKey, sas.trim_start_matches('?'))
        }
        (None, None) => {
            return Err(Failure::CredentialsSecret {
                detail: format!(
                    "the credentials Secret {secret} has neither {AZURE_ACCOUNT_KEY} nor {AZURE_SAS_TOKEN}"
                ),
            });
        }
    };
    let store = builder.build().map_err(|e| {
        let text = chain(&e);
        // The endpoint is checked above: what fails here is the key or the SAS token.
        if !text.contains("URL") && !text.contains("url") {
            Failure::CredentialsSecret {
                detail: format!(
                    "the credentials Secret {secret}: {AZURE_ACCOUNT_KEY} is not a base64 account key, or {AZURE_SAS_TOKEN} is not a SAS query string"
                ),
            }
        } else {
            Failure::InvalidDestination { detail: text }
        }
    })?;
    Ok(SnapshotStore {
        kind: StoreKind::Azure,
        store: Arc::new(store),
        container: format!("{}/{}", location.account, location.container),
        endpoint,
        gcs: None,
    })
}

/// Whether `path` is absolute, has no `..` and lies under `root` (component-wise).
pub fn local_path_allowed(path: &str, root: &FsPath) -> Result<PathBuf, String> {
    let candidate = PathBuf::from(path);
    if !candidate.is_absolute() {
        return Err(format!("local.path {path:?} is not an absolute path"));
    }
    if candidate
        .components()
        .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(format!("local.path {path:?} has a '..' segment"));
    }
    if !candidate.starts_with(root) {
        return Err(format!(
            "local.path {path:?} is outside the operator's local store root {} (its --local-store-root): write below it",
            root.display()
        ));
    }
    Ok(candidate)
}

fn local_store(
    location: &LocalSnapshotLocation,
    settings: &StoreSettings,
) -> Result<SnapshotStore, Failure> {
    let dir = local_path_allowed(&location.path, &settings.local_root)
        .map_err(|detail| Failure::InvalidDestination { detail })?;
    if !settings.local_root.is_dir() {
        return Err(Failure::InvalidDestination {
            detail: format!(
                "the operator's local store root {} does not exist in its Pod: mount a volume there (docs/backups.md, \"To a local directory\")",
                settings.local_root.display()
            ),
        });
    }
    let uri = format!("file://{}", location.path.trim_end_matches('/'));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        return Err(local_io_failure(&uri, &e.to_string()));
    }
    let store = LocalFileSystem::new_with_prefix(&dir)
        .map_err(|e| local_io_failure(&uri, &chain(&e)))?
        .with_fsync(true);
    Ok(SnapshotStore {
        kind: StoreKind::Local,
        store: Arc::new(store),
        container: location.path.trim_end_matches('/').to_string(),
        endpoint: location.path.clone(),
        gcs: None,
    })
}

/// Opens the store `location` names with `credentials`.
pub fn open(
    location: &SnapshotLocation,
    credentials: &StoreCredentials,
    settings: &StoreSettings,
) -> Result<SnapshotStore, Failure> {
    // reqwest is built without a crypto provider of its own: use the process's (ring).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let missing = || Failure::CredentialsSecret {
        detail: "the credentials do not fit the store".to_string(),
    };
    match (location.store(), credentials) {
        (Some(StoreKind::S3), StoreCredentials::S3(c)) => {
            let s3 = location.s3.as_ref().expect("an S3 location");
            Ok(SnapshotStore {
                kind: StoreKind::S3,
                store: Arc::new(s3_store(s3, c)?),
                container: s3.bucket.clone(),
                endpoint: s3.endpoint.clone(),
                gcs: None,
            })
        }
        (
            Some(StoreKind::Gcs),
            StoreCredentials::Gcs {
                service_account_key,
            },
        ) => gcs_store(
            location.gcs.as_ref().expect("a GCS location"),
            service_account_key,
        ),
        (
            Some(StoreKind::Azure),
            StoreCredentials::Azure {
                account_key,
                sas_token,
            },
        ) => azure_store(
            location.azure.as_ref().expect("an Azure location"),
            account_key.as_deref(),
            sas_token.as_deref(),
        ),
        (Some(StoreKind::Local), _) => {
            local_store(location.local.as_ref().expect("a local location"), settings)
        }
        (Some(StoreKind::S3 | StoreKind::Gcs | StoreKind::Azure), _) => Err(missing()),
        (Some(StoreKind::Pvc) | None, _) => Err(Failure::InvalidDestination {
            detail: "the location names no single object store".to_string(),
        }),
    }
}

/// The user metadata key recording the writer's uid in `kind`'s objects (Azure's names are
/// C# identifiers: no dashes).
pub fn metadata_key(kind: StoreKind, key: &str) -> String {
    match kind {
        StoreKind::Azure => key.replace('-', "_"),
        _ => key.to_string(),
    }
}

/// The owner file of a local snapshot file: `<name>.db.uid`, as on a PVC.
fn owner_path(path: &Path) -> Path {
    Path::from(format!("{path}.uid"))
}

/// What is at `path` now, with the uid of the EtcdSnapshot that wrote it. A HEAD refused
/// without a reason (a HEAD has no body) is asked again as a one-byte read, whose answer
/// carries the store's error code: bad credentials and a missing permission are told apart.
pub async fn existing(store: &SnapshotStore, path: &Path) -> Result<Existing, Failure> {
    let head = GetOptions {
        head: true,
        ..Default::default()
    };
    match store.store.get_opts(path, head).await {
        Ok(result) if store.kind == StoreKind::Local => {
            drop(result);
            let writer = match store.store.get(&owner_path(path)).await {
                Ok(owner) => owner
                    .bytes()
                    .await
                    .ok()
                    .map(|b| String::from_utf8_lossy(&b).trim().to_string())
                    .filter(|w| !w.is_empty()),
                Err(object_store::Error::NotFound { .. }) => None,
                Err(e) => return Err(store.classify(&e)),
            };
            Ok(Existing::Present { writer })
        }
        Ok(result) => Ok(Existing::Present {
            writer: result
                .attributes
                .get(&Attribute::Metadata(
                    metadata_key(store.kind, UID_METADATA).into(),
                ))
                .map(|v| v.to_string()),
        }),
        // A HEAD has no body: a missing bucket looks like a missing object here, and is
        // told apart when the upload starts.
        Err(object_store::Error::NotFound { .. }) => Ok(Existing::Absent),
        Err(
            refused @ (object_store::Error::PermissionDenied { .. }
            | object_store::Error::Unauthenticated { .. }),
        ) => {
            let probe = GetOptions {
                range: Some(GetRange::Bounded(0..1)),
                ..Default::default()
            };
            match store.store.get_opts(path, probe).await {
                Err(e @ object_store::Error::NotFound { .. }) => Err(store.classify(&e)),
                Err(e) => Err(store.classify(&e)),
                Ok(_) => Err(store.classify(&refused)),
            }
        }
        Err(e) => Err(store.classify(&e)),
    }
}

/// Deletes the object at `path` (absent already counts as deleted), and a local file's owner
/// file after it.
pub async fn delete(store: &SnapshotStore, path: &Path) -> Result<(), Failure> {
    match store.store.delete(path).await {
        Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
        Err(e) => return Err(store.classify(&e)),
    }
    if store.kind == StoreKind::Local {
        match store.store.delete(&owner_path(path)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(store.classify(&e)),
        }
    }
    Ok(())
}

/// A streaming upload to `path` whose object will carry `uid` and `name` as metadata (or, in
/// a local directory, whose owner file says `uid`, written before the file appears).
pub async fn start_upload(
    store: &SnapshotStore,
    path: &Path,
    uid: &str,
    name: &str,
) -> Result<WriteMultipart, Failure> {
    if let Some(gcs) = &store.gcs {
        let metadata = [
            (UID_METADATA.to_string(), uid.to_string()),
            (NAME_METADATA.to_string(), name.to_string()),
        ];
        let upload = gcs
            .start(path.as_ref(), &metadata)
            .await
            .map_err(|e| store.classify(&e))?;
        return Ok(WriteMultipart::new_with_chunk_size(
            Box::new(upload),
            PART_SIZE,
        ));
    }
    let mut attributes = Attributes::new();
    if store.kind == StoreKind::Local {
        store
            .store
            .put(&owner_path(path), PutPayload::from(uid.to_string()))
            .await
            .map_err(|e| store.classify(&e))?;
    } else {
        attributes.insert(
            Attribute::Metadata(metadata_key(store.kind, UID_METADATA).into()),
            AttributeValue::from(uid.to_string()),
        );
        attributes.insert(
            Attribute::Metadata(metadata_key(store.kind, NAME_METADATA).into()),
            AttributeValue::from(name.to_string()),
        );
        attributes.insert(
            Attribute::ContentType,
            AttributeValue::from("application/octet-stream"),
        );
    }
    let options = PutMultipartOptions {
        attributes,
        ..Default::default()
    };
    let upload = store
        .store
        .put_multipart_opts(path, options)
        .await
        .map_err(|e| store.classify(&e))?;
    Ok(WriteMultipart::new_with_chunk_size(upload, PART_SIZE))
}

/// Reads the object back as a stream: (size, SHA-256 hex).
pub async fn read_back(store: &SnapshotStore, path: &Path) -> Result<(u64, String), Failure> {
    let result = store
        .store
        .get_opts(path, GetOptions::default())
        .await
        .map_err(|e| store.classify(&e))?;
    let mut stream = result.into_stream();
    let mut digest = PlainDigest::default();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| store.classify(&e))?;
        digest.update(&chunk);
    }
    Ok(digest.finish())
}

#[cfg(test)]
mod tests;
