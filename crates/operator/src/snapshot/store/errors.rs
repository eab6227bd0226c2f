//! A store's errors in plain words: object_store's errors (and each store's codes in them)
//! classified into the same [`Failure`]s for every store (`Unauthorized`, `AccessDenied`,
//! `BucketNotFound`, `EndpointUnreachable`, ...), with the store named and no credential or
//! query string in the message.

use etcd_operator_api::shared::{S3SnapshotLocation, StoreKind};

use super::super::decide::Failure;

/// The name messages and `Failure`s use for a store.
pub fn store_name(kind: StoreKind) -> &'static str {
    match kind {
        StoreKind::S3 => "S3",
        StoreKind::Gcs => "GCS",
        StoreKind::Azure => "Azure",
        StoreKind::Local => "local",
        StoreKind::Pvc => "PVC",
    }
}

pub(super) fn local_io_failure(uri: &str, text: &str) -> Failure {
    let detail: String = text.chars().take(300).collect();
    if text.contains("No space left") || text.contains("os error 28") {
        Failure::NoSpace {
            uri: uri.to_string(),
            detail,
        }
    } else {
        Failure::Volume { detail }
    }
}

/// The text of an error and all its sources, for matching the store's error codes.
pub(crate) fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}

/// `text` without the query strings of the URLs in it: an Azure SAS token travels in the query
/// (`sig=...`), and reqwest's and object_store's errors quote the URL they requested.
pub fn without_queries(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (before, url) = rest.split_at(at);
        out.push_str(before);
        let end = url
            .find(|c: char| c.is_whitespace() || c == ')' || c == '"' || c == '\'' || c == '>')
            .unwrap_or(url.len());
        let (address, after) = url.split_at(end);
        match address.find('?') {
            Some(q) => {
                out.push_str(&address[..q]);
                out.push_str("?<query omitted>");
            }
            None => out.push_str(address),
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// The deepest source of an error.
pub(super) fn innermost(error: &(dyn std::error::Error + 'static)) -> String {
    let mut deepest = error;
    while let Some(inner) = deepest.source() {
        deepest = inner;
    }
    deepest.to_string()
}

/// An object_store error as the user's problem, for the store `kind` whose bucket (or
/// container, or directory) is `container` at `endpoint`. The store's own error codes decide
/// first (S3 `NoSuchBucket`, `InvalidAccessKeyId`, `SignatureDoesNotMatch`, `AccessDenied`;
/// GCS `NoSuchBucket` and "bucket does not exist"; Azure `ContainerNotFound`,
/// `AuthenticationFailed`/`AuthorizationFailure`, `AuthorizationPermissionMismatch`; a local
/// directory's I/O
/// errors), then the kind of the error (401, 403, a connection that failed).
pub fn classify_for(
    kind: StoreKind,
    container: &str,
    endpoint: &str,
    error: &object_store::Error,
) -> Failure {
    let text = without_queries(&chain(error));
    let detail = text.chars().take(300).collect::<String>();
    let has = |code: &str| text.contains(code);
    let store = store_name(kind).to_string();
    if kind == StoreKind::Local {
        return match error {
            object_store::Error::NotFound { .. } => Failure::Volume { detail },
            _ => local_io_failure(&format!("file://{container}"), &text),
        };
    }
    let bucket_missing = match kind {
        StoreKind::Azure => has("ContainerNotFound"),
        StoreKind::Gcs => {
            has("NoSuchBucket")
                || has("bucket does not exist")
                || has(super::gcs::BUCKET_NOT_FOUND_MARK)
        }
        _ => has("NoSuchBucket"),
    };
    if bucket_missing {
        let bucket = match kind {
            // `<account>/<container>`: the container is what is missing.
            StoreKind::Azure => container.rsplit('/').next().unwrap_or(container),
            _ => container,
        };
        return Failure::BucketNotFound {
            bucket: bucket.to_string(),
            store,
        };
    }
    let refused = match kind {
        // A wrong shared key or an expired SAS: Azure says AuthenticationFailed, Azurite
        // AuthorizationFailure (which Azure also says when the account's network rules
        // refuse the caller).
        StoreKind::Azure => {
            has("AuthenticationFailed")
                || has("AuthorizationFailure")
                || has("InvalidAuthenticationInfo")
                || has("NoAuthenticationInformation")
        }
        StoreKind::Gcs => has("Invalid Credentials") || has("invalid_grant"),
        _ => {
            has("InvalidAccessKeyId") || has("SignatureDoesNotMatch") || has("InvalidClientTokenId")
        }
    };
    if refused {
        return Failure::Unauthorized { store };
    }
    let denied = match kind {
        StoreKind::Azure => {
            has("AuthorizationPermissionMismatch") || has("AuthorizationResourceTypeMismatch")
        }
        _ => has("AccessDenied"),
    };
    match error {
        object_store::Error::Unauthenticated { .. } => Failure::Unauthorized { store },
        object_store::Error::PermissionDenied { .. } => Failure::AccessDenied { detail, store },
        _ if denied => Failure::AccessDenied { detail, store },
        _ if has("error sending request")
            || has("Connection refused")
            || has("connection refused")
            || has("dns error")
            || has("client error (Connect)")
            || has("operation timed out")
            || has("No route to host") =>
        {
            Failure::EndpointUnreachable {
                endpoint: endpoint.to_string(),
                // The innermost cause ("tcp connect error: Connection refused") says it best.
                detail: without_queries(&innermost(error))
                    .chars()
                    .take(200)
                    .collect(),
                store,
            }
        }
        _ => Failure::Store { detail, store },
    }
}

/// The S3 classification (kept for callers that hold an S3 location).
pub fn classify(error: &object_store::Error, location: &S3SnapshotLocation) -> Failure {
    classify_for(StoreKind::S3, &location.bucket, &location.endpoint, error)
}
