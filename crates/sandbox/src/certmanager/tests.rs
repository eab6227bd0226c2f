//! The pure parts: keys in each encoding, certificates signed and read back, a Certificate
//! evaluated against its Secret, renewal times, the request's checks and the issuers'.

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use serde_json::json;

use super::certificates::{self, desired_secret, evaluate, issue, secret_up_to_date};
use super::issuers::{self, Signer};
use super::pki::{KeyAlgorithm, KeyEncoding, ParsedCertificate, PrivateKey, pem_blocks};
use super::request::request;
use super::types::{Certificate, IssuerSpec};

fn certificate(spec: serde_json::Value) -> Certificate {
    serde_json::from_value(json!({
        "apiVersion": "cert-manager.io/v1", "kind": "Certificate",
        "metadata": {"name": "web", "namespace": "default", "uid": "u1", "generation": 1},
        "spec": spec,
    }))
    .unwrap()
}

fn self_signed() -> Signer {
    Signer::SelfSigned {
        crl_distribution_points: Vec::new(),
    }
}

/// The Secret the controller would write for `certificate` and `issued`.
fn secret_for(certificate: &Certificate, issued: &certificates::Issued) -> Secret {
    let request = request(&certificate.spec).unwrap();
    let desired = desired_secret(
        certificate,
        &request,
        issued.tls_crt.as_bytes(),
        issued.tls_key.as_bytes(),
        Some(issued.ca_crt.as_bytes()),
        None,
    )
    .unwrap();
    let mut secret: Secret = serde_json::from_value(desired).unwrap();
    assert!(secret_up_to_date(
        &secret,
        &serde_json::to_value(&secret).unwrap()
    ));
    secret.string_data = None;
    secret
}

#[test]
fn keys_are_written_and_read_in_each_encoding() {
    for algorithm in [
        KeyAlgorithm::Ecdsa(256),
        KeyAlgorithm::Ecdsa(384),
        KeyAlgorithm::Ed25519,
    ] {
        let key = PrivateKey::generate(algorithm).unwrap();
        for (encoding, label) in [
            (KeyEncoding::Pkcs1, "EC PRIVATE KEY"),
            (KeyEncoding::Pkcs8, "PRIVATE KEY"),
        ] {
            let pem = key.pem(encoding).unwrap();
            let expected = if algorithm == KeyAlgorithm::Ed25519 {
                "PRIVATE KEY"
            } else {
                label
            };
            assert!(
                pem.starts_with(&format!("-----BEGIN {expected}-----\n")),
                "{pem}"
            );
            let read = PrivateKey::from_pem(pem.as_bytes()).unwrap();
            assert_eq!(read.algorithm, algorithm);
            assert_eq!(read.public_key_raw(), key.public_key_raw());
        }
    }
    // RSA keys come from openssl (installed with the test dependencies); ring signs with them.
    let rsa = PrivateKey::generate(KeyAlgorithm::Rsa(2048)).expect("openssl makes RSA keys");
    assert_eq!(rsa.algorithm, KeyAlgorithm::Rsa(2048));
    for (encoding, label) in [
        (KeyEncoding::Pkcs1, "RSA PRIVATE KEY"),
        (KeyEncoding::Pkcs8, "PRIVATE KEY"),
    ] {
        let pem = rsa.pem(encoding).unwrap();
        assert!(
            pem.starts_with(&format!("-----BEGIN {label}-----\n")),
            "{pem}"
        );
        let read = PrivateKey::from_pem(pem.as_bytes()).unwrap();
        assert_eq!(read.public_key_raw(), rsa.public_key_raw());
    }
    let p521 = PrivateKey::generate(KeyAlgorithm::Ecdsa(521)).unwrap_err();
    assert!(
        p521.contains("ECDSA keys of size 521 are not supported"),
        "{p521}"
    );
}

#[test]
fn a_ca_signs_a_leaf_that_reads_back_as_requested() {
    let now = Timestamp::now();
    let ca_certificate = certificate(json!({
        "secretName": "ca", "commonName": "root", "isCA": true,
        "issuerRef": {"name": "selfsigned", "kind": "ClusterIssuer"},
    }));
    let ca = issue(
        &request(&ca_certificate.spec).unwrap(),
        &self_signed(),
        None,
        now,
    )
    .unwrap();
    assert_eq!(ca.ca_crt, ca.tls_crt);
    let ca_secret = secret_for(&ca_certificate, &ca);
    let state = issuers::evaluate(
        &IssuerSpec {
            ca: Some(super::types::CaIssuer {
                secret_name: "ca".into(),
                ..Default::default()
            }),
            ..Default::default()
        },
        "Issuer 'default/ca'",
        "default",
        Some(&ca_secret),
    );
    assert_eq!(state.reason, "KeyPairVerified");
    let signer = state.signer.clone().unwrap();

    let leaf_certificate = certificate(json!({
        "secretName": "web-tls", "commonName": "web",
        "dnsNames": ["web.example", "*.web.example"], "ipAddresses": ["10.0.0.1", "::1"],
        "uris": ["spiffe://cluster/web"], "emailAddresses": ["ops@example.com"],
        "subject": {"organizations": ["example"], "countries": ["NL"]},
        "usages": ["server auth", "client auth", "ipsec user", "digital signature"],
        "duration": "1h",
        "issuerRef": {"name": "ca"},
    }));
    let leaf_request = request(&leaf_certificate.spec).unwrap();
    let leaf = issue(&leaf_request, &signer, None, now).unwrap();
    assert_eq!(leaf.ca_crt, ca.tls_crt, "ca.crt is the CA");
    assert_eq!(
        pem_blocks(leaf.tls_crt.as_bytes()).unwrap().len(),
        1,
        "a self-signed root stays out of the chain"
    );
    let parsed = ParsedCertificate::chain_from_pem(leaf.tls_crt.as_bytes())
        .unwrap()
        .remove(0);
    assert!(leaf_request.mismatches(&parsed).is_empty(), "{parsed:#?}");
    assert_eq!(parsed.subject.organizations, ["example"]);
    assert!(!parsed.is_ca);
    assert_eq!(
        parsed.not_after.duration_since(parsed.not_before),
        SignedDuration::from_hours(1)
    );
    assert!(!parsed.self_issued);

    // Each change of what is asked for shows as the field cert-manager names.
    for (change, field) in [
        (json!({"dnsNames": ["web.example"]}), "spec.dnsNames"),
        (
            json!({"ipAddresses": ["10.0.0.2", "::1"]}),
            "spec.ipAddresses",
        ),
        (json!({"commonName": "other"}), "spec.commonName"),
        (json!({"usages": ["server auth"]}), "spec.usages"),
        (json!({"isCA": true}), "spec.isCA"),
        (json!({"duration": "2h"}), "spec.duration"),
        (
            json!({"subject": {"organizations": ["other"], "countries": ["NL"]}}),
            "spec.subject",
        ),
    ] {
        let mut spec = serde_json::to_value(&leaf_certificate.spec).unwrap();
        for (key, value) in change.as_object().unwrap() {
            spec[key] = value.clone();
        }
        let changed = certificate(spec);
        let fields = request(&changed.spec).unwrap().mismatches(&parsed);
        let expected: &[&str] = if field == "spec.isCA" {
            &["spec.isCA", "spec.usages"] // isCA adds `cert sign`
        } else {
            &[field]
        };
        assert_eq!(fields, expected, "after {change}");
    }
    // The same names in another order are the same request.
    let mut spec = serde_json::to_value(&leaf_certificate.spec).unwrap();
    spec["dnsNames"] = json!(["*.web.example", "web.example"]);
    assert!(
        request(&certificate(spec).spec)
            .unwrap()
            .mismatches(&parsed)
            .is_empty()
    );
}

#[test]
fn a_certificate_is_ready_until_it_is_due_and_says_why_it_is_not() {
    let now = Timestamp::now();
    let web = certificate(json!({
        "secretName": "web-tls", "dnsNames": ["web.example"], "duration": "30s", "renewBefore": "10s",
        "issuerRef": {"name": "selfsigned", "kind": "ClusterIssuer"},
    }));
    let missing = evaluate(&web, None, now);
    assert_eq!(missing.not_ready.as_ref().unwrap().0, "DoesNotExist");
    assert_eq!(
        missing.trigger.as_ref().unwrap().1,
        "Issuing certificate as Secret does not exist"
    );

    let issued = issue(&request(&web.spec).unwrap(), &self_signed(), None, now).unwrap();
    let secret = secret_for(&web, &issued);
    let annotations = secret.metadata.annotations.clone().unwrap();
    assert_eq!(annotations["cert-manager.io/alt-names"], "web.example");
    assert_eq!(annotations["cert-manager.io/issuer-kind"], "ClusterIssuer");
    assert_eq!(annotations["cert-manager.io/common-name"], "");
    let fresh = evaluate(&web, Some(&secret), now);
    assert!(fresh.not_ready.is_none() && fresh.trigger.is_none());
    let current = fresh.current.as_ref().unwrap();
    let renewal = fresh.renewal_time.unwrap();
    assert_eq!(
        current.certificate.not_after.duration_since(renewal),
        SignedDuration::from_secs(10)
    );

    // Due: Renewing, still Ready; expired: not Ready.
    let due = evaluate(&web, Some(&secret), renewal);
    assert!(due.not_ready.is_none());
    assert_eq!(due.trigger.as_ref().unwrap().0, "Renewing");
    let expired = evaluate(&web, Some(&secret), current.certificate.not_after);
    assert_eq!(expired.not_ready.as_ref().unwrap().0, "Expired");

    // Another issuer, a changed spec, a key that does not match.
    let mut other = web.clone();
    other.spec.issuer_ref.name = "ca".into();
    assert_eq!(
        evaluate(&other, Some(&secret), now).trigger.unwrap().0,
        "IncorrectIssuer"
    );
    let mut renamed = web.clone();
    renamed.spec.dns_names = vec!["new.example".into()];
    let changed = evaluate(&renamed, Some(&secret), now);
    assert_eq!(
        changed.not_ready.unwrap().1,
        "Fields on the issued certificate not up to date: [spec.dnsNames]"
    );
    let mut ed = web.clone();
    ed.spec.private_key = Some(super::types::CertificatePrivateKey {
        algorithm: Some("Ed25519".into()),
        ..Default::default()
    });
    assert_eq!(
        evaluate(&ed, Some(&secret), now).trigger.unwrap().0,
        "SecretMismatch"
    );
    let mut wrong_key = secret.clone();
    let other_key = PrivateKey::generate(KeyAlgorithm::Ecdsa(256)).unwrap();
    wrong_key.data.as_mut().unwrap().insert(
        "tls.key".into(),
        ByteString(other_key.pem(KeyEncoding::Pkcs8).unwrap().into_bytes()),
    );
    assert_eq!(
        evaluate(&web, Some(&wrong_key), now).trigger.unwrap().0,
        "InvalidKeyPair"
    );
    let mut empty = secret.clone();
    empty.data = Some(BTreeMap::new());
    assert_eq!(
        evaluate(&web, Some(&empty), now).trigger.unwrap().0,
        "MissingData"
    );

    // rotationPolicy Never keeps the key; Always (the default) makes a new one.
    let mut keep = web.clone();
    keep.spec.private_key = Some(super::types::CertificatePrivateKey {
        rotation_policy: Some("Never".into()),
        ..Default::default()
    });
    let kept = issue(
        &request(&keep.spec).unwrap(),
        &self_signed(),
        fresh.current.map(|c| c.key),
        now,
    )
    .unwrap();
    assert_eq!(kept.tls_key, issued.tls_key);
    let rotated = issue(&request(&web.spec).unwrap(), &self_signed(), None, now).unwrap();
    assert_ne!(rotated.tls_key, issued.tls_key);
}

#[test]
fn renewal_follows_renew_before_its_percentage_or_a_third_of_the_lifetime() {
    let start: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let end = start + SignedDuration::from_hours(90);
    let at = |spec: serde_json::Value| {
        let mut base = json!({"secretName": "s", "commonName": "c", "duration": "90h", "issuerRef": {"name": "i"}});
        for (key, value) in spec.as_object().unwrap() {
            base[key] = value.clone();
        }
        request(&certificate(base).spec)
            .unwrap()
            .renewal_time(start, end)
    };
    assert_eq!(at(json!({})), Some(start + SignedDuration::from_hours(60)));
    assert_eq!(
        at(json!({"renewBefore": "10h"})),
        Some(end - SignedDuration::from_hours(10))
    );
    assert_eq!(
        at(json!({"renewBeforePercentage": 10})),
        Some(end - SignedDuration::from_hours(9))
    );
    assert_eq!(at(json!({"renewal": {"policy": "Disabled"}})), None);
}

#[test]
fn requests_are_checked_as_the_webhook_checks_them() {
    let refused = |spec: serde_json::Value| {
        let mut base = json!({"secretName": "s", "issuerRef": {"name": "i"}});
        for (key, value) in spec.as_object().unwrap() {
            base[key] = value.clone();
        }
        request(&certificate(base).spec).unwrap_err()
    };
    assert!(refused(json!({})).contains("at least one of commonName"));
    assert!(refused(json!({"commonName": "c", "ipAddresses": ["nope"]})).contains("invalid IP"));
    assert!(
        refused(json!({"commonName": "c", "duration": "1m", "renewBefore": "2m"}))
            .contains("must be greater than renewBefore")
    );
    assert!(
        refused(json!({"commonName": "c", "privateKey": {"algorithm": "ECDSA", "size": 123}}))
            .contains("ECDSA key size must be one of 256, 384 or 521")
    );
    assert!(
        refused(json!({"commonName": "c", "literalSubject": "CN=x"})).contains("literalSubject")
    );
    assert!(
        refused(json!({"commonName": "c", "keystores": {"pkcs12": {"create": true}}}))
            .contains("keystores")
    );
    assert!(
        refused(json!({"commonName": "c", "subject": {"organizations": ["a", "b"]}}))
            .contains("at most one value per subject attribute")
    );
}

#[test]
fn ca_issuers_say_what_is_wrong_with_their_secret() {
    let spec = IssuerSpec {
        ca: Some(super::types::CaIssuer {
            secret_name: "ca".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let missing = issuers::evaluate(&spec, "Issuer 'default/ca'", "default", None);
    assert_eq!(missing.reason, "ErrGetKeyPair");
    assert_eq!(
        missing.message,
        "Error getting keypair for CA issuer: secrets \"ca\" not found"
    );
    let leaf =
        certificate(json!({"secretName": "ca", "commonName": "leaf", "issuerRef": {"name": "i"}}));
    let issued = issue(
        &request(&leaf.spec).unwrap(),
        &self_signed(),
        None,
        Timestamp::now(),
    )
    .unwrap();
    let not_a_ca = issuers::evaluate(
        &spec,
        "Issuer 'default/ca'",
        "default",
        Some(&secret_for(&leaf, &issued)),
    );
    assert_eq!(not_a_ca.reason, "ErrInvalidKeyPair");
    assert!(!not_a_ca.ready());
    let none = issuers::evaluate(
        &IssuerSpec::default(),
        "Issuer 'default/x'",
        "default",
        None,
    );
    assert_eq!(
        none.message,
        "Error initializing issuer: no issuer specified for Issuer 'default/x'"
    );
}
