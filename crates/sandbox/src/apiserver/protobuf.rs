//! The few protobuf request bodies kubectl and helm send that the sandbox decodes: their typed
//! clients encode built-in kinds as protobuf (`k8s\0` + `runtime.Unknown`). Only the kinds in
//! [`MESSAGES`] are understood (`kubectl auth can-i`, `kubectl create namespace|configmap|
//! secret|serviceaccount`, the `DeleteOptions` of client-go's typed deletes, which helm's
//! release storage sends); anything else is refused with a message that says to send JSON or
//! YAML.

use serde_json::{Map, Value};

/// A message's fields: tag → name and type.
type Fields = &'static [(u64, &'static str, FieldType)];

#[derive(Clone, Copy)]
enum FieldType {
    String,
    Bool,
    /// `int64` (a varint), a number in JSON.
    Int,
    /// `repeated string`
    StringList,
    /// `map<string, string>`
    StringMap,
    /// `map<string, bytes>`, base64 in JSON.
    BytesMap,
    Message(Fields),
    /// A field kubectl may send that the sandbox does not need (e.g. selector attributes).
    Skip,
}

const RESOURCE_ATTRIBUTES: Fields = &[
    (1, "namespace", FieldType::String),
    (2, "verb", FieldType::String),
    (3, "group", FieldType::String),
    (4, "version", FieldType::String),
    (5, "resource", FieldType::String),
    (6, "subresource", FieldType::String),
    (7, "name", FieldType::String),
    (8, "fieldSelector", FieldType::Skip),
    (9, "labelSelector", FieldType::Skip),
];
const NON_RESOURCE_ATTRIBUTES: Fields = &[
    (1, "path", FieldType::String),
    (2, "verb", FieldType::String),
];
const SELF_SUBJECT_ACCESS_REVIEW_SPEC: Fields = &[
    (
        1,
        "resourceAttributes",
        FieldType::Message(RESOURCE_ATTRIBUTES),
    ),
    (
        2,
        "nonResourceAttributes",
        FieldType::Message(NON_RESOURCE_ATTRIBUTES),
    ),
];
const SELF_SUBJECT_ACCESS_REVIEW: Fields = &[
    (1, "metadata", FieldType::Skip),
    (
        2,
        "spec",
        FieldType::Message(SELF_SUBJECT_ACCESS_REVIEW_SPEC),
    ),
    (3, "status", FieldType::Skip),
];
const SELF_SUBJECT_RULES_REVIEW_SPEC: Fields = &[(1, "namespace", FieldType::String)];
const SELF_SUBJECT_RULES_REVIEW: Fields = &[
    (1, "metadata", FieldType::Skip),
    (
        2,
        "spec",
        FieldType::Message(SELF_SUBJECT_RULES_REVIEW_SPEC),
    ),
    (3, "status", FieldType::Skip),
];

/// The parts of ObjectMeta a client sets on create.
const OBJECT_META: Fields = &[
    (1, "name", FieldType::String),
    (2, "generateName", FieldType::String),
    (3, "namespace", FieldType::String),
    (11, "labels", FieldType::StringMap),
    (12, "annotations", FieldType::StringMap),
    (14, "finalizers", FieldType::StringList),
];
const NAMESPACE_SPEC: Fields = &[(1, "finalizers", FieldType::StringList)];
const NAMESPACE: Fields = &[
    (1, "metadata", FieldType::Message(OBJECT_META)),
    (2, "spec", FieldType::Message(NAMESPACE_SPEC)),
];
const CONFIG_MAP: Fields = &[
    (1, "metadata", FieldType::Message(OBJECT_META)),
    (2, "data", FieldType::StringMap),
    (3, "binaryData", FieldType::BytesMap),
    (4, "immutable", FieldType::Bool),
];
const SECRET: Fields = &[
    (1, "metadata", FieldType::Message(OBJECT_META)),
    (2, "data", FieldType::BytesMap),
    (3, "type", FieldType::String),
    (4, "stringData", FieldType::StringMap),
    (5, "immutable", FieldType::Bool),
];
const SERVICE_ACCOUNT: Fields = &[
    (1, "metadata", FieldType::Message(OBJECT_META)),
    (4, "automountServiceAccountToken", FieldType::Bool),
];

const PRECONDITIONS: Fields = &[
    (1, "uid", FieldType::String),
    (2, "resourceVersion", FieldType::String),
];
const DELETE_OPTIONS: Fields = &[
    (1, "gracePeriodSeconds", FieldType::Int),
    (2, "preconditions", FieldType::Message(PRECONDITIONS)),
    (3, "orphanDependents", FieldType::Bool),
    (4, "propagationPolicy", FieldType::String),
    (5, "dryRun", FieldType::StringList),
    (
        6,
        "ignoreStoreReadErrorWithClusterBreakingPotential",
        FieldType::Bool,
    ),
];

/// The kinds whose protobuf encoding the sandbox reads.
const MESSAGES: &[(&str, Fields)] = &[
    ("SelfSubjectAccessReview", SELF_SUBJECT_ACCESS_REVIEW),
    ("SelfSubjectRulesReview", SELF_SUBJECT_RULES_REVIEW),
    ("Namespace", NAMESPACE),
    ("ConfigMap", CONFIG_MAP),
    ("Secret", SECRET),
    ("ServiceAccount", SERVICE_ACCOUNT),
    ("DeleteOptions", DELETE_OPTIONS),
];

/// The body as JSON, or `None` when it is not a protobuf encoding of a kind the sandbox reads.
pub fn decode(body: &[u8]) -> Option<Value> {
    let envelope = body.strip_prefix(b"k8s\0")?;
    let mut type_meta = None;
    let mut raw = None;
    for (tag, value) in fields(envelope)? {
        match (tag, value) {
            (1, Wire::Bytes(bytes)) => type_meta = Some(bytes),
            (2, Wire::Bytes(bytes)) => raw = Some(bytes),
            _ => {}
        }
    }
    let mut api_version = String::new();
    let mut kind = String::new();
    for (tag, value) in fields(type_meta?)? {
        let Wire::Bytes(bytes) = value else { continue };
        let text = String::from_utf8(bytes.to_vec()).ok()?;
        match tag {
            1 => api_version = text,
            2 => kind = text,
            _ => {}
        }
    }
    let (_, table) = MESSAGES.iter().find(|(name, _)| *name == kind)?;
    // An object of all defaults may come with no raw bytes at all.
    let mut object = message(raw.unwrap_or(&[]), table)?;
    object.insert("apiVersion".into(), Value::String(api_version));
    object.insert("kind".into(), Value::String(kind));
    Some(Value::Object(object))
}

fn message(bytes: &[u8], table: Fields) -> Option<Map<String, Value>> {
    let mut object = Map::new();
    for (tag, value) in fields(bytes)? {
        let Some((_, name, field_type)) = table.iter().find(|(t, _, _)| *t == tag) else {
            continue;
        };
        let name = name.to_string();
        match (field_type, value) {
            (FieldType::String, Wire::Bytes(bytes)) => {
                object.insert(name, Value::String(text(bytes)?));
            }
            (FieldType::Bool, Wire::Varint(n)) => {
                object.insert(name, Value::Bool(n != 0));
            }
            (FieldType::Int, Wire::Varint(n)) => {
                // Two's complement, as protobuf encodes a negative int64.
                object.insert(name, Value::from(n as i64));
            }
            (FieldType::StringList, Wire::Bytes(bytes)) => {
                let list = object
                    .entry(name)
                    .or_insert_with(|| Value::Array(Vec::new()));
                list.as_array_mut()?.push(Value::String(text(bytes)?));
            }
            (FieldType::StringMap | FieldType::BytesMap, Wire::Bytes(entry)) => {
                let (key, value) = map_entry(entry)?;
                let value = match field_type {
                    FieldType::BytesMap => {
                        use base64::Engine;
                        base64::engine::general_purpose::STANDARD.encode(value)
                    }
                    _ => text(value)?,
                };
                let map = object
                    .entry(name)
                    .or_insert_with(|| Value::Object(Map::new()));
                map.as_object_mut()?.insert(key, Value::String(value));
            }
            (FieldType::Message(inner), Wire::Bytes(bytes)) => {
                object.insert(name, Value::Object(message(bytes, inner)?));
            }
            (FieldType::Skip, _) => {}
            _ => return None,
        }
    }
    Some(object)
}

fn text(bytes: &[u8]) -> Option<String> {
    String::from_utf8(bytes.to_vec()).ok()
}

/// A map entry: `key = 1`, `value = 2`.
fn map_entry(bytes: &[u8]) -> Option<(String, &[u8])> {
    let (mut key, mut value) = (String::new(), &[][..]);
    for (tag, field) in fields(bytes)? {
        match (tag, field) {
            (1, Wire::Bytes(bytes)) => key = text(bytes)?,
            (2, Wire::Bytes(bytes)) => value = bytes,
            _ => {}
        }
    }
    Some((key, value))
}

/// One field's value on the wire.
#[derive(Clone, Copy)]
enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

/// The fields of a message in order (tag, value); fixed-width fields are skipped.
fn fields(mut bytes: &[u8]) -> Option<Vec<(u64, Wire<'_>)>> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let key = varint(&mut bytes)?;
        let (tag, wire_type) = (key >> 3, key & 7);
        match wire_type {
            0 => out.push((tag, Wire::Varint(varint(&mut bytes)?))),
            1 => bytes = bytes.get(8..)?,
            2 => {
                let length = usize::try_from(varint(&mut bytes)?).ok()?;
                out.push((tag, Wire::Bytes(bytes.get(..length)?)));
                bytes = &bytes[length..];
            }
            5 => bytes = bytes.get(4..)?,
            _ => return None,
        }
    }
    Some(out)
}

fn varint(bytes: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = bytes.split_first()?;
        *bytes = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(tag: u8, bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![(tag << 3) | 2, bytes.len() as u8];
        out.extend_from_slice(bytes);
        out
    }

    #[test]
    fn decodes_the_access_review_kubectl_auth_can_i_sends() {
        let attributes = [field(1, b"default"), field(2, b"list"), field(5, b"pods")].concat();
        let spec = field(1, &attributes);
        let review = field(2, &spec);
        let type_meta = [
            field(1, b"authorization.k8s.io/v1"),
            field(2, b"SelfSubjectAccessReview"),
        ]
        .concat();
        let unknown = [field(1, &type_meta), field(2, &review)].concat();
        let body = [b"k8s\0".as_slice(), &unknown].concat();
        let decoded = decode(&body).unwrap();
        assert_eq!(decoded["kind"], "SelfSubjectAccessReview");
        assert_eq!(decoded["spec"]["resourceAttributes"]["verb"], "list");
        assert_eq!(
            decoded["spec"]["resourceAttributes"]["namespace"],
            "default"
        );
        assert!(decode(b"{}").is_none());
    }

    #[test]
    fn decodes_a_config_map_with_labels_and_binary_data() {
        let entry = |k: &[u8], v: &[u8]| [field(1, k), field(2, v)].concat();
        let metadata = [field(1, b"cm"), field(11, &entry(b"app", b"etcd"))].concat();
        let config_map = [
            field(1, &metadata),
            field(2, &entry(b"a", b"1")),
            field(3, &entry(b"b", b"\x00\x01")),
            vec![4 << 3, 1],
        ]
        .concat();
        let type_meta = [field(1, b"v1"), field(2, b"ConfigMap")].concat();
        let body = [
            b"k8s\0".as_slice(),
            &field(1, &type_meta),
            &field(2, &config_map),
        ]
        .concat();
        let decoded = decode(&body).unwrap();
        assert_eq!(decoded["metadata"]["name"], "cm");
        assert_eq!(decoded["metadata"]["labels"]["app"], "etcd");
        assert_eq!(decoded["data"]["a"], "1");
        assert_eq!(decoded["binaryData"]["b"], "AAE=");
        assert_eq!(decoded["immutable"], true);
    }

    #[test]
    fn decodes_the_delete_options_of_a_typed_delete() {
        // What client-go sends for helm's `Secrets().Delete(name, DeleteOptions{...})`.
        let preconditions = [field(1, b"5f0c"), field(2, b"42")].concat();
        let options = [
            vec![1 << 3, 30],
            field(2, &preconditions),
            field(4, b"Foreground"),
            field(5, b"All"),
        ]
        .concat();
        let type_meta = [field(1, b"v1"), field(2, b"DeleteOptions")].concat();
        let body = [
            b"k8s\0".as_slice(),
            &field(1, &type_meta),
            &field(2, &options),
        ]
        .concat();
        let decoded = decode(&body).unwrap();
        assert_eq!(decoded["kind"], "DeleteOptions");
        assert_eq!(decoded["gracePeriodSeconds"], 30);
        assert_eq!(decoded["preconditions"]["uid"], "5f0c");
        assert_eq!(decoded["preconditions"]["resourceVersion"], "42");
        assert_eq!(decoded["propagationPolicy"], "Foreground");
        assert_eq!(decoded["dryRun"], serde_json::json!(["All"]));
        // An empty DeleteOptions (all defaults) decodes to no fields.
        let empty = [b"k8s\0".as_slice(), &field(1, &type_meta), &field(2, b"")].concat();
        assert_eq!(decode(&empty).unwrap()["kind"], "DeleteOptions");
    }
}
