//! The CustomResourceDefinitions of `cert-manager.io/v1` `Certificate`, `Issuer` and
//! `ClusterIssuer`, written for the sandbox after cert-manager's published API (v1.21): the
//! same names, short names, categories, printer columns and status subresource; field names,
//! types, enums and required lists as cert-manager publishes them for every field the stand-in
//! models. Subtrees it does not model (ACME, Vault and Venafi issuers, keystores, name
//! constraints, other names, renewal windows, ACME status) keep whatever they are given
//! (`x-kubernetes-preserve-unknown-fields`), so manifests written for cert-manager apply
//! unchanged; the controller says so when one of them is set where it matters.

use serde_json::{Value, json};

use super::types::GROUP;

fn string() -> Value {
    json!({"type": "string"})
}

fn boolean() -> Value {
    json!({"type": "boolean"})
}

fn date_time() -> Value {
    json!({"type": "string", "format": "date-time"})
}

fn strings() -> Value {
    json!({"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "atomic"})
}

fn string_map() -> Value {
    json!({"type": "object", "additionalProperties": {"type": "string"}})
}

fn enumeration(values: &[&str]) -> Value {
    json!({"type": "string", "enum": values})
}

/// An object the stand-in does not look into: anything is kept.
fn unmodelled(description: &str) -> Value {
    json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true, "description": description})
}

/// The key usages cert-manager accepts (`KeyUsage` in its API).
pub const KEY_USAGES: &[&str] = &[
    "signing",
    "digital signature",
    "content commitment",
    "key encipherment",
    "key agreement",
    "data encipherment",
    "cert sign",
    "crl sign",
    "encipher only",
    "decipher only",
    "any",
    "server auth",
    "client auth",
    "code signing",
    "email protection",
    "s/mime",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "timestamping",
    "ocsp signing",
    "microsoft sgc",
    "netscape sgc",
];

fn conditions() -> Value {
    json!({
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "items": {
            "type": "object",
            "required": ["status", "type"],
            "properties": {
                "lastTransitionTime": date_time(),
                "message": string(),
                "observedGeneration": {"type": "integer", "format": "int64"},
                "reason": string(),
                "status": enumeration(&["True", "False", "Unknown"]),
                "type": string(),
            },
        },
    })
}

fn ready_columns() -> Vec<Value> {
    vec![
        json!({"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type == \"Ready\")].status"}),
        json!({"name": "Status", "type": "string", "priority": 1, "jsonPath": ".status.conditions[?(@.type == \"Ready\")].message"}),
    ]
}

fn age_column() -> Value {
    json!({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"})
}

fn crd(
    plural: &str,
    kind: &str,
    scope: &str,
    short_names: &[&str],
    columns: Vec<Value>,
    root: Value,
) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": format!("{plural}.{GROUP}"),
            "labels": {"app.kubernetes.io/name": "cert-manager", "app.kubernetes.io/instance": "kube-sandbox"},
        },
        "spec": {
            "group": GROUP,
            "names": {
                "kind": kind,
                "listKind": format!("{kind}List"),
                "plural": plural,
                "singular": kind.to_lowercase(),
                "shortNames": short_names,
                "categories": ["cert-manager"],
            },
            "scope": scope,
            "versions": [{
                "name": "v1",
                "served": true,
                "storage": true,
                "subresources": {"status": {}},
                "additionalPrinterColumns": columns,
                "schema": {"openAPIV3Schema": root},
            }],
        },
    })
}

fn certificate_spec() -> Value {
    json!({
        "type": "object",
        "required": ["issuerRef", "secretName"],
        "properties": {
            "additionalOutputFormats": {
                "type": "array",
                "x-kubernetes-list-type": "atomic",
                "items": {"type": "object", "required": ["type"], "properties": {"type": enumeration(&["DER", "CombinedPEM"])}},
            },
            "commonName": string(),
            "dnsNames": strings(),
            "duration": string(),
            "emailAddresses": strings(),
            "encodeUsagesInRequest": boolean(),
            "ipAddresses": strings(),
            "isCA": boolean(),
            "issuerRef": {
                "type": "object",
                "required": ["name"],
                "properties": {"group": string(), "kind": string(), "name": string()},
            },
            "keystores": unmodelled("JKS and PKCS#12 keystores: not produced by kube-sandbox"),
            "literalSubject": string(),
            "nameConstraints": unmodelled("X.509 name constraints: not supported by kube-sandbox"),
            "otherNames": {
                "type": "array",
                "x-kubernetes-list-type": "atomic",
                "items": {"type": "object", "properties": {"oid": string(), "utf8Value": string()}},
            },
            "privateKey": {
                "type": "object",
                "properties": {
                    "algorithm": enumeration(&["RSA", "ECDSA", "Ed25519"]),
                    "encoding": enumeration(&["PKCS1", "PKCS8"]),
                    "rotationPolicy": enumeration(&["Never", "Always"]),
                    "size": {"type": "integer"},
                },
            },
            "renewBefore": string(),
            "renewBeforePercentage": {"type": "integer", "format": "int32"},
            "renewal": {
                "type": "object",
                "properties": {
                    "policy": enumeration(&["RenewBefore", "Disabled"]),
                    "windows": {
                        "type": "array",
                        "x-kubernetes-list-type": "atomic",
                        "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    },
                },
            },
            "revisionHistoryLimit": {"type": "integer", "format": "int32"},
            "secretName": string(),
            "secretTemplate": {
                "type": "object",
                "properties": {"annotations": string_map(), "labels": string_map()},
            },
            "signatureAlgorithm": enumeration(&[
                "SHA256WithRSA", "SHA384WithRSA", "SHA512WithRSA",
                "ECDSAWithSHA256", "ECDSAWithSHA384", "ECDSAWithSHA512", "PureEd25519",
            ]),
            "subject": {
                "type": "object",
                "properties": {
                    "countries": strings(),
                    "localities": strings(),
                    "organizationalUnits": strings(),
                    "organizations": strings(),
                    "postalCodes": strings(),
                    "provinces": strings(),
                    "serialNumber": string(),
                    "streetAddresses": strings(),
                },
            },
            "uris": strings(),
            "usages": {
                "type": "array",
                "x-kubernetes-list-type": "atomic",
                "items": enumeration(KEY_USAGES),
            },
        },
    })
}

fn certificate_status() -> Value {
    json!({
        "type": "object",
        "properties": {
            "acme": unmodelled("ACME renewal information: never set by kube-sandbox"),
            "conditions": conditions(),
            "failedIssuanceAttempts": {"type": "integer"},
            "lastFailureTime": date_time(),
            "nextPrivateKeySecretName": string(),
            "notAfter": date_time(),
            "notBefore": date_time(),
            "renewalTime": date_time(),
            "revision": {"type": "integer"},
        },
    })
}

fn root(spec: Value, status: Value, required_spec: bool) -> Value {
    let mut root = json!({
        "type": "object",
        "properties": {
            "apiVersion": string(),
            "kind": string(),
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
    });
    if required_spec {
        root["required"] = json!(["spec"]);
    }
    root
}

fn issuer_spec() -> Value {
    json!({
        "type": "object",
        "properties": {
            "acme": unmodelled("ACME issuer: not supported by kube-sandbox"),
            "ca": {
                "type": "object",
                "required": ["secretName"],
                "properties": {
                    "crlDistributionPoints": strings(),
                    "issuingCertificateURLs": strings(),
                    "ocspServers": strings(),
                    "secretName": string(),
                },
            },
            "selfSigned": {
                "type": "object",
                "properties": {"crlDistributionPoints": strings()},
            },
            "vault": unmodelled("Vault issuer: not supported by kube-sandbox"),
            "venafi": unmodelled("Venafi issuer: not supported by kube-sandbox"),
        },
    })
}

fn issuer_status() -> Value {
    json!({
        "type": "object",
        "properties": {
            "acme": unmodelled("ACME account status: never set by kube-sandbox"),
            "conditions": conditions(),
        },
    })
}

/// The Certificate CRD.
pub fn certificates() -> Value {
    let mut columns = vec![ready_columns()[0].clone()];
    columns.push(json!({"name": "Secret", "type": "string", "jsonPath": ".spec.secretName"}));
    columns.push(json!({"name": "Issuer", "type": "string", "priority": 1, "jsonPath": ".spec.issuerRef.name"}));
    columns.push(ready_columns()[1].clone());
    columns.push(json!({"name": "Expiration", "type": "string", "priority": 1, "jsonPath": ".status.notAfter"}));
    columns.push(age_column());
    let mut crd = crd(
        "certificates",
        "Certificate",
        "Namespaced",
        &["cert", "certs"],
        columns,
        root(certificate_spec(), certificate_status(), false),
    );
    crd["spec"]["versions"][0]["selectableFields"] = json!([
        {"jsonPath": ".spec.issuerRef.group"},
        {"jsonPath": ".spec.issuerRef.kind"},
        {"jsonPath": ".spec.issuerRef.name"},
    ]);
    crd
}

/// The Issuer CRD.
pub fn issuers() -> Value {
    let mut columns = ready_columns();
    columns.push(age_column());
    crd(
        "issuers",
        "Issuer",
        "Namespaced",
        &["iss"],
        columns,
        root(issuer_spec(), issuer_status(), true),
    )
}

/// The ClusterIssuer CRD.
pub fn cluster_issuers() -> Value {
    let mut columns = ready_columns();
    columns.push(age_column());
    crd(
        "clusterissuers",
        "ClusterIssuer",
        "Cluster",
        &["ciss"],
        columns,
        root(issuer_spec(), issuer_status(), true),
    )
}

/// The three CRDs, in the order they are created.
pub fn all() -> Vec<Value> {
    vec![certificates(), issuers(), cluster_issuers()]
}
