//! The object store side: an S3 store from the reference's fields, the overwrite guard's
//! read of an existing object, and object_store errors in plain words.

use std::time::Duration;

use etcd_operator_api::shared::S3SnapshotLocation;
use futures::StreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path;
use object_store::{
    Attribute, AttributeValue, Attributes, ClientOptions, GetOptions, ObjectStore,
    PutMultipartOptions, RetryConfig, WriteMultipart,
};

use super::decide::{Existing, Failure, NAME_METADATA, UID_METADATA};
use super::digest::PlainDigest;

/// Parts of a multipart upload: S3's minimum (5 MiB) for every part but the last.
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

/// The S3 store for `location`: path-style addressing with `forcePathStyle`, plain HTTP
/// allowed only for an `http://` endpoint, the region "us-east-1" when none is given (stores
/// that ignore it accept any). Retries are short so that a wrong endpoint fails in seconds.
pub fn s3_store(
    location: &S3SnapshotLocation,
    credentials: &S3Credentials,
) -> Result<AmazonS3, Failure> {
    // reqwest is built without a crypto provider of its own: use the process's (ring).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let endpoint = location.endpoint.trim_end_matches('/');
    if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
        return Err(Failure::InvalidDestination {
            detail: format!("endpoint {endpoint:?} is not an http:// or https:// URL"),
        });
    }
    AmazonS3Builder::new()
        .with_endpoint(endpoint)
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
        // Client options replace the builder's allow_http: set it in them.
        .with_client_options(
            ClientOptions::new()
                .with_allow_http(endpoint.starts_with("http://"))
                // Plain HTTP needs no roots, and an image without system CA certificates
                // could not build the client otherwise; https verifies against the system's.
                .with_no_system_certificates(endpoint.starts_with("http://"))
                .with_connect_timeout(Duration::from_secs(5))
                .with_timeout(Duration::from_secs(60)),
        )
        .with_retry(RetryConfig {
            max_retries: 2,
            retry_timeout: Duration::from_secs(15),
            ..Default::default()
        })
        .build()
        .map_err(|e| Failure::InvalidDestination { detail: chain(&e) })
}

/// The text of an error and all its sources, for matching the store's error codes.
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}

/// The deepest source of an error.
fn innermost(error: &(dyn std::error::Error + 'static)) -> String {
    let mut deepest = error;
    while let Some(inner) = deepest.source() {
        deepest = inner;
    }
    deepest.to_string()
}

/// An object_store error as the user's problem. S3 error codes in the response body decide
/// first (`NoSuchBucket`, `InvalidAccessKeyId`, `SignatureDoesNotMatch`, `AccessDenied`),
/// then the kind of the error (401, 403, a connection that failed).
pub fn classify(error: &object_store::Error, location: &S3SnapshotLocation) -> Failure {
    let text = chain(error);
    let detail = text.chars().take(300).collect::<String>();
    let has = |code: &str| text.contains(code);
    if has("NoSuchBucket") {
        return Failure::BucketNotFound {
            bucket: location.bucket.clone(),
        };
    }
    if has("InvalidAccessKeyId") || has("SignatureDoesNotMatch") || has("InvalidClientTokenId") {
        return Failure::Unauthorized;
    }
    match error {
        object_store::Error::Unauthenticated { .. } => Failure::Unauthorized,
        object_store::Error::PermissionDenied { .. } => Failure::AccessDenied { detail },
        _ if has("AccessDenied") => Failure::AccessDenied { detail },
        _ if has("error sending request")
            || has("Connection refused")
            || has("connection refused")
            || has("dns error")
            || has("client error (Connect)")
            || has("operation timed out") =>
        {
            Failure::EndpointUnreachable {
                endpoint: location.endpoint.clone(),
                // The innermost cause ("tcp connect error: Connection refused") says it best.
                detail: innermost(error).chars().take(200).collect(),
            }
        }
        _ => Failure::Store { detail },
    }
}

/// What is at `path` now: a HEAD, with the object's user metadata.
pub async fn existing(
    store: &AmazonS3,
    path: &Path,
    location: &S3SnapshotLocation,
) -> Result<Existing, Failure> {
    let options = GetOptions {
        head: true,
        ..Default::default()
    };
    match store.get_opts(path, options).await {
        Ok(result) => Ok(Existing::Present {
            writer: result
                .attributes
                .get(&Attribute::Metadata(UID_METADATA.into()))
                .map(|v| v.to_string()),
        }),
        // A HEAD has no body: a missing bucket looks like a missing object here, and is
        // told apart when the upload starts.
        Err(object_store::Error::NotFound { .. }) => Ok(Existing::Absent),
        Err(e) => Err(classify(&e, location)),
    }
}

/// Deletes the object at `path` (absent already counts as deleted).
pub async fn delete(
    store: &AmazonS3,
    path: &Path,
    location: &S3SnapshotLocation,
) -> Result<(), Failure> {
    match object_store::ObjectStoreExt::delete(store, path).await {
        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
        Err(e) => Err(classify(&e, location)),
    }
}

/// A multipart upload to `path` whose object will carry `uid` and `name` as metadata.
pub async fn start_upload(
    store: &AmazonS3,
    path: &Path,
    uid: &str,
    name: &str,
    location: &S3SnapshotLocation,
) -> Result<WriteMultipart, Failure> {
    let mut attributes = Attributes::new();
    attributes.insert(
        Attribute::Metadata(UID_METADATA.into()),
        AttributeValue::from(uid.to_string()),
    );
    attributes.insert(
        Attribute::Metadata(NAME_METADATA.into()),
        AttributeValue::from(name.to_string()),
    );
    attributes.insert(
        Attribute::ContentType,
        AttributeValue::from("application/octet-stream"),
    );
    let options = PutMultipartOptions {
        attributes,
        ..Default::default()
    };
    let upload = store
        .put_multipart_opts(path, options)
        .await
        .map_err(|e| classify(&e, location))?;
    Ok(WriteMultipart::new_with_chunk_size(upload, PART_SIZE))
}

/// Reads the object back as a stream: (size, SHA-256 hex).
pub async fn read_back(
    store: &AmazonS3,
    path: &Path,
    location: &S3SnapshotLocation,
) -> Result<(u64, String), Failure> {
    let result = store
        .get_opts(path, GetOptions::default())
        .await
        .map_err(|e| classify(&e, location))?;
    let mut stream = result.into_stream();
    let mut digest = PlainDigest::default();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| classify(&e, location))?;
        digest.update(&chunk);
    }
    Ok(digest.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn location() -> S3SnapshotLocation {
        S3SnapshotLocation {
            endpoint: "http://s3.example:9000".into(),
            bucket: "backups".into(),
            ..Default::default()
        }
    }

    fn generic(text: &str) -> object_store::Error {
        object_store::Error::Generic {
            store: "S3",
            source: text.to_string().into(),
        }
    }

    #[test]
    fn store_answers_become_sentences() {
        let l = location();
        let cases = [
            (
                generic("Client error with status 404 Not Found: <Code>NoSuchBucket</Code>"),
                "BucketNotFound",
            ),
            (
                object_store::Error::NotFound {
                    path: "k".into(),
                    source: "<Error><Code>NoSuchBucket</Code></Error>"
                        .to_string()
                        .into(),
                },
                "BucketNotFound",
            ),
            (
                object_store::Error::PermissionDenied {
                    path: "k".into(),
                    source: "<Code>InvalidAccessKeyId</Code>".to_string().into(),
                },
                "Unauthorized",
            ),
            (
                object_store::Error::PermissionDenied {
                    path: "k".into(),
                    source: "<Code>SignatureDoesNotMatch</Code>".to_string().into(),
                },
                "Unauthorized",
            ),
            (
                object_store::Error::Unauthenticated {
                    path: "k".into(),
                    source: "401".to_string().into(),
                },
                "Unauthorized",
            ),
            (
                object_store::Error::PermissionDenied {
                    path: "k".into(),
                    source: "<Code>AccessDenied</Code>".to_string().into(),
                },
                "AccessDenied",
            ),
            (
                generic("error sending request for url (http://s3.example:9000/backups/k.db)"),
                "EndpointUnreachable",
            ),
            (
                generic("HTTP error: client error (Connect): Connection refused"),
                "EndpointUnreachable",
            ),
            (
                generic("Server returned 500 Internal Server Error"),
                "StoreError",
            ),
            (
                generic("HTTP error: builder error: URL scheme is not allowed"),
                "StoreError",
            ),
        ];
        for (error, reason) in cases {
            let failure = classify(&error, &l);
            assert_eq!(failure.reason(), reason, "{error}");
        }
        let missing = classify(&generic("<Code>NoSuchBucket</Code>"), &l);
        assert!(missing.message().contains("no bucket backups"));
    }

    #[test]
    fn a_bad_endpoint_is_refused_before_any_request() {
        let credentials = S3Credentials {
            access_key_id: "a".into(),
            secret_access_key: "b".into(),
        };
        let mut l = location();
        l.endpoint = "s3.example:9000".into();
        assert_eq!(
            s3_store(&l, &credentials).unwrap_err().reason(),
            "InvalidDestination"
        );
        l.endpoint = "http://s3.example:9000/".into();
        assert!(s3_store(&l, &credentials).is_ok());
    }

    #[test]
    fn credentials_are_never_printed() {
        let c = S3Credentials {
            access_key_id: "AKIAEXAMPLE".into(),
            secret_access_key: "very-secret".into(),
        };
        let printed = format!("{c:?}");
        assert!(!printed.contains("AKIAEXAMPLE") && !printed.contains("very-secret"));
    }
}
