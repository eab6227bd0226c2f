//! Versions of one kind share storage. Custom resources convert with strategy `None` (only
//! `apiVersion` changes); `events.k8s.io/v1` Events are core/v1 Events with renamed fields.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::registry::ResourceType;

/// events.k8s.io/v1 field ↔ core/v1 field.
const EVENT_FIELDS: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

fn is_events_api(kind: &ResourceType) -> bool {
    kind.group == "events.k8s.io"
}

/// The object as stored, from a body sent to `kind`.
pub fn to_storage(kind: &ResourceType, mut object: Value) -> Value {
    if is_events_api(kind) {
        rename(
            &mut object,
            EVENT_FIELDS.iter().map(|(new, old)| (*new, *old)),
        );
        object["apiVersion"] = Value::String("v1".into());
    }
    object
}

/// The stored object as `kind` at `version` presents it.
pub fn from_storage<'a>(kind: &ResourceType, version: &str, stored: &'a Value) -> Cow<'a, Value> {
    let api_version = kind.api_version(version);
    if stored["apiVersion"].as_str() == Some(api_version.as_str()) {
        return Cow::Borrowed(stored);
    }
    let mut object = stored.clone();
    if is_events_api(kind) {
        rename(
            &mut object,
            EVENT_FIELDS.iter().map(|(new, old)| (*old, *new)),
        );
    }
    object["apiVersion"] = Value::String(api_version);
    Cow::Owned(object)
}

fn rename<'a>(object: &mut Value, pairs: impl Iterator<Item = (&'a str, &'a str)>) {
    let Some(map) = object.as_object_mut() else {
        return;
    };
    let mut moved = Map::new();
    for (from, to) in pairs {
        if let Some(value) = map.remove(from) {
            moved.insert(to.to_string(), value);
        }
    }
    map.extend(moved);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::kinds::builtin_kinds;
    use serde_json::json;

    #[test]
    fn events_api_events_are_core_events_in_storage() {
        let kinds = builtin_kinds();
        let events = kinds.iter().find(|k| k.group == "events.k8s.io").unwrap();
        let stored = to_storage(
            events,
            json!({"apiVersion": "events.k8s.io/v1", "note": "hi", "regarding": {"name": "p"}}),
        );
        assert_eq!(stored["message"], "hi");
        assert_eq!(stored["involvedObject"]["name"], "p");
        let back = from_storage(events, "v1", &stored);
        assert_eq!(back["note"], "hi");
        assert_eq!(back["apiVersion"], "events.k8s.io/v1");
    }
}
