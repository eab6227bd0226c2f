//! The cert-manager stand-in (`SandboxOptions::cert_manager`): a selfSigned ClusterIssuer
//! signs a CA, a `ca` Issuer and ClusterIssuer sign leaf certificates from its Secret, checked
//! with `openssl`; short certificates renewed on time, a changed spec reissued, a missing
//! issuer reported then picked up, what the stand-in does not do refused with a message, and
//! the real kubectl applying and listing Certificates. The API server alone: no root needed.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube_sandbox::certmanager::{Certificate, ClusterIssuer, Issuer};
use serde_json::{Value, json};

use common::{TestSandbox, apply, kubectl};

async fn sandbox() -> TestSandbox {
    common::start_with(|options| options.nodes(0).cert_manager()).await
}

/// Polls `check` every 100 ms until it gives a value, for up to `limit`.
async fn wait_for<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            started.elapsed() < limit,
            "{what} did not happen within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn condition<'a>(object: &'a Value, type_: &str) -> Option<&'a Value> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

fn is_ready(object: &Value) -> bool {
    condition(object, "Ready").is_some_and(|c| c["status"] == "True")
}

async fn create<K>(api: &Api<K>, manifest: Value) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let object: K = serde_json::from_value(manifest).expect("a valid manifest");
    api.create(&PostParams::default(), &object)
        .await
        .expect("created")
}

/// A Certificate's JSON once `check` holds for it.
async fn wait_certificate(
    api: &Api<Certificate>,
    name: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    wait_for(what, Duration::from_secs(20), || async {
        let found = api.get_opt(name).await.ok().flatten()?;
        let value = serde_json::to_value(found).ok()?;
        check(&value).then_some(value)
    })
    .await
}

fn secret_files(secret: &Secret) -> BTreeMap<String, Vec<u8>> {
    secret
        .data
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect()
}

/// Runs openssl with the Secret's files in a directory of their own; its stdout.
fn openssl(files: &BTreeMap<String, Vec<u8>>, args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    for (name, content) in files {
        std::fs::write(dir.path().join(name), content).unwrap();
    }
    let output = std::process::Command::new("openssl")
        .args(args)
        .current_dir(dir.path())
        .output()
        .expect("openssl is installed (Debian package openssl)");
    assert!(
        output.status.success(),
        "openssl {args:?} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn serial(files: &BTreeMap<String, Vec<u8>>) -> String {
    openssl(files, &["x509", "-in", "tls.crt", "-noout", "-serial"])
}

fn not_after(certificate: &Value) -> String {
    certificate["status"]["notAfter"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// A selfSigned ClusterIssuer, a CA Certificate from it in `namespace`, and a `ca` Issuer
/// there reading the CA's Secret.
async fn ca_issuer(sandbox: &TestSandbox, namespace: &str) {
    let client = sandbox.client();
    create(
        &Api::<ClusterIssuer>::all(client.clone()),
        json!({"apiVersion": "cert-manager.io/v1", "kind": "ClusterIssuer",
               "metadata": {"name": "selfsigned"}, "spec": {"selfSigned": {}}}),
    )
    .await;
    let certificates: Api<Certificate> = Api::namespaced(client.clone(), namespace);
    create(
        &certificates,
        json!({"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
               "metadata": {"name": "root-ca"},
               "spec": {"isCA": true, "commonName": "sandbox-root-ca", "secretName": "root-ca",
                        "privateKey": {"algorithm": "ECDSA", "size": 256},
                        "issuerRef": {"name": "selfsigned", "kind": "ClusterIssuer", "group": "cert-manager.io"}}}),
    )
    .await;
    wait_certificate(&certificates, "root-ca", "the CA issued", is_ready).await;
    create(
        &Api::<Issuer>::namespaced(client, namespace),
        json!({"apiVersion": "cert-manager.io/v1", "kind": "Issuer",
               "metadata": {"name": "ca"}, "spec": {"ca": {"secretName": "root-ca"}}}),
    )
    .await;
}

#[tokio::test]
async fn a_self_signed_ca_signs_leaf_certificates_that_openssl_verifies() {
    let sandbox = sandbox().await;
    let client = sandbox.client();
    ca_issuer(&sandbox, "default").await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let root = secret_files(&secrets.get("root-ca").await.unwrap());
    assert_eq!(
        root["ca.crt"], root["tls.crt"],
        "a self-signed CA is its own ca.crt"
    );
    let text = openssl(&root, &["x509", "-in", "tls.crt", "-noout", "-text"]);
    assert!(text.contains("CA:TRUE"), "{text}");
    assert!(text.contains("Certificate Sign"), "{text}");
    assert!(text.contains("Subject: CN = sandbox-root-ca"), "{text}");
    assert!(
        String::from_utf8_lossy(&root["tls.key"]).starts_with("-----BEGIN EC PRIVATE KEY-----"),
        "PKCS1 (SEC 1 for EC keys) is cert-manager's default encoding"
    );
    openssl(&root, &["ec", "-in", "tls.key", "-check", "-noout"]);

    let issuers: Api<Issuer> = Api::namespaced(client.clone(), "default");
    let issuer = wait_for("the CA Issuer Ready", Duration::from_secs(10), || async {
        let value = serde_json::to_value(issuers.get("ca").await.ok()?).ok()?;
        is_ready(&value).then_some(value)
    })
    .await;
    let ready = condition(&issuer, "Ready").unwrap();
    assert_eq!(ready["reason"], "KeyPairVerified");
    assert_eq!(ready["message"], "Signing CA verified");

    let certificates: Api<Certificate> = Api::namespaced(client.clone(), "default");
    create(
        &certificates,
        json!({"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
               "metadata": {"name": "server"},
               "spec": {"secretName": "server-tls", "commonName": "etcd.example",
                        "dnsNames": ["etcd.example", "*.etcd.default.svc"],
                        "ipAddresses": ["10.96.0.10", "fd00::1"],
                        "usages": ["server auth", "client auth", "digital signature", "key encipherment"],
                        "duration": "2h", "renewBefore": "30m",
                        "secretTemplate": {"labels": {"app": "etcd"}, "annotations": {"team": "storage"}},
                        "additionalOutputFormats": [{"type": "CombinedPEM"}, {"type": "DER"}],
                        "issuerRef": {"name": "ca"}}}),
    )
    .await;
    let server = wait_certificate(&certificates, "server", "the leaf issued", is_ready).await;
    assert_eq!(server["status"]["revision"], 1);
    let ready = condition(&server, "Ready").unwrap();
    assert_eq!(ready["reason"], "Ready");
    assert_eq!(
        ready["message"],
        "Certificate is up to date and has not expired"
    );
    assert!(condition(&server, "Issuing").is_none(), "{server:#}");
    let before: jiff::Timestamp = server["status"]["notBefore"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let after: jiff::Timestamp = not_after(&server).parse().unwrap();
    let renewal: jiff::Timestamp = server["status"]["renewalTime"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        after.duration_since(before),
        jiff::SignedDuration::from_hours(2)
    );
    assert_eq!(
        after.duration_since(renewal),
        jiff::SignedDuration::from_mins(30)
    );

    let secret = secrets.get("server-tls").await.unwrap();
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    let annotations = secret.metadata.annotations.clone().unwrap_or_default();
    for (key, value) in [
        ("cert-manager.io/certificate-name", "server"),
        ("cert-manager.io/issuer-name", "ca"),
        ("cert-manager.io/issuer-kind", ""),
        ("cert-manager.io/issuer-group", ""),
        ("cert-manager.io/common-name", "etcd.example"),
        (
            "cert-manager.io/alt-names",
            "etcd.example,*.etcd.default.svc",
        ),
        ("cert-manager.io/ip-sans", "10.96.0.10,fd00::1"),
        ("cert-manager.io/uri-sans", ""),
        ("team", "storage"),
    ] {
        assert_eq!(
            annotations.get(key).map(String::as_str),
            Some(value),
            "annotation {key}: {annotations:#?}"
        );
    }
    let labels = secret.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("app").map(String::as_str), Some("etcd"));
    assert_eq!(
        labels
            .get("controller.cert-manager.io/fao")
            .map(String::as_str),
        Some("true")
    );
    let files = secret_files(&secret);
    assert_eq!(
        files["ca.crt"], root["tls.crt"],
        "ca.crt is the CA's certificate"
    );
    let verified = openssl(&files, &["verify", "-CAfile", "ca.crt", "tls.crt"]);
    assert_eq!(verified.trim(), "tls.crt: OK");
    let text = openssl(&files, &["x509", "-in", "tls.crt", "-noout", "-text"]);
    for expected in [
        "Issuer: CN = sandbox-root-ca",
        "Subject: CN = etcd.example",
        "DNS:etcd.example, DNS:*.etcd.default.svc, IP Address:10.96.0.10, IP Address:FD00:0:0:0:0:0:0:1",
        "TLS Web Server Authentication, TLS Web Client Authentication",
        "Digital Signature, Key Encipherment",
        "CA:FALSE",
        "ASN1 OID: prime256v1",
    ] {
        assert!(
            text.contains(expected),
            "{expected:?} missing from:\n{text}"
        );
    }
    let dates = openssl(&files, &["x509", "-in", "tls.crt", "-noout", "-enddate"]);
    let expected_end = after.strftime("%b %e %H:%M:%S %Y GMT").to_string();
    assert_eq!(dates.trim(), format!("notAfter={expected_end}"));
    // The key belongs to the certificate; the extra formats hold the same key and chain.
    let public_of_key = openssl(&files, &["pkey", "-in", "tls.key", "-pubout"]);
    let public_of_cert = openssl(&files, &["x509", "-in", "tls.crt", "-noout", "-pubkey"]);
    assert_eq!(public_of_key, public_of_cert);
    assert_eq!(
        files["tls-combined.pem"],
        [
            files["tls.key"].clone(),
            b"\n".to_vec(),
            files["tls.crt"].clone()
        ]
        .concat()
    );
    let from_der = openssl(
        &files,
        &["pkey", "-in", "key.der", "-inform", "DER", "-pubout"],
    );
    assert_eq!(from_der, public_of_key);

    // A ClusterIssuer's CA Secret lives in the cluster resource namespace.
    let cluster_ca: Api<Certificate> = Api::namespaced(client.clone(), "cert-manager");
    create(
        &cluster_ca,
        json!({"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
               "metadata": {"name": "cluster-ca"},
               "spec": {"isCA": true, "commonName": "cluster-ca", "secretName": "cluster-ca",
                        "privateKey": {"algorithm": "Ed25519", "encoding": "PKCS8"},
                        "issuerRef": {"name": "selfsigned", "kind": "ClusterIssuer"}}}),
    )
    .await;
    create(
        &Api::<ClusterIssuer>::all(client.clone()),
        json!({"apiVersion": "cert-manager.io/v1", "kind": "ClusterIssuer",
               "metadata": {"name": "cluster-ca"}, "spec": {"ca": {"secretName": "cluster-ca"}}}),
    )
    .await;
    let other: Api<Certificate> = Api::namespaced(client.clone(), "kube-system");
    create(
        &other,
        json!({"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
               "metadata": {"name": "client"},
               "spec": {"secretName": "client-tls", "commonName": "root",
                        "subject": {"organizations": ["system:masters"]},
                        "usages": ["client auth"], "privateKey": {"algorithm": "ECDSA", "size": 384},
                        "issuerRef": {"name": "cluster-ca", "kind": "ClusterIssuer"}}}),
    )
    .await;
    wait_certificate(&other, "client", "the client certificate issued", is_ready).await;
    let files = secret_files(
        &Api::<Secret>::namespaced(client, "kube-system")
            .get("client-tls")
            .await
            .unwrap(),
    );
    let verified = openssl(&files, &["verify", "-CAfile", "ca.crt", "tls.crt"]);
    assert_eq!(verified.trim(), "tls.crt: OK");
    let text = openssl(&files, &["x509", "-in", "tls.crt", "-noout", "-text"]);
    for expected in [
        "Signature Algorithm: ED25519",
        "Subject: O = system:masters, CN = root",
        "TLS Web Client Authentication",
        "ASN1 OID: secp384r1",
    ] {
        assert!(
            text.contains(expected),
            "{expected:?} missing from:\n{text}"
        );
    }
}

#[tokio::test]
async fn short_certificates_are_renewed_on_time_and_a_changed_spec_is_reissued() {
    let sandbox = sandbox().await;
    let client = sandbox.client();
    ca_issuer(&sandbox, "default").await;
    let certificates: Api<Certificate> = Api::namespaced(client.clone(), "default");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    create(
        &certificates,
        json!({"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
               "metadata": {"name": "short"},
               "spec": {"secretName": "short-tls", "dnsNames": ["short.example"],
                        "duration": "20s", "renewBefore": "12s", "issuerRef": {"name": "ca"}}}),
    )
    .await;
    let first = wait_certificate(&certificates, "short", "the first issuance", is_ready).await;
    let first_serial = serial(&secret_files(&secrets.get("short-tls").await.unwrap()));
    let renewal: jiff::Timestamp = first["status"]["renewalTime"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let expected =
        not_after(&first).parse::<jiff::Timestamp>().unwrap() - jiff::SignedDuration::from_secs(12);
    assert_eq!(renewal, expected);

    // Renewed at its renewal time (8 s after issuance), without anyone asking.
    let renewed = wait_certificate(&certificates, "short", "the renewal", |c| {
        c["status"]["revision"] == 2
    })
    .await;
    let renewed_at = jiff::Timestamp::now();
    assert!(
        renewed_at >= renewal
            && renewed_at.duration_since(renewal) < jiff::SignedDuration::from_secs(5),
        "renewed at {renewed_at}, due at {renewal}"
    );
    assert!(not_after(&renewed) > not_after(&first), "{renewed:#}");
    assert!(is_ready(&renewed));
    let second_serial = serial(&secret_files(&secrets.get("short-tls").await.unwrap()));
    assert_ne!(first_serial, second_serial);

    // A changed dnsNames is reissued at once.
    certificates
        .patch(
            "short",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"dnsNames": ["short.example", "other.example"], "duration": "1h", "renewBefore": "20m"}})),
        )
        .await
        .unwrap();
    let reissued = wait_certificate(&certificates, "short", "the reissue", |c| {
        c["status"]["revision"] == 3 && is_ready(c)
    })
    .await;
    let files = secret_files(&secrets.get("short-tls").await.unwrap());
    let text = openssl(
        &files,
        &["x509", "-in", "tls.crt", "-noout", "-ext", "subjectAltName"],
    );
    assert!(
        text.contains("DNS:short.example, DNS:other.example"),
        "{text}"
    );
    assert_eq!(
        secrets
            .get("short-tls")
            .await
            .unwrap()
            .metadata
            .annotations
            .unwrap()["cert-manager.io/alt-names"],
        "short.example,other.example"
    );
    let before: jiff::Timestamp = reissued["status"]["notBefore"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let after: jiff::Timestamp = not_after(&reissued).parse().unwrap();
    assert_eq!(
        after.duration_since(before),
        jiff::SignedDuration::from_hours(1)
    );

    // A Secret deleted behind its back is issued again.
    secrets
        .delete("short-tls", &Default::default())
        .await
        .unwrap();
    wait_certificate(&certificates, "short", "the Secret recreated", |c| {
        c["status"]["revision"] == 4 && is_ready(c)
    })
    .await;
    // The secretTemplate changed alone: the Secret follows, the certificate stays.
    let kept_serial = serial(&secret_files(&secrets.get("short-tls").await.unwrap()));
    certificates
        .patch(
            "short",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"secretTemplate": {"labels": {"tier": "gold"}}}})),
        )
        .await
        .unwrap();
    wait_for(
        "the label on the Secret",
        Duration::from_secs(10),
        || async {
            let secret = secrets.get("short-tls").await.ok()?;
            (secret.metadata.labels?.get("tier").map(String::as_str) == Some("gold")).then_some(())
        },
    )
    .await;
    assert_eq!(
        serial(&secret_files(&secrets.get("short-tls").await.unwrap())),
        kept_serial
    );
    assert_eq!(
        certificates
            .get("short")
            .await
            .unwrap()
            .status
            .unwrap()
            .revision,
        Some(4)
    );
    // Dropped from the template, the label goes from the Secret; other labels stay.
    secrets
        .patch(
            "short-tls",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"someone-else": "yes"}}})),
        )
        .await
        .unwrap();
    certificates
        .patch(
            "short",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"secretTemplate": null}})),
        )
        .await
        .unwrap();
    let labels = wait_for("the label gone", Duration::from_secs(10), || async {
        let labels = secrets.get("short-tls").await.ok()?.metadata.labels?;
        (!labels.contains_key("tier")).then_some(labels)
    })
    .await;
    assert_eq!(labels.get("someone-else").map(String::as_str), Some("yes"));
    assert_eq!(
        labels
            .get("controller.cert-manager.io/fao")
            .map(String::as_str),
        Some("true")
    );
    assert_eq!(
        serial(&secret_files(&secrets.get("short-tls").await.unwrap())),
        kept_serial
    );
}

#[tokio::test]
async fn a_missing_issuer_is_reported_and_picked_up_once_it_exists() {
    let sandbox = sandbox().await;
    let client = sandbox.client();
    let certificates: Api<Certificate> = Api::namespaced(client.clone(), "default");
    create(
        &certificates,
        json!({"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
               "metadata": {"name": "waiting"},
               "spec": {"secretName": "waiting-tls", "dnsNames": ["waiting.example"],
                        "issuerRef": {"name": "later", "kind": "ClusterIssuer"}}}),
    )
    .await;
    let waiting = wait_certificate(
        &certificates,
        "waiting",
        "the missing issuer reported",
        |c| condition(c, "Ready").is_some(),
    )
    .await;
    let ready = condition(&waiting, "Ready").unwrap();
    assert_eq!(ready["status"], "False");
    assert_eq!(ready["reason"], "DoesNotExist");
    assert_eq!(
        ready["message"],
        "Issuing certificate as Secret does not exist: Referenced \"ClusterIssuer\" not found: clusterissuers.cert-manager.io \"later\" not found"
    );
    let issuing = condition(&waiting, "Issuing").unwrap();
    assert_eq!(issuing["status"], "True");
    assert_eq!(issuing["reason"], "IssuerNotFound");

    // A namespaced Issuer that appears later is used as soon as it is there.
    create(
        &certificates,
        json!({"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
               "metadata": {"name": "early"},
               "spec": {"secretName": "early-tls", "commonName": "early",
                        "issuerRef": {"name": "own"}}}),
    )
    .await;
    wait_certificate(&certificates, "early", "the missing Issuer reported", |c| {
        condition(c, "Issuing").is_some_and(|i| i["reason"] == "IssuerNotFound")
    })
    .await;
    create(
        &Api::<Issuer>::namespaced(client.clone(), "default"),
        json!({"apiVersion": "cert-manager.io/v1", "kind": "Issuer",
               "metadata": {"name": "own"}, "spec": {"selfSigned": {}}}),
    )
    .await;
    let early = wait_certificate(&certificates, "early", "the certificate issued", is_ready).await;
    assert_eq!(early["status"]["revision"], 1);

    // A `ca` ClusterIssuer whose Secret is missing is not Ready, and says why.
    let cluster_issuers: Api<ClusterIssuer> = Api::all(client.clone());
    create(
        &cluster_issuers,
        json!({"apiVersion": "cert-manager.io/v1", "kind": "ClusterIssuer",
               "metadata": {"name": "later"}, "spec": {"ca": {"secretName": "later-ca"}}}),
    )
    .await;
    let issuer = wait_for(
        "the issuer's condition",
        Duration::from_secs(10),
        || async {
            let value = serde_json::to_value(cluster_issuers.get("later").await.ok()?).ok()?;
            condition(&value, "Ready").is_some().then_some(value)
        },
    )
    .await;
    let ready = condition(&issuer, "Ready").unwrap();
    assert_eq!(ready["status"], "False");
    assert_eq!(ready["reason"], "ErrGetKeyPair");
    assert_eq!(
        ready["message"],
        "Error getting keypair for CA issuer: secrets \"later-ca\" not found"
    );
    let waiting = wait_certificate(&certificates, "waiting", "the issuer not ready", |c| {
        condition(c, "Issuing").is_some_and(|i| i["reason"] == "IssuerNotReady")
    })
    .await;
    assert!(!is_ready(&waiting));

    // A CA Secret that is not a CA keeps it not Ready.
    let selfsigned = json!({"apiVersion": "cert-manager.io/v1", "kind": "ClusterIssuer",
        "metadata": {"name": "selfsigned"}, "spec": {"selfSigned": {}}});
    create(&cluster_issuers, selfsigned).await;
    let in_namespace: Api<Certificate> = Api::namespaced(client.clone(), "cert-manager");
    create(
        &in_namespace,
        json!({"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
               "metadata": {"name": "later-ca"},
               "spec": {"commonName": "not-a-ca", "secretName": "later-ca",
                        "issuerRef": {"name": "selfsigned", "kind": "ClusterIssuer"}}}),
    )
    .await;
    wait_for(
        "the issuer refusing a non-CA",
        Duration::from_secs(10),
        || async {
            let value = serde_json::to_value(cluster_issuers.get("later").await.ok()?).ok()?;
            (condition(&value, "Ready")?["reason"] == "ErrInvalidKeyPair").then_some(())
        },
    )
    .await;
    // Made a CA: the issuer gets Ready and the waiting Certificate is issued.
    in_namespace
        .patch(
            "later-ca",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"isCA": true}})),
        )
        .await
        .unwrap();
    let issued = wait_certificate(
        &certificates,
        "waiting",
        "the waiting certificate issued",
        is_ready,
    )
    .await;
    assert!(condition(&issued, "Issuing").is_none(), "{issued:#}");
    let files = secret_files(
        &Api::<Secret>::namespaced(client.clone(), "default")
            .get("waiting-tls")
            .await
            .unwrap(),
    );
    let verified = openssl(&files, &["verify", "-CAfile", "ca.crt", "tls.crt"]);
    assert_eq!(verified.trim(), "tls.crt: OK");
}

#[tokio::test]
async fn what_the_stand_in_cannot_issue_fails_with_a_clear_message() {
    let sandbox = sandbox().await;
    let client = sandbox.client();
    create(
        &Api::<ClusterIssuer>::all(client.clone()),
        json!({"apiVersion": "cert-manager.io/v1", "kind": "ClusterIssuer",
               "metadata": {"name": "selfsigned"}, "spec": {"selfSigned": {}}}),
    )
    .await;
    let certificates: Api<Certificate> = Api::namespaced(client.clone(), "default");
    create(
        &certificates,
        json!({"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
               "metadata": {"name": "p521"},
               "spec": {"secretName": "p521-tls", "dnsNames": ["p521.example"],
                        "privateKey": {"algorithm": "ECDSA", "size": 521},
                        "issuerRef": {"name": "selfsigned", "kind": "ClusterIssuer"}}}),
    )
    .await;
    let failed = wait_certificate(&certificates, "p521", "the failure", |c| {
        condition(c, "Issuing").is_some_and(|i| i["reason"] == "Failed")
    })
    .await;
    let issuing = condition(&failed, "Issuing").unwrap();
    assert_eq!(issuing["status"], "False");
    let message = issuing["message"].as_str().unwrap();
    assert!(
        message.contains("ECDSA keys of size 521 are not supported by kube-sandbox's cert-manager"),
        "{message}"
    );
    assert_eq!(failed["status"]["failedIssuanceAttempts"], 1);
    assert!(failed["status"]["lastFailureTime"].is_string());
    assert_eq!(
        condition(&failed, "Ready").unwrap()["reason"],
        "DoesNotExist"
    );

    // A changed spec is tried at once, back-off or not.
    certificates
        .patch(
            "p521",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"privateKey": {"algorithm": "ECDSA", "size": 384}}})),
        )
        .await
        .unwrap();
    let issued = wait_certificate(&certificates, "p521", "the P-384 issuance", is_ready).await;
    assert!(
        issued["status"]["failedIssuanceAttempts"].is_null(),
        "{issued:#}"
    );
    assert!(issued["status"]["lastFailureTime"].is_null(), "{issued:#}");

    // An ACME issuer is served (its manifest applies) but not run.
    let issuers: Api<Issuer> = Api::namespaced(client, "default");
    create(
        &issuers,
        json!({"apiVersion": "cert-manager.io/v1", "kind": "Issuer",
               "metadata": {"name": "letsencrypt"},
               "spec": {"acme": {"server": "https://acme.example/directory", "privateKeySecretRef": {"name": "account"},
                                 "solvers": [{"http01": {"ingress": {"ingressClassName": "nginx"}}}]}}}),
    )
    .await;
    let issuer = wait_for(
        "the ACME issuer's condition",
        Duration::from_secs(10),
        || async {
            let value = serde_json::to_value(issuers.get("letsencrypt").await.ok()?).ok()?;
            condition(&value, "Ready").is_some().then_some(value)
        },
    )
    .await;
    assert_eq!(
        issuer["spec"]["acme"]["solvers"][0]["http01"]["ingress"]["ingressClassName"], "nginx",
        "unmodelled fields are kept"
    );
    let ready = condition(&issuer, "Ready").unwrap();
    assert_eq!(ready["reason"], "ErrInitIssuer");
    assert!(
        ready["message"]
            .as_str()
            .unwrap()
            .contains("the acme issuer is not supported by kube-sandbox's cert-manager"),
        "{ready}"
    );
}

#[tokio::test]
async fn rsa_keys_are_made_with_openssl_and_an_rsa_ca_signs() {
    let sandbox = sandbox().await;
    let client = sandbox.client();
    create(
        &Api::<ClusterIssuer>::all(client.clone()),
        json!({"apiVersion": "cert-manager.io/v1", "kind": "ClusterIssuer",
               "metadata": {"name": "selfsigned"}, "spec": {"selfSigned": {}}}),
    )
    .await;
    let certificates: Api<Certificate> = Api::namespaced(client.clone(), "default");
    create(
        &certificates,
        json!({"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
               "metadata": {"name": "rsa-ca"},
               "spec": {"isCA": true, "commonName": "rsa-ca", "secretName": "rsa-ca",
                        "privateKey": {"algorithm": "RSA"},
                        "issuerRef": {"name": "selfsigned", "kind": "ClusterIssuer"}}}),
    )
    .await;
    wait_certificate(&certificates, "rsa-ca", "the RSA CA issued", is_ready).await;
    create(
        &Api::<Issuer>::namespaced(client.clone(), "default"),
        json!({"apiVersion": "cert-manager.io/v1", "kind": "Issuer",
               "metadata": {"name": "rsa-ca"}, "spec": {"ca": {"secretName": "rsa-ca"}}}),
    )
    .await;
    create(
        &certificates,
        json!({"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
               "metadata": {"name": "rsa-leaf"},
               "spec": {"secretName": "rsa-leaf", "dnsNames": ["rsa.example"],
                        "privateKey": {"algorithm": "RSA", "size": 2048, "encoding": "PKCS8"},
                        "issuerRef": {"name": "rsa-ca"}}}),
    )
    .await;
    wait_certificate(&certificates, "rsa-leaf", "the RSA leaf issued", is_ready).await;
    let secrets: Api<Secret> = Api::namespaced(client, "default");
    let ca = secret_files(&secrets.get("rsa-ca").await.unwrap());
    assert!(
        String::from_utf8_lossy(&ca["tls.key"]).starts_with("-----BEGIN RSA PRIVATE KEY-----"),
        "PKCS1 by default"
    );
    openssl(&ca, &["rsa", "-in", "tls.key", "-check", "-noout"]);
    let leaf = secret_files(&secrets.get("rsa-leaf").await.unwrap());
    assert!(String::from_utf8_lossy(&leaf["tls.key"]).starts_with("-----BEGIN PRIVATE KEY-----"));
    let verified = openssl(&leaf, &["verify", "-CAfile", "ca.crt", "tls.crt"]);
    assert_eq!(verified.trim(), "tls.crt: OK");
    let text = openssl(&leaf, &["x509", "-in", "tls.crt", "-noout", "-text"]);
    for expected in [
        "Signature Algorithm: sha256WithRSAEncryption",
        "Public-Key: (2048 bit)",
        "Issuer: CN = rsa-ca",
    ] {
        assert!(
            text.contains(expected),
            "{expected:?} missing from:\n{text}"
        );
    }
}

const MANIFEST: &str = r#"
apiVersion: cert-manager.io/v1
kind: ClusterIssuer
metadata:
  name: selfsigned
spec:
  selfSigned: {}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata:
  name: web
  namespace: default
spec:
  secretName: web-tls
  commonName: web.example
  dnsNames: [web.example]
  duration: 2160h
  issuerRef:
    name: selfsigned
    kind: ClusterIssuer
    group: cert-manager.io
"#;

#[tokio::test]
async fn kubectl_applies_and_lists_certificates() {
    let sandbox = sandbox().await;
    let applied = apply(&sandbox, MANIFEST).await.ok();
    assert!(
        applied.contains("clusterissuer.cert-manager.io/selfsigned created"),
        "{applied}"
    );
    assert!(
        applied.contains("certificate.cert-manager.io/web created"),
        "{applied}"
    );
    let certificates: Api<Certificate> = Api::namespaced(sandbox.client(), "default");
    wait_certificate(&certificates, "web", "the certificate issued", is_ready).await;
    let table = kubectl(&sandbox, &["get", "certificates"]).await.ok();
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "READY", "SECRET", "AGE"]);
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(&row[..3], ["web", "True", "web-tls"]);
    let wide = kubectl(&sandbox, &["get", "certs", "-o", "wide"])
        .await
        .ok();
    assert!(wide.contains("ISSUER"), "{wide}");
    assert!(
        wide.contains("Certificate is up to date and has not expired"),
        "{wide}"
    );
    let issuers = kubectl(&sandbox, &["get", "ciss"]).await.ok();
    assert!(issuers.contains("selfsigned   True"), "{issuers}");
    let waited = kubectl(
        &sandbox,
        &[
            "wait",
            "--for=condition=Ready",
            "certificate/web",
            "--timeout=10s",
        ],
    )
    .await
    .ok();
    assert!(waited.contains("condition met"), "{waited}");
    // Its Events, published right after the status.
    let expected = [
        "Issuing certificate as Secret does not exist",
        "The certificate has been successfully issued",
    ];
    let mut described = String::new();
    for _ in 0..50 {
        described = kubectl(&sandbox, &["describe", "certificate", "web"])
            .await
            .ok();
        if expected.iter().all(|e| described.contains(e)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for line in expected {
        assert!(
            described.contains(line),
            "{line:?} missing from:\n{described}"
        );
    }
    // The same manifest again changes nothing.
    let again = apply(&sandbox, MANIFEST).await.ok();
    assert!(
        again.contains("certificate.cert-manager.io/web unchanged"),
        "{again}"
    );
    let categories = kubectl(&sandbox, &["get", "cert-manager", "-A"]).await.ok();
    assert!(
        categories.contains("certificate.cert-manager.io/web"),
        "{categories}"
    );
}

#[test]
fn kube_sandbox_up_with_cert_manager_serves_and_issues() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_kube-sandbox"))
        .args(["up", "--api-only", "--cert-manager", "--dir"])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kube-sandbox starts");
    let mut first_line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first_line)
        .unwrap();
    assert_eq!(first_line, "ready\n");
    let kubectl = |args: &[&str], input: Option<&str>| {
        use std::io::Write;
        let mut command = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(dir.path().join("kubeconfig"))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        if let Some(text) = input {
            command
                .stdin
                .take()
                .unwrap()
                .write_all(text.as_bytes())
                .unwrap();
        }
        drop(command.stdin.take());
        let output = command.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    kubectl(&["apply", "-f", "-"], Some(MANIFEST));
    let waited = kubectl(
        &[
            "wait",
            "--for=condition=Ready",
            "certificate/web",
            "--timeout=20s",
        ],
        None,
    );
    assert!(waited.contains("condition met"), "{waited}");
    let secret_type = kubectl(
        &["get", "secret", "web-tls", "-o", "jsonpath={.type}"],
        None,
    );
    assert_eq!(secret_type, "kubernetes.io/tls");
    let namespaces = kubectl(&["get", "namespace", "cert-manager", "-o", "name"], None);
    assert_eq!(namespaces.trim(), "namespace/cert-manager");
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    for _ in 0..100 {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "exits cleanly: {status}");
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    panic!("kube-sandbox did not stop on SIGTERM");
}
