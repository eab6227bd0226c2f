//! Object metadata the server owns: names, generateName, uid, timestamps, generation.

use rand::Rng;
use serde_json::{Value, json};

use crate::apiserver::error::StatusCause;

/// Now, as Kubernetes writes timestamps (RFC 3339, whole seconds, UTC).
pub fn now() -> String {
    timestamp_after(0)
}

/// The timestamp `seconds` from now.
pub fn timestamp_after(seconds: i64) -> String {
    let at = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(seconds);
    at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Now with microseconds, as `MicroTime` fields (events, leases) carry.
pub fn now_micro() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string()
}

pub fn new_uid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// `generateName` plus five random characters from the alphabet the real server uses.
pub fn generate_name(prefix: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    let suffix: String = (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect();
    // The prefix is cut so that the name stays a valid 63-character label.
    let keep = prefix.len().min(58);
    format!("{}{suffix}", &prefix[..keep])
}

/// Checks a name as the kind requires: DNS-1123 subdomain for most kinds, DNS-1123 label for
/// namespaces and services, and anything without `/` or `%` for RBAC objects.
pub fn validate_name(kind: &str, group: &str, name: &str) -> Vec<StatusCause> {
    let problem = if name.is_empty() {
        Some("name or generateName is required".to_string())
    } else if group == "rbac.authorization.k8s.io" {
        (name.contains('/') || name.contains('%') || name == "." || name == "..")
            .then(|| format!("{name:?}: may not contain '/' or '%'"))
    } else if matches!(kind, "Namespace" | "Service") {
        (!is_dns_label(name)).then(|| {
            format!("Invalid value: {name:?}: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
        })
    } else {
        (!is_dns_subdomain(name)).then(|| {
            format!("Invalid value: {name:?}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
        })
    };
    problem
        .map(|message| {
            vec![StatusCause {
                reason: if name.is_empty() {
                    "FieldValueRequired"
                } else {
                    "FieldValueInvalid"
                }
                .into(),
                message,
                field: "metadata.name".into(),
            }]
        })
        .unwrap_or_default()
}

pub fn is_dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

pub fn is_dns_subdomain(name: &str) -> bool {
    name.len() <= 253 && name.split('.').all(is_dns_label)
}

/// Labels and annotations must be string maps; kubectl and clients rely on it.
pub fn validate_string_maps(object: &Value) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    for field in ["labels", "annotations"] {
        let value = &object["metadata"][field];
        let ok = match value {
            Value::Null => true,
            Value::Object(map) => map.values().all(Value::is_string),
            _ => false,
        };
        if !ok {
            causes.push(StatusCause {
                reason: "FieldValueInvalid".into(),
                message: "must be a map of string keys to string values".into(),
                field: format!("metadata.{field}"),
            });
        }
    }
    causes
}

/// Everything but metadata and status: a change here bumps `metadata.generation`.
pub fn spec_changed(old: &Value, new: &Value) -> bool {
    let (Some(old), Some(new)) = (old.as_object(), new.as_object()) else {
        return old != new;
    };
    let keys = old.keys().chain(new.keys());
    for key in keys {
        if matches!(key.as_str(), "metadata" | "status" | "apiVersion" | "kind") {
            continue;
        }
        if old.get(key) != new.get(key) {
            return true;
        }
    }
    false
}

/// The metadata fields a client may never change after creation.
pub const IMMUTABLE_METADATA: &[&str] = &[
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "namespace",
    "name",
];

/// Copies the server-owned metadata of `old` into `new`.
pub fn keep_server_metadata(old: &Value, new: &mut Value) {
    if !new["metadata"].is_object() {
        new["metadata"] = json!({});
    }
    for field in IMMUTABLE_METADATA {
        match old["metadata"].get(*field) {
            Some(value) => new["metadata"][*field] = value.clone(),
            None => {
                if let Some(map) = new["metadata"].as_object_mut() {
                    map.remove(*field);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_dns_rules_per_kind() {
        assert!(validate_name("ConfigMap", "", "a.b-c").is_empty());
        assert!(!validate_name("Namespace", "", "a.b").is_empty());
        assert!(!validate_name("Pod", "", "Upper").is_empty());
        assert!(
            validate_name("ClusterRole", "rbac.authorization.k8s.io", "system:admin").is_empty()
        );
        assert_eq!(validate_name("Pod", "", "")[0].reason, "FieldValueRequired");
    }

    #[test]
    fn generated_names_keep_the_prefix_and_add_five_characters() {
        let name = generate_name("etcd-");
        assert!(name.starts_with("etcd-"));
        assert_eq!(name.len(), 10);
    }

    #[test]
    fn generation_ignores_metadata_and_status() {
        let old = json!({"metadata": {"labels": {"a": "1"}}, "spec": {"x": 1}, "status": {"y": 1}});
        let relabelled =
            json!({"metadata": {"labels": {"a": "2"}}, "spec": {"x": 1}, "status": {"y": 2}});
        assert!(!spec_changed(&old, &relabelled));
        let respec = json!({"metadata": {}, "spec": {"x": 2}});
        assert!(spec_changed(&old, &respec));
    }

    #[test]
    fn timestamps_are_rfc3339_seconds() {
        let ts = now();
        assert_eq!(ts.len(), 20);
        assert!(ts.ends_with('Z'));
    }
}
