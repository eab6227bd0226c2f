//! `kubectl etcdop restore`: the new EtcdCluster a Complete EtcdSnapshot is restored into.
//!
//! The decision is a pure function of the snapshot, the cluster it was taken of (when it still
//! exists) and the flags, so every case is tested without a cluster. The operator does the
//! restore itself (`spec.bootstrap.restore`): its seed's first Pod fetches the artifact, checks
//! etcd's hash and restores it; the other members join as learners.

use etcd_operator_api::cluster::EtcdClusterTls;
use etcd_operator_api::shared::StorageMedium;
use etcd_operator_api::snapshot::SnapshotPhase;
use etcd_operator_api::{EtcdCluster, EtcdSnapshot};
use serde_json::{Value, json};

/// What the user asked for besides the snapshot.
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub replicas: Option<i32>,
    pub version: Option<String>,
    pub storage_size: Option<String>,
    pub storage_class: Option<String>,
    /// Print the manifest, create nothing: the cases that refuse to create (the source's own
    /// TLS Secrets) then give the manifest without `tls` and `auth`, to be completed by hand.
    pub dry_run: bool,
}

/// The manifest to create and what the user should know about it.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub manifest: Value,
    /// Where the snapshot is read from, as the EtcdSnapshot's artifact names it.
    pub uri: String,
    pub notes: Vec<String>,
}

/// The identity Secret an encrypted snapshot is decrypted with (its
/// `spec.encryption.age.identitySecretRef`); `None` for a snapshot stored unencrypted.
pub fn identity(snapshot: &EtcdSnapshot) -> Result<Option<Value>, String> {
    let name = snapshot.metadata.name.as_deref().unwrap_or_default();
    let encrypted = snapshot
        .status
        .as_ref()
        .is_some_and(|s| s.encryption.is_some());
    if !encrypted {
        return Ok(None);
    }
    match snapshot
        .spec
        .encryption
        .as_ref()
        .and_then(|e| e.age.identity_secret_ref.as_ref())
    {
        Some(identity) => Ok(Some(
            serde_json::to_value(identity).map_err(|e| e.to_string())?,
        )),
        None => Err(format!(
            "etcdsnapshot/{name} is encrypted with age and names no identity (spec.encryption.age.identitySecretRef): print the manifest with --dry-run -o yaml, add spec.bootstrap.restore.ageIdentitySecretRef naming a Secret key with the identity of one of its recipients, and apply it"
        )),
    }
}

/// The restore source of `spec.bootstrap.restore` for the snapshot's artifact.
pub fn source(snapshot: &EtcdSnapshot) -> Result<(Value, String), String> {
    let name = snapshot.metadata.name.as_deref().unwrap_or_default();
    let status = snapshot.status.clone().unwrap_or_default();
    if status.phase != Some(SnapshotPhase::Complete) {
        let why = status
            .failure_reason
            .or_else(|| {
                status
                    .conditions
                    .unwrap_or_default()
                    .into_iter()
                    .find(|c| c.type_ == "Ready")
                    .map(|c| c.message)
            })
            .filter(|m| !m.is_empty())
            .map(|m| format!(" ({m})"))
            .unwrap_or_default();
        let phase = status
            .phase
            .map(|p| format!("{p:?}"))
            .unwrap_or_else(|| "not started".into());
        return Err(format!(
            "etcdsnapshot/{name} is {phase}{why}: only a Complete snapshot can be restored; see kubectl get etcdsnapshots"
        ));
    }
    let Some(uri) = status.artifact.map(|a| a.uri).filter(|u| !u.is_empty()) else {
        return Err(format!(
            "etcdsnapshot/{name} is Complete but records no artifact URI; restore it by hand with spec.bootstrap.restore"
        ));
    };
    let destination = &snapshot.spec.destination;
    if let Some(rest) = uri.strip_prefix("s3://") {
        let s3 = destination.s3.as_ref().ok_or_else(|| {
            format!("etcdsnapshot/{name}'s artifact {uri} is in S3 but its destination is not")
        })?;
        let key = rest
            .strip_prefix(&format!("{}/", s3.bucket))
            .filter(|k| !k.is_empty())
            .ok_or_else(|| {
                format!(
                    "etcdsnapshot/{name}'s artifact {uri} is not in its bucket {}",
                    s3.bucket
                )
            })?;
        let mut location = json!({
            "endpoint": s3.endpoint,
            "bucket": s3.bucket,
            "key": key,
            "credentialsSecretRef": {"name": s3.credentials_secret_ref.name},
        });
        if let Some(region) = s3.region.as_deref().filter(|r| !r.is_empty()) {
            location["region"] = json!(region);
        }
        if s3.force_path_style == Some(true) {
            location["forcePathStyle"] = json!(true);
        }
        return Ok((json!({"s3": location}), uri));
    }
    if let Some(rest) = uri.strip_prefix("pvc://") {
        let pvc = destination.pvc.as_ref().ok_or_else(|| {
            format!("etcdsnapshot/{name}'s artifact {uri} is on a PVC but its destination is not")
        })?;
        let path = rest
            .strip_prefix(&format!("{}/", pvc.claim_name))
            .filter(|p| !p.is_empty())
            .ok_or_else(|| {
                format!(
                    "etcdsnapshot/{name}'s artifact {uri} is not on its claim {}",
                    pvc.claim_name
                )
            })?;
        return Ok((
            json!({"pvc": {"claimName": pvc.claim_name, "subPath": path}}),
            uri,
        ));
    }
    if uri.starts_with("gs://") || uri.starts_with("azure://") || uri.starts_with("file://") {
        let restore = destination
            .restore_source(&uri)
            .map_err(|why| format!("etcdsnapshot/{name} cannot be restored: {why}"))?;
        let location = serde_json::to_value(&restore).map_err(|e| e.to_string())?;
        return Ok((location, uri));
    }
    Err(format!(
        "etcdsnapshot/{name}'s artifact {uri} is in a store this version cannot restore from (S3, GCS, Azure and PVC only)"
    ))
}

/// Whether `tls` can be given to a cluster of another name as it is: certificates the operator
/// or cert-manager issues for the new cluster's names, never the source's own Secrets.
fn tls_portable(tls: &EtcdClusterTls) -> bool {
    let client = tls
        .client
        .as_ref()
        .is_none_or(|c| c.operator_issued.is_some() || c.cert_manager.is_some());
    let peer = tls
        .peer
        .as_ref()
        .is_none_or(|p| p.operator_issued.is_some() || p.cert_manager.is_some());
    client && peer
}

/// The new EtcdCluster `name` restored from `snapshot`, given the cluster it was taken of
/// (None when it is gone) and the flags.
pub fn plan(
    name: &str,
    namespace: &str,
    snapshot: &EtcdSnapshot,
    taken_of: Option<&EtcdCluster>,
    overrides: &Overrides,
) -> Result<Plan, String> {
    let (restore_source, uri) = source(snapshot)?;
    let source_name = snapshot.spec.cluster_ref.name.as_str();
    if name == source_name {
        return Err(format!(
            "{name} is the cluster the snapshot was taken of: a restore makes a new cluster; pick another name"
        ));
    }
    let mut notes = Vec::new();
    let status = snapshot.status.clone().unwrap_or_default();
    let source_spec = taken_of.map(|c| &c.spec);
    let version = overrides
        .version
        .clone()
        .or(status.etcd_version.clone())
        .or(source_spec.map(|s| s.version.clone()))
        .ok_or_else(|| {
            "the snapshot records no etcd version and its cluster is gone: say which with --version"
                .to_string()
        })?;
    let replicas = overrides
        .replicas
        .or(source_spec.and_then(|s| s.replicas))
        .unwrap_or(3);
    if replicas < 1 {
        return Err(format!(
            "--replicas {replicas}: a restored cluster needs at least one member"
        ));
    }
    let mut spec = json!({"replicas": replicas, "version": version});

    let mut storage = source_spec
        .and_then(|s| s.storage.clone())
        .map(|s| serde_json::to_value(s).unwrap_or(Value::Null))
        .unwrap_or_else(|| json!({}));
    if source_spec
        .and_then(|s| s.storage.as_ref())
        .and_then(|s| s.medium)
        == Some(StorageMedium::Memory)
    {
        storage["medium"] = json!("Persistent");
        notes.push(format!(
            "etcdcluster/{source_name} is memory-backed; the restored cluster is persistent (a restore needs its data to survive a restart)"
        ));
    }
    if let Some(size) = &overrides.storage_size {
        storage["size"] = json!(size);
    }
    if let Some(class) = &overrides.storage_class {
        storage["storageClassName"] = json!(class);
    }
    if storage.as_object().is_some_and(|o| !o.is_empty()) {
        spec["storage"] = storage;
    }

    match source_spec {
        Some(s) => {
            for (field, value) in [
                ("options", serde_json::to_value(&s.options)),
                ("resources", serde_json::to_value(&s.resources)),
                ("imagePullSecrets", serde_json::to_value(&s.image_pull_secrets)),
            ] {
                if let Ok(v) = value
                    && !v.is_null()
                {
                    spec[field] = v;
                }
            }
            match &s.tls {
                Some(tls) if tls_portable(tls) => {
                    spec["tls"] = serde_json::to_value(tls).unwrap_or(Value::Null);
                    if let Some(auth) = &s.auth {
                        spec["auth"] = serde_json::to_value(auth).unwrap_or(Value::Null);
                    }
                }
                Some(_) if overrides.dry_run => notes.push(format!(
                    "etcdcluster/{source_name} uses TLS Secrets of its own (issued for its names): add spec.tls with Secrets for {name}'s names{} before creating this",
                    if s.auth.is_some() {
                        ", and spec.auth (the snapshot keeps the same root user and password)"
                    } else {
                        ""
                    }
                )),
                Some(_) => {
                    return Err(format!(
                        "etcdcluster/{source_name} uses TLS Secrets of its own, issued for its names, so they cannot serve {name}: print the manifest with `kubectl etcdop restore {name} --from-snapshot {} --dry-run -o yaml`, add spec.tls with Secrets for {name}'s names (and spec.auth), and apply it",
                        snapshot.metadata.name.as_deref().unwrap_or_default()
                    ));
                }
                None => {}
            }
            notes.push(format!(
                "copied from etcdcluster/{source_name}: version (unless given), replicas, storage, options, resources, imagePullSecrets, and TLS and auth where the operator or cert-manager issues the certificates; not copied: affinity, topology spread, metadata, quorum recovery"
            ));
        }
        None => notes.push(format!(
            "etcdcluster/{source_name} is gone: defaults used besides the snapshot's etcd version; if it had TLS or auth, set spec.tls and spec.auth (the same root password) with --dry-run -o yaml and apply"
        )),
    }
    let mut restore = json!({"source": restore_source});
    if let Some(identity) = identity(snapshot)? {
        restore["ageIdentitySecretRef"] = identity;
    }
    spec["bootstrap"] = json!({"restore": restore});
    let manifest = json!({
        "apiVersion": "etcd-operator.cozystack.io/v1alpha2",
        "kind": "EtcdCluster",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    });
    Ok(Plan {
        manifest,
        uri,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(phase: &str, uri: &str, destination: Value) -> EtcdSnapshot {
        serde_json::from_value(json!({
            "apiVersion": "etcd-operator.cozystack.io/v1alpha2",
            "kind": "EtcdSnapshot",
            "metadata": {"name": "nightly", "namespace": "prod"},
            "spec": {"clusterRef": {"name": "main"}, "destination": destination},
            "status": {
                "phase": phase,
                "artifact": {"uri": uri, "sizeBytes": 20480, "checksum": "sha256:00"},
                "etcdVersion": "3.5.1",
                "revision": 42,
                "failureReason": "the S3 credentials were refused",
            },
        }))
        .unwrap()
    }

    fn s3_destination() -> Value {
        json!({"s3": {"endpoint": "http://minio:9000", "bucket": "backups", "key": "etcd/",
            "region": "eu-1", "forcePathStyle": true,
            "credentialsSecretRef": {"name": "s3-creds"}}})
    }

    fn cluster(spec: Value) -> EtcdCluster {
        serde_json::from_value(json!({
            "apiVersion": "etcd-operator.cozystack.io/v1alpha2",
            "kind": "EtcdCluster",
            "metadata": {"name": "main", "namespace": "prod"},
            "spec": spec,
        }))
        .unwrap()
    }

    #[test]
    fn an_s3_snapshot_becomes_an_exact_key_with_the_destinations_access() {
        let s = snapshot("Complete", "s3://backups/etcd/nightly.db", s3_destination());
        let (source, uri) = source(&s).unwrap();
        assert_eq!(uri, "s3://backups/etcd/nightly.db");
        assert_eq!(
            source,
            json!({"s3": {"endpoint": "http://minio:9000", "bucket": "backups",
                "key": "etcd/nightly.db", "region": "eu-1", "forcePathStyle": true,
                "credentialsSecretRef": {"name": "s3-creds"}}})
        );
    }

    #[test]
    fn gcs_and_azure_snapshots_become_exact_keys_and_local_ones_are_refused() {
        let gcs = snapshot(
            "Complete",
            "gs://gbackups/etcd/nightly.db",
            json!({"gcs": {"bucket": "gbackups", "key": "etcd", "endpoint": "http://gcs:4443",
                "credentialsSecretRef": {"name": "gcs-key"}}}),
        );
        let (source_of_gcs, uri) = source(&gcs).unwrap();
        assert_eq!(uri, "gs://gbackups/etcd/nightly.db");
        assert_eq!(
            source_of_gcs,
            json!({"gcs": {"bucket": "gbackups", "key": "etcd/nightly.db",
                "endpoint": "http://gcs:4443", "credentialsSecretRef": {"name": "gcs-key"}}})
        );
        let azure = snapshot(
            "Complete",
            "azure://acct/etcd/prod/nightly.db",
            json!({"azure": {"account": "acct", "container": "etcd", "key": "prod/",
                "credentialsSecretRef": {"name": "azure-key"}}}),
        );
        let (source_of_azure, _) = source(&azure).unwrap();
        assert_eq!(
            source_of_azure,
            json!({"azure": {"account": "acct", "container": "etcd", "key": "prod/nightly.db",
                "credentialsSecretRef": {"name": "azure-key"}}})
        );
        let elsewhere = snapshot(
            "Complete",
            "azure://acct/other/nightly.db",
            json!({"azure": {"account": "acct", "container": "etcd",
                "credentialsSecretRef": {"name": "azure-key"}}}),
        );
        assert!(
            source(&elsewhere)
                .unwrap_err()
                .contains("not in the destination's container acct/etcd")
        );
        let local = snapshot(
            "Complete",
            "file:///var/lib/etcd-operator/snapshots/nightly.db",
            json!({"local": {"path": "/var/lib/etcd-operator/snapshots"}}),
        );
        let refused = source(&local).unwrap_err();
        assert!(
            refused.contains("the restoring Pod cannot read") && refused.contains("source.pvc"),
            "{refused}"
        );
    }

    #[test]
    fn an_encrypted_snapshot_brings_its_identity_or_says_what_to_add() {
        let mut s = snapshot("Complete", "s3://backups/etcd/nightly.db", s3_destination());
        assert_eq!(identity(&s), Ok(None), "not encrypted");
        s.status.as_mut().unwrap().encryption =
            Some(etcd_operator_api::snapshot::SnapshotEncryptionStatus {
                method: "age".into(),
                recipients: vec!["sha256:0123456789abcdef".into()],
            });
        let err = identity(&s).unwrap_err();
        assert!(err.contains("ageIdentitySecretRef"), "{err}");
        s.spec.encryption = Some(etcd_operator_api::snapshot::SnapshotEncryption {
            age: etcd_operator_api::snapshot::AgeEncryption {
                recipients_secret_ref: etcd_operator_api::snapshot::SecretKeyRef {
                    name: "age".into(),
                    key: None,
                },
                identity_secret_ref: Some(etcd_operator_api::snapshot::SecretKeyRef {
                    name: "age-id".into(),
                    key: Some("key".into()),
                }),
            },
        });
        assert_eq!(
            identity(&s),
            Ok(Some(json!({"name": "age-id", "key": "key"})))
        );
    }

    #[test]
    fn a_pvc_snapshot_becomes_its_claim_and_file() {
        let s = snapshot(
            "Complete",
            "pvc://backups/etcd/nightly/nightly.db",
            json!({"pvc": {"claimName": "backups", "subPath": "etcd/nightly"}}),
        );
        let (source, _) = source(&s).unwrap();
        assert_eq!(
            source,
            json!({"pvc": {"claimName": "backups", "subPath": "etcd/nightly/nightly.db"}})
        );
    }

    #[test]
    fn only_a_complete_snapshot_with_an_artifact_in_its_own_store_is_restored() {
        let failed = snapshot("Failed", "s3://backups/etcd/nightly.db", s3_destination());
        let err = source(&failed).unwrap_err();
        assert!(
            err.contains("is Failed (the S3 credentials were refused)"),
            "{err}"
        );
        let running = snapshot("Started", "", s3_destination());
        assert!(source(&running).unwrap_err().contains("is Started"));
        let elsewhere = snapshot("Complete", "s3://other/etcd/nightly.db", s3_destination());
        assert!(
            source(&elsewhere)
                .unwrap_err()
                .contains("not in its bucket backups")
        );
        let mixed = snapshot("Complete", "pvc://backups/x.db", s3_destination());
        assert!(source(&mixed).unwrap_err().contains("destination is not"));
        let unknown = snapshot("Complete", "gs://b/x.db", s3_destination());
        assert!(
            source(&unknown)
                .unwrap_err()
                .contains("is not in the destination's store (s3://...)")
        );
        let ftp = snapshot("Complete", "ftp://b/x.db", s3_destination());
        assert!(
            source(&ftp)
                .unwrap_err()
                .contains("S3, GCS, Azure and PVC only")
        );
        let empty = snapshot("Complete", "", s3_destination());
        assert!(source(&empty).unwrap_err().contains("no artifact URI"));
    }

    #[test]
    fn the_new_cluster_copies_what_is_not_bound_to_the_old_name() {
        let s = snapshot("Complete", "s3://backups/etcd/nightly.db", s3_destination());
        let main = cluster(json!({
            "replicas": 5, "version": "3.5.1",
            "storage": {"size": "8Gi", "storageClassName": "fast"},
            "options": {"quotaBackendBytes": 4294967296_i64},
            "tls": {"client": {"operatorIssued": {}}, "peer": {"operatorIssued": {}}},
            "auth": {"enabled": true, "rootCredentialsSecretRef": {"name": "root"}},
            "affinity": {"podAntiAffinity": {}},
        }));
        let p = plan(
            "main-restored",
            "prod",
            &s,
            Some(&main),
            &Overrides::default(),
        )
        .unwrap();
        let spec = &p.manifest["spec"];
        assert_eq!(spec["replicas"], 5);
        assert_eq!(spec["version"], "3.5.1");
        assert_eq!(spec["storage"]["size"], "8Gi");
        assert_eq!(spec["storage"]["storageClassName"], "fast");
        assert_eq!(spec["options"]["quotaBackendBytes"], 4294967296_i64);
        assert_eq!(spec["tls"]["client"]["operatorIssued"], json!({}));
        assert_eq!(spec["auth"]["rootCredentialsSecretRef"]["name"], "root");
        assert!(spec.get("affinity").is_none());
        assert_eq!(
            spec["bootstrap"]["restore"]["source"]["s3"]["key"],
            "etcd/nightly.db"
        );
        assert_eq!(p.manifest["metadata"]["name"], "main-restored");
        // It parses as an EtcdCluster.
        let parsed: EtcdCluster = serde_json::from_value(p.manifest.clone()).unwrap();
        assert_eq!(parsed.spec.replicas, Some(5));

        let flags = Overrides {
            replicas: Some(1),
            version: Some("3.5.0".into()),
            storage_size: Some("2Gi".into()),
            storage_class: Some("slow".into()),
            dry_run: false,
        };
        let p = plan("main-restored", "prod", &s, Some(&main), &flags).unwrap();
        let spec = &p.manifest["spec"];
        assert_eq!(spec["replicas"], 1);
        assert_eq!(spec["version"], "3.5.0");
        assert_eq!(spec["storage"]["size"], "2Gi");
        assert_eq!(spec["storage"]["storageClassName"], "slow");
    }

    #[test]
    fn a_memory_backed_source_restores_onto_persistent_storage() {
        let s = snapshot("Complete", "s3://backups/etcd/nightly.db", s3_destination());
        let main = cluster(json!({"version": "3.5.1",
            "storage": {"medium": "Memory", "size": "1Gi"}}));
        let p = plan("copy", "prod", &s, Some(&main), &Overrides::default()).unwrap();
        assert_eq!(p.manifest["spec"]["storage"]["medium"], "Persistent");
        assert_eq!(p.manifest["spec"]["storage"]["size"], "1Gi");
        assert!(p.notes.iter().any(|n| n.contains("memory-backed")));
    }

    #[test]
    fn the_sources_own_tls_secrets_are_never_reused() {
        let s = snapshot("Complete", "s3://backups/etcd/nightly.db", s3_destination());
        let main = cluster(json!({"version": "3.5.1",
            "tls": {"client": {"serverSecretRef": {"name": "main-server"}}},
            "auth": {"enabled": true, "rootCredentialsSecretRef": {"name": "root"}}}));
        let err = plan("copy", "prod", &s, Some(&main), &Overrides::default()).unwrap_err();
        assert!(err.contains("--dry-run -o yaml") && err.contains("Secrets for copy's names"));
        let dry = Overrides {
            dry_run: true,
            ..Default::default()
        };
        let p = plan("copy", "prod", &s, Some(&main), &dry).unwrap();
        assert!(p.manifest["spec"].get("tls").is_none());
        assert!(p.manifest["spec"].get("auth").is_none());
        assert!(p.notes.iter().any(|n| n.contains("add spec.tls")));
    }

    #[test]
    fn without_the_source_cluster_the_snapshot_gives_the_version() {
        let mut s = snapshot("Complete", "s3://backups/etcd/nightly.db", s3_destination());
        let p = plan("copy", "prod", &s, None, &Overrides::default()).unwrap();
        assert_eq!(p.manifest["spec"]["version"], "3.5.1");
        assert_eq!(p.manifest["spec"]["replicas"], 3);
        assert!(p.notes.iter().any(|n| n.contains("is gone")));
        s.status.as_mut().unwrap().etcd_version = None;
        let err = plan("copy", "prod", &s, None, &Overrides::default()).unwrap_err();
        assert!(err.contains("--version"), "{err}");
        assert!(
            plan("main", "prod", &s, None, &Overrides::default())
                .unwrap_err()
                .contains("pick another name")
        );
        let zero = Overrides {
            replicas: Some(0),
            version: Some("3.5.1".into()),
            ..Default::default()
        };
        assert!(
            plan("copy", "prod", &s, None, &zero)
                .unwrap_err()
                .contains("at least one member")
        );
    }
}
