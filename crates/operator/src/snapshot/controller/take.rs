//! What is stored where: a snapshot streamed from etcd through the codec into an object store
//! (S3, GCS, Azure, a local directory), with the store's credentials read from its Secret, and
//! read back.

use etcd_operator_api::EtcdSnapshot;
use etcd_operator_api::snapshot::{
    AGE_IDENTITY_KEY, AGE_RECIPIENTS_KEY, SecretKeyRef, SnapshotCompression,
};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use object_store::path::Path;

use super::super::codec;
use super::super::decide::{self, Checked, Failure, Source, Stored, Voter};
use super::super::store::{self, PARTS_IN_FLIGHT, StoreCredentials};
use super::context::{SnapshotContext, name};
use crate::etcd::{EtcdAccess, EtcdClient, Timeouts};

/// Reads the credentials Secret the destination names (none for a local directory).
pub(super) async fn credentials(
    ctx: &SnapshotContext,
    namespace: &str,
    location: &etcd_operator_api::shared::SnapshotLocation,
) -> Result<StoreCredentials, Failure> {
    let Some(secret) = location.credentials_secret() else {
        return store::credentials_from_secret(location, namespace, None);
    };
    let found = Api::<Secret>::namespaced(ctx.act.client.clone(), namespace)
        .get_opt(secret)
        .await
        .map_err(|e| Failure::CredentialsSecret {
            detail: format!("cannot read the credentials Secret {secret}: {e}"),
        })?;
    let data = found.map(|s| s.data.unwrap_or_default());
    store::credentials_from_secret(location, namespace, data.as_ref())
}

/// The text of one key of a Secret (never printed), or why it cannot be had.
pub(super) async fn secret_text(
    ctx: &SnapshotContext,
    namespace: &str,
    reference: &SecretKeyRef,
    default_key: &str,
    field: &str,
) -> Result<String, Failure> {
    let key = reference.key_or(default_key);
    let name = &reference.name;
    let found = Api::<Secret>::namespaced(ctx.act.client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|e| Failure::EncryptionSecret {
            detail: format!("cannot read the Secret {name} ({field}): {e}"),
        })?
        .ok_or_else(|| Failure::EncryptionSecret {
            detail: format!("the Secret {name} ({field}) does not exist in namespace {namespace}"),
        })?;
    found
        .data
        .unwrap_or_default()
        .get(key)
        .map(|v| String::from_utf8_lossy(&v.0).into_owned())
        .filter(|v| !v.trim().is_empty())
        .ok_or_else(|| Failure::EncryptionSecret {
            detail: format!("the Secret {name} ({field}) has no (or an empty) key {key}"),
        })
}

/// Streams a snapshot from `voter` to the object at `key` through the codec, then reads it
/// back and decodes it. On failure, the multipart upload is aborted (nothing that looks
/// complete is left), and the stored object is returned only when it exists but failed the
/// read-back.
pub(super) async fn take(
    ctx: &SnapshotContext,
    snapshot: &EtcdSnapshot,
    voter: &Voter,
    to: &etcd_operator_api::shared::SnapshotLocation,
    key: &str,
    uri: &str,
    access: &EtcdAccess,
) -> Result<(Stored, Source, Checked), (Failure, Option<Stored>)> {
    let namespace = snapshot.metadata.namespace.clone().unwrap_or_default();
    let uid = snapshot.metadata.uid.clone().unwrap_or_default();
    let credentials = credentials(ctx, &namespace, to)
        .await
        .map_err(|f| (f, None))?;
    let store = store::open(to, &credentials, &ctx.stores).map_err(|f| (f, None))?;
    let encoding = encoding(ctx, snapshot).await.map_err(|f| (f, None))?;
    let path = Path::from(key);
    let object_name = format!("{namespace}/{}", name(snapshot));
    let existing = match store::existing(&store, &path).await {
        Ok(existing) => existing,
        // A refused HEAD has no body to say why: the upload's first request tells bad
        // credentials from a missing permission. Without a read, the guard cannot decide.
        Err(refused @ Failure::AccessDenied { .. }) => {
            let failure = match store::start_upload(&store, &path, &uid, &object_name).await {
                Ok(writer) => {
                    let _ = writer.abort().await;
                    refused
                }
                Err(failure) => failure,
            };
            return Err((failure, None));
        }
        Err(failure) => return Err((failure, None)),
    };
    decide::may_write(&existing, &uid, uri).map_err(|f| (f, None))?;

    let etcd_failure = |detail: String| Failure::Etcd {
        member: voter.member.clone(),
        detail,
    };
    let client = EtcdClient::connect_endpoint(&voter.endpoint, Timeouts::SNAPSHOT, access)
        .await
        .map_err(|e| (etcd_failure(e.to_string()), None))?;
    let etcd_version = client
        .endpoint_status(&voter.endpoint)
        .await
        .ok()
        .map(|s| s.version);
    // Asked before the stream: only a fallback for a snapshot whose pages cannot be read.
    let asked_revision = client.revision().await.ok();
    let mut stream = client
        .snapshot()
        .await
        .map_err(|e| (etcd_failure(e.to_string()), None))?;

    let mut encoder =
        codec::Encoder::new(encoding.compression, &encoding.recipients).map_err(|e| {
            (
                Failure::Encoding {
                    detail: e.to_string(),
                },
                None,
            )
        })?;
    let mut writer = store::start_upload(&store, &path, &uid, &object_name)
        .await
        .map_err(|f| (f, None))?;
    let streaming = std::time::Instant::now();
    loop {
        match stream.next_chunk().await {
            Ok(Some(chunk)) => {
                let bytes = match encoder.push(&chunk) {
                    Ok(bytes) => bytes,
                    Err(e) => {
                        let _ = writer.abort().await;
                        return Err((
                            Failure::Encoding {
                                detail: e.to_string(),
                            },
                            None,
                        ));
                    }
                };
                if bytes.is_empty() {
                    continue;
                }
                if let Err(e) = writer.wait_for_capacity(PARTS_IN_FLIGHT).await {
                    let _ = writer.abort().await;
                    return Err((store.classify(&e), None));
                }
                writer.write(bytes);
            }
            Ok(None) => break,
            Err(e) => {
                let _ = writer.abort().await;
                return Err((etcd_failure(e.to_string()), None));
            }
        }
    }
    let (last, encoded) = match encoder.finish() {
        Ok(done) => done,
        Err(e) => {
            let _ = writer.abort().await;
            return Err((
                Failure::Encoding {
                    detail: e.to_string(),
                },
                None,
            ));
        }
    };
    if !encoded.snapshot.trailer_matches {
        let _ = writer.abort().await;
        return Err((
            Failure::Corrupt {
                member: voter.member.clone(),
            },
            None,
        ));
    }
    if !last.is_empty() {
        writer.write(&last);
    }
    writer
        .finish()
        .await
        .map_err(|e| (store.classify(&e), None))?;
    let streamed = streaming.elapsed().as_secs_f64();
    let stored = Stored::of(uri, &encoded, encoding.fingerprints.clone());
    let source = Source {
        member: voter.member.clone(),
        revision: asked_revision,
        etcd_version,
    };
    let reading = std::time::Instant::now();
    let checked = read_back(&store, &path, &stored, &encoding)
        .await
        .map_err(|f| (f, Some(stored.clone())))?;
    tracing::info!(
        namespace = %namespace,
        snapshot = %name(snapshot),
        size = stored.size,
        streamed_seconds = format!("{streamed:.2}"),
        read_back_seconds = format!("{:.2}", reading.elapsed().as_secs_f64()),
        "snapshot stored and read back"
    );
    Ok((stored, source, checked))
}

/// Reads the object back (streamed) and checks it: decoded when it can be (not encrypted, or
/// an identity given), else the stored bytes only.
pub(super) async fn read_back(
    store: &store::SnapshotStore,
    path: &Path,
    stored: &Stored,
    encoding: &Encoding,
) -> Result<Checked, Failure> {
    if stored.encrypted() && encoding.identities.is_empty() {
        let (size, sha256) = store::read_back(store, path).await?;
        return decide::check_read_back(stored, size, &sha256, None);
    }
    let result = store
        .store
        .get_opts(path, object_store::GetOptions::default())
        .await
        .map_err(|e| store.classify(&e))?;
    let (decoded, failed) = codec::decode_stream(
        result.into_stream(),
        encoding.identities.clone(),
        Box::new(|_| Ok(())),
    )
    .await;
    match decoded {
        Ok(decoded) => decide::check_read_back(
            stored,
            decoded.stored_size,
            &decoded.stored_sha256,
            Some(&decoded),
        ),
        Err(_) if failed.is_some() => Err(store.classify(&failed.expect("checked"))),
        Err(e) => Err(Failure::VerificationFailed {
            detail: format!("cannot be decoded: {e}"),
        }),
    }
}

/// The layers a snapshot's spec asks for: the compression, the age recipients (with their
/// fingerprints) and the identities that decrypt it (for the read-back), from their Secrets.
pub(crate) struct Encoding {
    pub compression: SnapshotCompression,
    pub recipients: Vec<age::x25519::Recipient>,
    pub fingerprints: Vec<String>,
    pub identities: Vec<age::x25519::Identity>,
}

/// The encoding of `snapshot` (its Secrets read now).
pub(crate) async fn encoding(
    ctx: &SnapshotContext,
    snapshot: &EtcdSnapshot,
) -> Result<Encoding, Failure> {
    let namespace = snapshot.metadata.namespace.clone().unwrap_or_default();
    let mut encoding = Encoding {
        compression: snapshot.spec.compression.unwrap_or_default(),
        recipients: Vec::new(),
        fingerprints: Vec::new(),
        identities: Vec::new(),
    };
    let Some(age) = snapshot.spec.encryption.as_ref().map(|e| &e.age) else {
        return Ok(encoding);
    };
    let field = "spec.encryption.age.recipientsSecretRef";
    let text = secret_text(
        ctx,
        &namespace,
        &age.recipients_secret_ref,
        AGE_RECIPIENTS_KEY,
        field,
    )
    .await?;
    encoding.recipients =
        codec::parse_recipients(&text).map_err(|e| Failure::EncryptionSecret {
            detail: format!(
                "the Secret {} ({field}): {e}",
                age.recipients_secret_ref.name
            ),
        })?;
    encoding.fingerprints = encoding.recipients.iter().map(codec::fingerprint).collect();
    if let Some(identity) = &age.identity_secret_ref {
        let field = "spec.encryption.age.identitySecretRef";
        let text = secret_text(ctx, &namespace, identity, AGE_IDENTITY_KEY, field).await?;
        encoding.identities =
            codec::parse_identities(&text).map_err(|e| Failure::EncryptionSecret {
                detail: format!("the Secret {} ({field}): {e}", identity.name),
            })?;
        let theirs: Vec<String> = encoding
            .identities
            .iter()
            .map(|i| codec::fingerprint(&i.to_public()))
            .collect();
        if !theirs.iter().any(|f| encoding.fingerprints.contains(f)) {
            return Err(Failure::EncryptionSecret {
                detail: format!(
                    "the identity in Secret {} ({field}) belongs to none of the recipients (its recipient is {}), so the snapshot could not be read back",
                    identity.name,
                    theirs.join(", ")
                ),
            });
        }
    }
    Ok(encoding)
}
