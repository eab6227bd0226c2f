//! The tests of `issuer`: kept beside it, in a file of their own for its length.
use super::*;
use crate::security::{Purpose, check_tls_secret};
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;
use x509_parser::oid_registry::{OID_EC_P256, OID_KEY_TYPE_EC_PUBLIC_KEY};

const DAY: u64 = 86_400;

fn at(days: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + days * DAY as i64).unwrap()
}

fn days(n: u64) -> Duration {
    Duration::from_secs(n * DAY)
}

fn ca() -> CaMaterial {
    new_ca("etcd", "prod", at(0), days(5 * 365)).unwrap()
}

fn tls_secret(data: BTreeMap<String, ByteString>) -> Secret {
    Secret {
        type_: Some(TLS_SECRET_TYPE.to_string()),
        data: Some(data),
        ..Default::default()
    }
}

fn with_parsed<T>(pem: &str, f: impl FnOnce(&X509Certificate<'_>) -> T) -> T {
    let der = CertificateDer::from_pem_slice(pem.as_bytes()).unwrap();
    let (rest, parsed) = x509_parser::parse_x509_certificate(&der).unwrap();
    assert!(rest.is_empty());
    f(&parsed)
}

fn assert_p256(parsed: &X509Certificate<'_>) {
    let algorithm = &parsed.public_key().algorithm;
    assert_eq!(algorithm.algorithm, OID_KEY_TYPE_EC_PUBLIC_KEY);
    let curve = algorithm
        .parameters
        .as_ref()
        .expect("an EC key names its curve")
        .as_oid()
        .unwrap();
    assert_eq!(curve, OID_EC_P256);
}

fn common_name(parsed: &X509Certificate<'_>) -> String {
    parsed
        .subject()
        .iter_common_name()
        .next()
        .unwrap()
        .as_str()
        .unwrap()
        .to_string()
}

fn member_names(member: &str) -> Vec<String> {
    vec![format!("{member}.etcd.prod.svc")]
}

#[test]
fn the_ca_is_a_p256_ca_that_signs_certificates_only() {
    let ca = ca();
    assert_eq!(ca.not_before.as_second(), at(0).as_second() - 300);
    assert_eq!(ca.not_after, at(5 * 365));
    with_parsed(&ca.cert_pem, |parsed| {
        assert_p256(parsed);
        assert_eq!(common_name(parsed), "etcd.prod etcd CA");
        assert_eq!(parsed.subject(), parsed.issuer(), "self-signed");
        let constraints = parsed.basic_constraints().unwrap().unwrap().value;
        assert!(constraints.ca);
        assert_eq!(constraints.path_len_constraint, Some(0));
        let usage = parsed.key_usage().unwrap().unwrap().value;
        assert!(usage.key_cert_sign() && usage.crl_sign());
        assert!(!usage.digital_signature());
        assert_eq!(
            parsed.validity().not_after.timestamp(),
            ca.not_after.as_second()
        );
        assert_eq!(
            parsed.validity().not_before.timestamp(),
            ca.not_before.as_second()
        );
    });
    assert!(ca.key_pem.contains("PRIVATE KEY"));
    assert!(
        !format!("{ca:?}").contains("PRIVATE"),
        "the key is redacted"
    );
}

#[test]
fn a_member_certificate_serves_and_dials_for_both_listeners() {
    let ca = ca();
    let leaf = issue_member(
        &ca,
        "etcd-1",
        "etcd",
        "prod",
        "cluster.local",
        at(1),
        days(90),
    )
    .unwrap();
    let secret = tls_secret(member_secret_data(&ca.cert_pem, &leaf));
    let names = vec![
        "etcd-1.etcd.prod.svc".to_string(),
        "etcd-1.etcd.prod.svc.cluster.local".to_string(),
        "etcd-client.prod.svc".to_string(),
        "etcd-client.prod.svc.cluster.local".to_string(),
        "localhost".to_string(),
    ];
    for purpose in [Purpose::Server, Purpose::Peer] {
        let material = check_tls_secret("etcd-1-tls", Some(&secret), purpose, None, &names, at(1))
            .unwrap_or_else(|e| panic!("{purpose:?}: {e}"));
        assert_eq!(material.not_after, at(91));
        assert_eq!(material.ca_pem.as_deref(), Some(ca.cert_pem.as_bytes()));
    }
    // Its own name only: another member's is not covered.
    let other = check_tls_secret(
        "etcd-1-tls",
        Some(&secret),
        Purpose::Peer,
        None,
        &member_names("etcd-2"),
        at(1),
    )
    .unwrap_err();
    assert!(
        other.contains("is not valid for etcd-2.etcd.prod.svc"),
        "{other}"
    );
    // Not yet valid long before issue, expired after its lifetime.
    let expired = check_tls_secret(
        "etcd-1-tls",
        Some(&secret),
        Purpose::Server,
        None,
        &member_names("etcd-1"),
        at(92),
    )
    .unwrap_err();
    assert!(expired.contains("expired at"), "{expired}");

    with_parsed(&leaf.cert_pem, |parsed| {
        assert_p256(parsed);
        assert_eq!(common_name(parsed), "etcd-1");
        assert_eq!(common_name_of_issuer(parsed), "etcd.prod etcd CA");
        assert!(!parsed.is_ca());
        let eku = parsed.extended_key_usage().unwrap().unwrap().value;
        assert!(eku.server_auth && eku.client_auth);
        assert!(!eku.code_signing && !eku.any);
        let usage = parsed.key_usage().unwrap().unwrap().value;
        assert!(usage.digital_signature() && !usage.key_cert_sign());
        let mut dns = Vec::new();
        let mut ips = Vec::new();
        for name in &parsed
            .subject_alternative_name()
            .unwrap()
            .unwrap()
            .value
            .general_names
        {
            match name {
                GeneralName::DNSName(d) => dns.push(d.to_string()),
                GeneralName::IPAddress(ip) => ips.push(ip.to_vec()),
                other => panic!("unexpected SAN {other:?}"),
            }
        }
        dns.sort();
        let mut expected = names.clone();
        expected.sort();
        assert_eq!(dns, expected);
        assert_eq!(ips, vec![vec![127, 0, 0, 1]]);
        assert_eq!(
            parsed.validity().not_before.timestamp(),
            at(1).as_second() - 300
        );
        assert_eq!(parsed.validity().not_after.timestamp(), at(91).as_second());
    });
    assert_eq!(leaf.not_before.as_second(), at(1).as_second() - 300);
    assert!(
        !format!("{leaf:?}").contains("PRIVATE"),
        "the key is redacted"
    );
}

fn common_name_of_issuer(parsed: &X509Certificate<'_>) -> String {
    parsed
        .issuer()
        .iter_common_name()
        .next()
        .unwrap()
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn the_operator_client_certificate_is_for_client_auth_only() {
    let ca = ca();
    let leaf = issue_operator_client(&ca, "etcd", at(0), days(90)).unwrap();
    let secret = tls_secret(operator_client_secret_data(&ca.cert_pem, &leaf));
    check_tls_secret(
        "etcd-operator-client-tls",
        Some(&secret),
        Purpose::OperatorClient,
        Some(ca.cert_pem.as_bytes()),
        &[],
        at(0),
    )
    .unwrap();
    // Not a server certificate.
    let as_server = check_tls_secret(
        "etcd-operator-client-tls",
        Some(&secret),
        Purpose::Server,
        None,
        &[],
        at(0),
    )
    .unwrap_err();
    assert!(as_server.contains("lacks the server auth"), "{as_server}");
    with_parsed(&leaf.cert_pem, |parsed| {
        assert_p256(parsed);
        assert_eq!(common_name(parsed), "etcd-operator-client");
        let eku = parsed.extended_key_usage().unwrap().unwrap().value;
        assert!(eku.client_auth && !eku.server_auth);
        assert!(parsed.subject_alternative_name().unwrap().is_none());
        assert!(!parsed.is_ca());
    });
}

#[test]
fn a_certificate_from_another_ca_does_not_pass() {
    let ca = ca();
    let other = new_ca("etcd", "prod", at(0), days(365)).unwrap();
    let foreign = issue_member(
        &other,
        "etcd-0",
        "etcd",
        "prod",
        "cluster.local",
        at(0),
        days(90),
    )
    .unwrap();
    let secret = tls_secret(member_secret_data(&ca.cert_pem, &foreign));
    let problem = check_tls_secret(
        "etcd-0-tls",
        Some(&secret),
        Purpose::Peer,
        None,
        &member_names("etcd-0"),
        at(0),
    )
    .unwrap_err();
    assert!(problem.contains("not signed by the CA"), "{problem}");
    let client = issue_operator_client(&other, "etcd", at(0), days(90)).unwrap();
    let secret = tls_secret(operator_client_secret_data(&other.cert_pem, &client));
    let problem = check_tls_secret(
        "etcd-operator-client-tls",
        Some(&secret),
        Purpose::OperatorClient,
        Some(ca.cert_pem.as_bytes()),
        &[],
        at(0),
    )
    .unwrap_err();
    assert!(problem.contains("not signed by the CA"), "{problem}");
}

#[test]
fn a_ca_read_back_from_its_secret_signs_leaves_that_chain_to_the_original() {
    let original = ca();
    let secret = tls_secret(ca_secret_data(&original));
    let reloaded = ca_from_secret("etcd-ca", &secret).unwrap();
    assert_eq!(reloaded.cert_pem, original.cert_pem);
    assert_eq!(reloaded.not_before, original.not_before);
    assert_eq!(reloaded.not_after, original.not_after);
    let leaf = issue_member(
        &reloaded,
        "etcd-3",
        "etcd",
        "prod",
        "cluster.local",
        at(100),
        days(90),
    )
    .unwrap();
    // Checked against the original CA's PEM, not the reloaded one's.
    let data = BTreeMap::from([
        ("tls.crt".to_string(), bytes(&leaf.cert_pem)),
        ("tls.key".to_string(), bytes(&leaf.key_pem)),
        ("ca.crt".to_string(), bytes(&original.cert_pem)),
    ]);
    check_tls_secret(
        "etcd-3-tls",
        Some(&tls_secret(data)),
        Purpose::Peer,
        None,
        &member_names("etcd-3"),
        at(100),
    )
    .unwrap();
    with_parsed(&leaf.cert_pem, |leaf| {
        with_parsed(&original.cert_pem, |ca| {
            assert_eq!(leaf.issuer().as_raw(), ca.subject().as_raw());
            let aki = leaf
                .extensions()
                .iter()
                .find_map(|e| match e.parsed_extension() {
                    x509_parser::extensions::ParsedExtension::AuthorityKeyIdentifier(a) => {
                        a.key_identifier.clone()
                    }
                    _ => None,
                })
                .expect("the leaf names its CA's key");
            let ski = ca
                .extensions()
                .iter()
                .find_map(|e| match e.parsed_extension() {
                    x509_parser::extensions::ParsedExtension::SubjectKeyIdentifier(s) => {
                        Some(s.clone())
                    }
                    _ => None,
                })
                .expect("the CA has a key identifier");
            assert_eq!(aki.0, ski.0);
        })
    });
    let client = issue_operator_client(&reloaded, "etcd", at(100), days(90)).unwrap();
    check_tls_secret(
        "etcd-operator-client-tls",
        Some(&tls_secret(operator_client_secret_data(
            &original.cert_pem,
            &client,
        ))),
        Purpose::OperatorClient,
        Some(original.cert_pem.as_bytes()),
        &[],
        at(100),
    )
    .unwrap();
}

#[test]
fn a_secret_that_holds_no_usable_ca_is_refused_with_its_problem() {
    let ca = ca();
    let other = new_ca("other", "prod", at(0), days(365)).unwrap();
    let leaf = issue_member(
        &ca,
        "etcd-0",
        "etcd",
        "prod",
        "cluster.local",
        at(0),
        days(90),
    )
    .unwrap();
    let problem = |secret: Secret| ca_from_secret("etcd-ca", &secret).unwrap_err();
    let data = |cert: &str, key: &str| {
        BTreeMap::from([
            ("tls.crt".to_string(), bytes(cert)),
            ("tls.key".to_string(), bytes(key)),
        ])
    };
    let mut opaque = tls_secret(ca_secret_data(&ca));
    opaque.type_ = Some("Opaque".into());
    assert!(problem(opaque).contains("has type Opaque"));
    let mut no_key = ca_secret_data(&ca);
    no_key.remove("tls.key");
    assert!(problem(tls_secret(no_key)).contains("has no tls.key"));
    assert!(
        problem(tls_secret(data(&ca.cert_pem, &other.key_pem)))
            .contains("tls.key does not belong to the certificate")
    );
    assert!(
        problem(tls_secret(data(&leaf.cert_pem, &leaf.key_pem)))
            .contains("is not a CA certificate")
    );
    assert!(problem(tls_secret(data("garbage", &ca.key_pem))).contains("tls.crt is not PEM"));
    assert!(
        problem(tls_secret(data(&ca.cert_pem, "garbage")))
            .contains("tls.key is not a usable private key")
    );
    // A CA with a richer subject than the operator writes (someone else's CA).
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).unwrap();
    let mut params = ca_params("foreign", at(0), days(365)).unwrap();
    params
        .distinguished_name
        .push(DnType::OrganizationName, "Example");
    let foreign = params.self_signed(&key).unwrap();
    assert!(
        problem(tls_secret(data(&foreign.pem(), &key.serialize_pem())))
            .contains("not the single CN the operator writes")
    );
}

#[test]
fn a_leaf_never_outlives_its_ca() {
    let short = new_ca("etcd", "prod", at(0), days(10)).unwrap();
    let leaf = issue_member(
        &short,
        "etcd-0",
        "etcd",
        "prod",
        "cluster.local",
        at(1),
        days(90),
    )
    .unwrap();
    assert_eq!(leaf.not_after, short.not_after);
    with_parsed(&leaf.cert_pem, |parsed| {
        assert_eq!(parsed.validity().not_after.timestamp(), at(10).as_second());
    });
    assert!(issue_operator_client(&short, "etcd", at(0), Duration::ZERO).is_err());
    assert!(new_ca("etcd", "prod", at(0), Duration::ZERO).is_err());
}

#[test]
fn renewal_is_due_at_two_thirds_or_renew_before_the_end() {
    let (from, to) = (at(0), at(90));
    let second =
        |days: i64, plus: i64| Timestamp::from_second(at(days).as_second() + plus).unwrap();
    // A third of 90 days left: day 60.
    assert!(!renewal_due(from, to, None, at(0)));
    assert!(!renewal_due(from, to, None, second(60, -1)));
    assert!(renewal_due(from, to, None, at(60)));
    assert!(renewal_due(from, to, None, at(89)));
    assert!(renewal_due(from, to, None, at(91)), "expired");
    // renewBefore 10 days: day 80.
    let ten = Some(days(10));
    assert!(!renewal_due(from, to, ten, at(60)));
    assert!(!renewal_due(from, to, ten, second(80, -1)));
    assert!(renewal_due(from, to, ten, at(80)));
    // renewBefore as long as the lifetime, or longer: due at once.
    assert!(renewal_due(from, to, Some(days(90)), at(0)));
    assert!(renewal_due(from, to, Some(Duration::MAX), at(0)));
    // No lifetime at all.
    assert!(renewal_due(to, from, None, at(0)));
    assert!(renewal_due(from, from, None, at(0)));

    // The CA: a third of five years left.
    let ca = ca();
    let lifetime = ca.not_after.as_second() - ca.not_before.as_second();
    let turn = ca.not_after.as_second() - lifetime / 3;
    assert!(!ca_renewal_due(
        &ca,
        Timestamp::from_second(turn - 1).unwrap()
    ));
    assert!(ca_renewal_due(&ca, Timestamp::from_second(turn).unwrap()));
    assert!(!ca_renewal_due(&ca, at(365)));
    assert!(ca_renewal_due(&ca, at(4 * 365)));
}

#[test]
fn names_of_the_secrets_and_of_a_member() {
    assert_eq!(ca_secret_name("etcd"), "etcd-ca");
    assert_eq!(member_secret_name("etcd-0"), "etcd-0-tls");
    assert_eq!(
        operator_client_secret_name("etcd"),
        "etcd-operator-client-tls"
    );
    assert_eq!(
        member_dns_names("etcd-0", "etcd", "prod", "cluster.local"),
        [
            "etcd-0.etcd.prod.svc.cluster.local",
            "etcd-0.etcd.prod.svc",
            "etcd-client.prod.svc.cluster.local",
            "etcd-client.prod.svc",
            "localhost",
        ]
    );
    let ca = ca();
    let data = ca_secret_data(&ca);
    assert_eq!(
        data.keys().collect::<Vec<_>>(),
        ["ca.crt", "tls.crt", "tls.key"]
    );
    assert_eq!(data["ca.crt"], data["tls.crt"]);
    let leaf = issue_member(
        &ca,
        "etcd-0",
        "etcd",
        "prod",
        "cluster.local",
        at(0),
        days(1),
    )
    .unwrap();
    let member = member_secret_data(&ca.cert_pem, &leaf);
    assert_eq!(member["ca.crt"].0, ca.cert_pem.as_bytes());
    assert_eq!(member["tls.crt"].0, leaf.cert_pem.as_bytes());
    assert_eq!(member["tls.key"].0, leaf.key_pem.as_bytes());
}
