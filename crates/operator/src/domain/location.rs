//! Where a snapshot lives, in the words every capability uses: its object key in a bucket,
//! container or directory (the reference's `<key>/<name>.db`), its URI in a status
//! (`s3://`, `gs://`, `azure://`, `file://`, `pvc://`), and the Secret keys of each store's
//! credentials (also the restore agent's environment). The EtcdSnapshot controller
//! (`snapshot`), the builders of the restore containers (`build::restore`) and the planner's
//! restore rule (`plan::rules::restore`) all name snapshots through these.

use etcd_operator_api::shared::{SnapshotLocation, StoreKind};

/// Where `destination.local` may write when the operator is not told otherwise.
pub const DEFAULT_LOCAL_ROOT: &str = "/var/lib/etcd-operator/snapshots";

/// The Secret keys (and the restore agent's environment variables) of each store.
pub const S3_ACCESS_KEY_ID: &str = "AWS_ACCESS_KEY_ID";
pub const S3_SECRET_ACCESS_KEY: &str = "AWS_SECRET_ACCESS_KEY";
pub const GCS_SERVICE_ACCOUNT_KEY: &str = "GOOGLE_SERVICE_ACCOUNT_KEY";
pub const AZURE_ACCOUNT_KEY: &str = "AZURE_STORAGE_ACCOUNT_KEY";
pub const AZURE_SAS_TOKEN: &str = "AZURE_STORAGE_SAS_TOKEN";

/// The object key: `<key>/<name>.db`, as the reference names it (slashes around `key` are
/// not doubled; no key means `<name>.db` at the bucket's root).
pub fn object_key(key: Option<&str>, snapshot: &str) -> String {
    match key.map(|k| k.trim_matches('/')).filter(|k| !k.is_empty()) {
        Some(prefix) => format!("{prefix}/{snapshot}.db"),
        None => format!("{snapshot}.db"),
    }
}

/// `s3://<bucket>/<object key>`.
pub fn object_uri(bucket: &str, key: &str) -> String {
    format!("s3://{bucket}/{key}")
}

/// `pvc://<claim>/<path in the claim>`.
pub fn pvc_uri(claim: &str, relative: &str) -> String {
    format!("pvc://{claim}/{relative}")
}

/// `gs://<bucket>/<key>`, `azure://<account>/<container>/<key>`, `s3://<bucket>/<key>`.
pub fn uri_of(location: &SnapshotLocation, key: &str) -> String {
    match (
        &location.s3,
        &location.gcs,
        &location.azure,
        &location.local,
    ) {
        (Some(s3), ..) => object_uri(&s3.bucket, key),
        (_, Some(gcs), ..) => format!("gs://{}/{key}", gcs.bucket),
        (_, _, Some(azure), _) => format!("azure://{}/{}/{key}", azure.account, azure.container),
        (.., Some(local)) => format!("file://{}/{key}", local.path.trim_end_matches('/')),
        _ => String::new(),
    }
}

/// The object key a restore source names (empty when it names none); `None` for a `local`
/// source, which is not a restore source (the restoring Pod cannot read the operator's
/// directory).
pub fn source_key(location: &SnapshotLocation) -> Option<String> {
    let key = match location.store() {
        Some(StoreKind::S3) => location.s3.as_ref().and_then(|l| l.key.clone()),
        Some(StoreKind::Gcs) => location.gcs.as_ref().and_then(|l| l.key.clone()),
        Some(StoreKind::Azure) => location.azure.as_ref().and_then(|l| l.key.clone()),
        Some(StoreKind::Local) => return None,
        Some(StoreKind::Pvc) | None => None,
    }
    .unwrap_or_default();
    Some(key)
}

/// The URI of the object a restore source names, as the status records it: `pvc://` for a
/// claim, the store's URI otherwise; `None` for a `local` source.
pub fn source_uri(location: &SnapshotLocation) -> Option<String> {
    if let Some(pvc) = &location.pvc {
        return Some(pvc_uri(
            &pvc.claim_name,
            pvc.sub_path
                .as_deref()
                .unwrap_or_default()
                .trim_start_matches('/'),
        ));
    }
    source_key(location).map(|key| uri_of(location, &key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_are_named_like_the_reference() {
        assert_eq!(object_key(Some("etcd/prod"), "daily"), "etcd/prod/daily.db");
        assert_eq!(
            object_key(Some("/etcd/prod/"), "daily"),
            "etcd/prod/daily.db"
        );
        assert_eq!(object_key(Some(""), "daily"), "daily.db");
        assert_eq!(object_key(Some("/"), "daily"), "daily.db");
        assert_eq!(object_key(None, "daily"), "daily.db");
        assert_eq!(object_uri("b", "etcd/daily.db"), "s3://b/etcd/daily.db");
    }
}
