use std::collections::BTreeMap;

use etcd_operator_api::shared::{
    AzureSnapshotLocation, GcsSnapshotLocation, LocalSnapshotLocation, PvcSnapshotLocation,
    S3SnapshotLocation, SnapshotLocation, StoreKind,
};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::LocalObjectReference;

use super::*;

fn s3_location() -> S3SnapshotLocation {
    S3SnapshotLocation {
        endpoint: "http://s3.example:9000".into(),
        bucket: "backups".into(),
        credentials_secret_ref: LocalObjectReference {
            name: "s3-credentials".into(),
        },
        ..Default::default()
    }
}

fn s3(key: Option<&str>) -> SnapshotLocation {
    SnapshotLocation {
        s3: Some(S3SnapshotLocation {
            key: key.map(str::to_string),
            ..s3_location()
        }),
        ..Default::default()
    }
}

fn gcs(key: Option<&str>) -> SnapshotLocation {
    SnapshotLocation {
        gcs: Some(GcsSnapshotLocation {
            bucket: "gbackups".into(),
            key: key.map(str::to_string),
            endpoint: Some("http://gcs.example:4443/".into()),
            credentials_secret_ref: LocalObjectReference {
                name: "gcs-credentials".into(),
            },
        }),
        ..Default::default()
    }
}

fn azure(key: Option<&str>) -> SnapshotLocation {
    SnapshotLocation {
        azure: Some(AzureSnapshotLocation {
            account: "devstoreaccount1".into(),
            container: "etcd".into(),
            key: key.map(str::to_string),
            endpoint: Some("http://azurite.example:10000/devstoreaccount1".into()),
            credentials_secret_ref: LocalObjectReference {
                name: "azure-credentials".into(),
            },
        }),
        ..Default::default()
    }
}

fn local(path: &str) -> SnapshotLocation {
    SnapshotLocation {
        local: Some(LocalSnapshotLocation { path: path.into() }),
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
    let l = s3_location();
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
    assert!(missing.message().contains("destination.s3.bucket"));
}

#[test]
fn azure_answers_become_sentences() {
    let c = |error: object_store::Error| {
        classify_for(
            StoreKind::Azure,
            "devstoreaccount1/etcd",
            "http://azurite:10000/devstoreaccount1",
            &error,
        )
    };
    let denied = |body: &str| object_store::Error::PermissionDenied {
        path: "k".into(),
        source: body.to_string().into(),
    };
    // Azurite's and Azure's answer to a wrong account key or an expired SAS.
    let wrong = c(denied(
        "<Error><Code>AuthenticationFailed</Code><Message>Server failed to authenticate the request.</Message></Error>",
    ));
    assert_eq!(wrong.reason(), "Unauthorized");
    assert!(
        wrong
            .message()
            .starts_with("the Azure credentials were refused"),
        "{}",
        wrong.message()
    );
    assert!(wrong.message().contains("AZURE_STORAGE_ACCOUNT_KEY"));
    // Azurite's answer to a wrong key.
    assert_eq!(
        c(denied("<Error><Code>AuthorizationFailure</Code></Error>")).reason(),
        "Unauthorized"
    );
    assert_eq!(
        c(denied("<Code>AuthorizationPermissionMismatch</Code>")).reason(),
        "AccessDenied"
    );
    // A bare 403 (a HEAD) is a missing permission until the body says otherwise.
    assert_eq!(c(denied("403 Forbidden")).reason(), "AccessDenied");
    let missing = c(object_store::Error::NotFound {
        path: "k".into(),
        source: "<Code>ContainerNotFound</Code>".to_string().into(),
    });
    assert_eq!(missing.reason(), "BucketNotFound");
    assert!(
        missing
            .message()
            .starts_with("container not found: the store has no container etcd"),
        "{}",
        missing.message()
    );
    let unreachable = c(generic(
        "error sending request for url (http://azurite:10000/devstoreaccount1/etcd/x.db)",
    ));
    assert_eq!(unreachable.reason(), "EndpointUnreachable");
    assert!(unreachable.message().contains("the Azure endpoint"));
    assert!(unreachable.message().contains("destination.azure.endpoint"));
    // S3's codes mean nothing to Azure, and the other way round.
    assert_eq!(
        c(generic("<Code>NoSuchBucket</Code>")).reason(),
        "StoreError"
    );
}

#[test]
fn gcs_answers_become_sentences() {
    let c = |error: object_store::Error| {
        classify_for(StoreKind::Gcs, "gbackups", "http://gcs:4443", &error)
    };
    let refused = c(object_store::Error::Unauthenticated {
        path: "k".into(),
        source: "401 Unauthorized: Invalid Credentials".to_string().into(),
    });
    assert_eq!(refused.reason(), "Unauthorized");
    assert!(refused.message().contains("GOOGLE_SERVICE_ACCOUNT_KEY"));
    assert_eq!(
        c(object_store::Error::PermissionDenied {
            path: "k".into(),
            source: "403: does not have storage.objects.create access"
                .to_string()
                .into(),
        })
        .reason(),
        "AccessDenied"
    );
    // Opening a resumable upload in a bucket that does not exist.
    let missing = c(gcs::error(http::StatusCode::NOT_FOUND, "k", "", true));
    assert_eq!(missing.reason(), "BucketNotFound");
    assert!(missing.message().contains("no bucket gbackups"));
    assert!(missing.message().contains("destination.gcs.bucket"));
    let json_missing = c(generic(
        "404: {\"error\":{\"message\":\"The specified bucket does not exist.\"}}",
    ));
    assert_eq!(json_missing.reason(), "BucketNotFound");
    assert_eq!(
        c(generic(
            "client error (Connect): tcp connect error: Connection refused"
        ))
        .reason(),
        "EndpointUnreachable"
    );
}

#[test]
fn local_answers_become_sentences() {
    let c = |text: &str| {
        classify_for(
            StoreKind::Local,
            "/var/lib/etcd-operator/snapshots/prod",
            "/var/lib/etcd-operator/snapshots/prod",
            &object_store::Error::Generic {
                store: "LocalFileSystem",
                source: text.to_string().into(),
            },
        )
    };
    let full = c("Unable to copy data to file: No space left on device (os error 28)");
    assert_eq!(full.reason(), "NoSpace");
    assert!(
        full.message()
            .contains("file:///var/lib/etcd-operator/snapshots/prod"),
        "{}",
        full.message()
    );
    assert_eq!(
        c("Unable to open file: Permission denied (os error 13)").reason(),
        "VolumeError"
    );
    assert_eq!(
        c("Read-only file system (os error 30)").reason(),
        "VolumeError"
    );
}

#[test]
fn objects_are_named_per_store() {
    let t = target(&s3(Some("prod/etcd/")), "nightly").unwrap();
    assert_eq!(t.key, "prod/etcd/nightly.db");
    assert_eq!(t.uri, "s3://backups/prod/etcd/nightly.db");
    assert_eq!(t.path.as_ref(), "prod/etcd/nightly.db");
    let t = target(&gcs(Some("prod")), "nightly").unwrap();
    assert_eq!(t.uri, "gs://gbackups/prod/nightly.db");
    let t = target(&gcs(None), "nightly").unwrap();
    assert_eq!(t.uri, "gs://gbackups/nightly.db");
    let t = target(&azure(Some("/prod/")), "nightly").unwrap();
    assert_eq!(t.key, "prod/nightly.db");
    assert_eq!(t.uri, "azure://devstoreaccount1/etcd/prod/nightly.db");
    // A local store is rooted at its directory: the key is the file's name.
    let t = target(&local("/var/lib/etcd-operator/snapshots/prod/"), "nightly").unwrap();
    assert_eq!(t.key, "nightly.db");
    assert_eq!(
        t.uri,
        "file:///var/lib/etcd-operator/snapshots/prod/nightly.db"
    );
    let pvc = SnapshotLocation {
        pvc: Some(PvcSnapshotLocation {
            claim_name: "c".into(),
            sub_path: None,
        }),
        ..Default::default()
    };
    assert_eq!(
        target(&pvc, "x").unwrap_err().reason(),
        "InvalidDestination"
    );
    let both = SnapshotLocation {
        gcs: gcs(None).gcs,
        ..azure(None)
    };
    assert_eq!(
        target(&both, "x").unwrap_err().reason(),
        "InvalidDestination"
    );
}

#[test]
fn restore_sources_name_their_exact_object() {
    assert_eq!(
        source(&gcs(Some("prod/nightly.db"))).unwrap().uri,
        "gs://gbackups/prod/nightly.db"
    );
    assert_eq!(
        source(&azure(Some("prod/nightly.db")))
            .unwrap()
            .path
            .as_ref(),
        "prod/nightly.db"
    );
    assert_eq!(
        source(&s3(Some("a/b.db"))).unwrap().uri,
        "s3://backups/a/b.db"
    );
    let refused = source(&local("/var/lib/etcd-operator/snapshots/x.db")).unwrap_err();
    assert!(
        refused.message().contains("cannot read"),
        "{}",
        refused.message()
    );
}

fn secret(pairs: &[(&str, &str)]) -> BTreeMap<String, ByteString> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
        .collect()
}

#[test]
fn credentials_come_from_the_secret_each_store_names() {
    let ok = credentials_from_secret(
        &gcs(None),
        "prod",
        Some(&secret(&[("GOOGLE_SERVICE_ACCOUNT_KEY", "{\"k\":1}\n")])),
    )
    .unwrap();
    assert!(
        matches!(ok, StoreCredentials::Gcs { service_account_key } if service_account_key == "{\"k\":1}")
    );
    let missing_key = credentials_from_secret(
        &gcs(None),
        "prod",
        Some(&secret(&[("AWS_ACCESS_KEY_ID", "x")])),
    )
    .unwrap_err();
    assert_eq!(missing_key.reason(), "CredentialsSecretInvalid");
    assert!(
        missing_key
            .message()
            .contains("gcs-credentials has no (or an empty) key GOOGLE_SERVICE_ACCOUNT_KEY"),
        "{}",
        missing_key.message()
    );
    let no_secret = credentials_from_secret(&azure(None), "prod", None).unwrap_err();
    assert!(
        no_secret.message().contains(
            "the credentials Secret azure-credentials (destination.azure.credentialsSecretRef) does not exist in namespace prod"
        ),
        "{}",
        no_secret.message()
    );
    // Azure: the account key, a SAS token, or both; neither is refused.
    let sas = credentials_from_secret(
        &azure(None),
        "prod",
        Some(&secret(&[("AZURE_STORAGE_SAS_TOKEN", "?sv=2022&sig=x")])),
    )
    .unwrap();
    assert!(matches!(
        sas,
        StoreCredentials::Azure {
            account_key: None,
            sas_token: Some(_)
        }
    ));
    let neither = credentials_from_secret(&azure(None), "prod", Some(&secret(&[]))).unwrap_err();
    assert!(
        neither
            .message()
            .contains("neither AZURE_STORAGE_ACCOUNT_KEY nor AZURE_STORAGE_SAS_TOKEN"),
        "{}",
        neither.message()
    );
    // S3 as before; a local directory needs no Secret.
    assert!(matches!(
        credentials_from_secret(
            &s3(None),
            "prod",
            Some(&secret(&[
                ("AWS_ACCESS_KEY_ID", "a"),
                ("AWS_SECRET_ACCESS_KEY", "b")
            ]))
        )
        .unwrap(),
        StoreCredentials::S3(_)
    ));
    assert!(matches!(
        credentials_from_secret(&local("/x"), "prod", None).unwrap(),
        StoreCredentials::None
    ));
}

#[test]
fn local_paths_stay_under_the_root() {
    let root = std::path::Path::new("/var/lib/etcd-operator/snapshots");
    assert!(local_path_allowed("/var/lib/etcd-operator/snapshots", root).is_ok());
    assert!(local_path_allowed("/var/lib/etcd-operator/snapshots/prod/etcd", root).is_ok());
    for bad in [
        "relative/dir",
        "/var/lib/etcd-operator/snapshots/../../etc",
        "/var/lib/etcd-operator/snapshots-other",
        "/etc",
    ] {
        assert!(local_path_allowed(bad, root).is_err(), "{bad}");
    }
    let outside = local_path_allowed("/etc", root).unwrap_err();
    assert!(outside.contains("--local-store-root"), "{outside}");
}

#[test]
fn a_local_store_without_its_volume_says_so() {
    let settings = StoreSettings {
        local_root: "/nonexistent/etcd-operator-test-root".into(),
    };
    let failure = open(
        &local("/nonexistent/etcd-operator-test-root/prod"),
        &StoreCredentials::None,
        &settings,
    )
    .unwrap_err();
    assert_eq!(failure.reason(), "InvalidDestination");
    assert!(
        failure.message().contains("mount a volume there"),
        "{}",
        failure.message()
    );
}

#[test]
fn bad_endpoints_and_keys_are_refused_before_any_request() {
    let credentials = S3Credentials {
        access_key_id: "a".into(),
        secret_access_key: "b".into(),
    };
    let mut l = s3_location();
    l.endpoint = "s3.example:9000".into();
    assert_eq!(
        s3_store(&l, &credentials).unwrap_err().reason(),
        "InvalidDestination"
    );
    l.endpoint = "http://s3.example:9000/".into();
    assert!(s3_store(&l, &credentials).is_ok());

    let gcs_key = |key: &str| {
        open(
            &gcs(None),
            &StoreCredentials::Gcs {
                service_account_key: key.into(),
            },
            &StoreSettings::default(),
        )
    };
    let not_json = gcs_key("-----BEGIN PRIVATE KEY-----\nMIIEsecret").unwrap_err();
    assert_eq!(not_json.reason(), "CredentialsSecretInvalid");
    assert!(
        !not_json.message().contains("MIIE"),
        "{}",
        not_json.message()
    );
    let not_rsa =
        gcs_key(r#"{"private_key": "not a key", "private_key_id": "1", "client_email": "a@b"}"#)
            .unwrap_err();
    assert_eq!(
        not_rsa.reason(),
        "CredentialsSecretInvalid",
        "{}",
        not_rsa.message()
    );

    let azure_key = |key: &str| {
        open(
            &azure(None),
            &StoreCredentials::Azure {
                account_key: Some(key.into()),
                sas_token: None,
            },
            &StoreSettings::default(),
        )
    };
    assert_eq!(
        azure_key("not base64 !!").unwrap_err().reason(),
        "CredentialsSecretInvalid"
    );
    assert!(azure_key("c2VjcmV0").is_ok());
    let mut bad = azure(None);
    bad.azure.as_mut().unwrap().endpoint = Some("azurite:10000".into());
    assert_eq!(
        open(
            &bad,
            &StoreCredentials::Azure {
                account_key: Some("c2VjcmV0".into()),
                sas_token: None
            },
            &StoreSettings::default()
        )
        .unwrap_err()
        .reason(),
        "InvalidDestination"
    );
}

#[test]
fn azure_metadata_names_have_no_dashes() {
    assert_eq!(
        metadata_key(StoreKind::Azure, super::UID_METADATA),
        "etcd_snapshot_uid"
    );
    assert_eq!(
        metadata_key(StoreKind::Gcs, super::UID_METADATA),
        "etcd-snapshot-uid"
    );
}

#[test]
fn credentials_are_never_printed() {
    let c = S3Credentials {
        access_key_id: "AKIAEXAMPLE".into(),
        secret_access_key: "very-secret".into(),
    };
    let printed = format!("{c:?}");
    assert!(!printed.contains("AKIAEXAMPLE") && !printed.contains("very-secret"));
    let g = StoreCredentials::Gcs {
        service_account_key: "PRIVATE".into(),
    };
    assert!(!format!("{g:?}").contains("PRIVATE"));
}

#[test]
fn sas_tokens_never_reach_a_message() {
    let text = "error sending request for url (http://azurite:10000/acct/etcd/k.db?sv=2022-11-02&sig=SECRETSIG&se=2030) Connection refused";
    let clean = without_queries(text);
    assert!(!clean.contains("SECRETSIG"), "{clean}");
    assert!(
        clean.contains("http://azurite:10000/acct/etcd/k.db?<query omitted>) Connection refused"),
        "{clean}"
    );
    assert_eq!(without_queries("no url here"), "no url here");
    let failure = classify_for(
        StoreKind::Azure,
        "acct/etcd",
        "http://azurite:10000/acct",
        &generic(text),
    );
    assert_eq!(failure.reason(), "EndpointUnreachable");
    assert!(
        !failure.message().contains("SECRETSIG"),
        "{}",
        failure.message()
    );
    let other = classify_for(
        StoreKind::Azure,
        "acct/etcd",
        "http://azurite:10000/acct",
        &generic(
            "Server returned 500 for PUT https://acct.blob.core.windows.net/etcd/k.db?comp=block&sig=SECRETSIG",
        ),
    );
    assert!(
        !other.message().contains("SECRETSIG"),
        "{}",
        other.message()
    );
}
