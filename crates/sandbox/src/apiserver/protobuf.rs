//! The few protobuf request bodies kubectl sends that the sandbox decodes: kubectl's typed
//! clients encode built-in kinds as protobuf (`k8s\0` + `runtime.Unknown`). Only the kinds in
//! [`MESSAGES`] are understood (what `kubectl auth can-i` sends); anything else is refused with
//! a message that says to send JSON or YAML.

use serde_json::{Map, Value};

/// A message's fields: tag → name and type.
type Fields = &'static [(u64, &'static str, FieldType)];

#[derive(Clone, Copy)]
enum FieldType {
    String,
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
/// The kinds whose protobuf encoding the sandbox reads.
const MESSAGES: &[(&str, Fields)] = &[("SelfSubjectAccessReview", SELF_SUBJECT_ACCESS_REVIEW)];

/// The body as JSON, or `None` when it is not a protobuf encoding of a kind the sandbox reads.
pub fn decode(body: &[u8]) -> Option<Value> {
    let envelope = body.strip_prefix(b"k8s\0")?;
    let mut type_meta = None;
    let mut raw = None;
    for (tag, bytes) in fields(envelope)? {
        match tag {
            1 => type_meta = Some(bytes),
            2 => raw = Some(bytes),
            _ => {}
        }
    }
    let mut api_version = String::new();
    let mut kind = String::new();
    for (tag, bytes) in fields(type_meta?)? {
        let text = String::from_utf8(bytes.to_vec()).ok()?;
        match tag {
            1 => api_version = text,
            2 => kind = text,
            _ => {}
        }
    }
    let (_, table) = MESSAGES.iter().find(|(name, _)| *name == kind)?;
    let mut object = message(raw?, table)?;
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
        let decoded = match field_type {
            FieldType::String => Value::String(String::from_utf8(value.to_vec()).ok()?),
            FieldType::Message(inner) => Value::Object(message(value, inner)?),
            FieldType::Skip => continue,
        };
        object.insert(name.to_string(), decoded);
    }
    Some(object)
}

/// The length-delimited fields of a message (tag, bytes); varint fields are skipped.
fn fields(mut bytes: &[u8]) -> Option<Vec<(u64, &[u8])>> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let key = varint(&mut bytes)?;
        let (tag, wire_type) = (key >> 3, key & 7);
        match wire_type {
            0 => {
                varint(&mut bytes)?;
            }
            1 => bytes = bytes.get(8..)?,
            2 => {
                let length = usize::try_from(varint(&mut bytes)?).ok()?;
                out.push((tag, bytes.get(..length)?));
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
}
