//! Old-to-new correlation of values on update (apiserver's `common.CorrelatedObject`).
//!
//! Object fields correlate by name and `x-kubernetes-list-type: map` items by their keys;
//! atomic and set lists do not correlate per item. Correlation drives validation ratcheting (an
//! unchanged correlated value keeps its old errors as warnings) and `oldSelf` in CEL rules.

use serde_json::Value;

use super::node::{ListType, Node};

/// A new value and, when it correlates, the old value at the same place.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Correlation<'a> {
    new: Option<&'a Value>,
    old: Option<&'a Value>,
}

impl<'a> Correlation<'a> {
    /// The whole object and its stored version (`None` on create).
    pub(crate) fn root(new: &'a Value, old: Option<&'a Value>) -> Self {
        Correlation {
            new: Some(new),
            old,
        }
    }

    /// A subtree that does not correlate (inside anyOf branches, atomic list items, ...).
    pub(crate) fn detached() -> Self {
        Correlation {
            new: None,
            old: None,
        }
    }

    /// Whether this value correlates and did not change.
    pub(crate) fn unchanged(&self) -> bool {
        matches!((self.new, self.old), (Some(new), Some(old)) if new == old)
    }

    /// The correlation of field `key` of an object described by `node`.
    pub(crate) fn key(&self, node: &Node, key: &str) -> Correlation<'a> {
        let (Some(Value::Object(new)), Some(Value::Object(old))) = (self.new, self.old) else {
            return Correlation::detached();
        };
        if !node.properties.contains_key(key) && node.additional_schema().is_none() {
            return Correlation::detached();
        }
        match (new.get(key), old.get(key)) {
            (Some(new_child), Some(old_child)) => Correlation {
                new: Some(new_child),
                old: Some(old_child),
            },
            _ => Correlation::detached(),
        }
    }

    /// The correlation of item `index` of a list described by `node`: only map lists correlate.
    pub(crate) fn index(&self, node: &Node, index: usize) -> Correlation<'a> {
        let (Some(Value::Array(new)), Some(Value::Array(old))) = (self.new, self.old) else {
            return Correlation::detached();
        };
        if node.list_semantics() != ListType::Map {
            return Correlation::detached();
        }
        let Some(item) = new.get(index) else {
            return Correlation::detached();
        };
        match find_by_keys(&node.list_map_keys, old, item) {
            Some(old_item) => Correlation {
                new: Some(item),
                old: Some(old_item),
            },
            None => Correlation::detached(),
        }
    }
}

/// The item of `list` whose map keys equal those of `item` (apiserver's `MapList.Get`).
pub(crate) fn find_by_keys<'a>(
    keys: &[String],
    list: &'a [Value],
    item: &Value,
) -> Option<&'a Value> {
    let wanted = item.as_object()?;
    list.iter().find(|candidate| {
        candidate
            .as_object()
            .is_some_and(|candidate| keys.iter().all(|key| candidate.get(key) == wanted.get(key)))
    })
}
