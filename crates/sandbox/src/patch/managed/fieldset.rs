//! Sets of field paths as structured-merge-diff keeps them (`fieldpath.Set`) and their
//! `fieldsV1` encoding: `f:<field>`, `k:{"key":value}` for map-list items, `v:<value>` for set
//! items, `i:<index>`, and `.` for a path that is itself a member and also has children.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// One step of a field path, in its `fieldsV1` spelling (`f:spec`, `k:{"name":"a"}`, ...).
pub(crate) type Element = String;

/// A field in an object.
pub(crate) fn field(name: &str) -> Element {
    format!("f:{name}")
}

/// A map-list item by its keys (sorted by name, as structured-merge-diff sorts them).
pub(crate) fn key(fields: &[(String, Value)]) -> Element {
    let mut sorted: Vec<&(String, Value)> = fields.iter().collect();
    sorted.sort_by(|left, right| left.0.cmp(&right.0));
    let body: Vec<String> = sorted
        .iter()
        .map(|(name, value)| format!("{}:{}", Value::String(name.clone()), value))
        .collect();
    format!("k:{{{}}}", body.join(","))
}

/// A set item by its value.
pub(crate) fn value(item: &Value) -> Element {
    format!("v:{item}")
}

/// An element as structured-merge-diff prints it in conflict messages: `.spec`, `[name="a"]`,
/// `[="x"]`, `[0]`.
pub(crate) fn display(element: &str) -> String {
    if let Some(name) = element.strip_prefix("f:") {
        return format!(".{name}");
    }
    if let Some(item) = element.strip_prefix("v:") {
        return format!("[={item}]");
    }
    if let Some(position) = element.strip_prefix("i:") {
        return format!("[{position}]");
    }
    if let Some(keys) = element.strip_prefix("k:")
        && let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(keys)
    {
        let parts: Vec<String> = fields
            .iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect();
        return format!("[{}]", parts.join(","));
    }
    format!("[{element}]")
}

/// A set of paths: a trie whose nodes say whether their own path is in the set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FieldSet {
    pub(crate) member: bool,
    pub(crate) children: BTreeMap<Element, FieldSet>,
}

impl FieldSet {
    pub(crate) fn new() -> FieldSet {
        FieldSet::default()
    }

    /// Whether no path is in the set.
    pub(crate) fn is_empty(&self) -> bool {
        !self.member && self.children.values().all(FieldSet::is_empty)
    }

    /// Adds `path`.
    pub(crate) fn insert(&mut self, path: &[Element]) {
        let mut node = self;
        for element in path {
            node = node.children.entry(element.clone()).or_default();
        }
        node.member = true;
    }

    pub(crate) fn union(&self, other: &FieldSet) -> FieldSet {
        let mut result = self.clone();
        result.member |= other.member;
        for (element, child) in &other.children {
            let merged = match result.children.get(element) {
                Some(existing) => existing.union(child),
                None => child.clone(),
            };
            result.children.insert(element.clone(), merged);
        }
        result.prune_empty();
        result
    }

    pub(crate) fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut result = FieldSet {
            member: self.member && other.member,
            children: BTreeMap::new(),
        };
        for (element, child) in &self.children {
            if let Some(other_child) = other.children.get(element) {
                result
                    .children
                    .insert(element.clone(), child.intersection(other_child));
            }
        }
        result.prune_empty();
        result
    }

    /// Paths of `self` that are not in `other` (members removed one by one, as `Set.Difference`).
    pub(crate) fn difference(&self, other: &FieldSet) -> FieldSet {
        let mut result = FieldSet {
            member: self.member && !other.member,
            children: BTreeMap::new(),
        };
        for (element, child) in &self.children {
            let remaining = match other.children.get(element) {
                Some(other_child) => child.difference(other_child),
                None => child.clone(),
            };
            result.children.insert(element.clone(), remaining);
        }
        result.prune_empty();
        result
    }

    fn prune_empty(&mut self) {
        self.children.retain(|_, child| !child.is_empty());
    }

    /// Every member path, in order.
    pub(crate) fn paths(&self) -> Vec<Vec<Element>> {
        let mut paths = Vec::new();
        self.collect(&mut Vec::new(), &mut paths);
        paths
    }

    fn collect(&self, prefix: &mut Vec<Element>, paths: &mut Vec<Vec<Element>>) {
        if self.member && !prefix.is_empty() {
            paths.push(prefix.clone());
        }
        for (element, child) in &self.children {
            prefix.push(element.clone());
            child.collect(prefix, paths);
            prefix.pop();
        }
    }

    /// The `fieldsV1` JSON.
    pub(crate) fn to_fields_v1(&self) -> Value {
        Value::Object(self.encode_children())
    }

    fn encode_children(&self) -> Map<String, Value> {
        let mut object = Map::new();
        for (element, child) in &self.children {
            if child.is_empty() {
                continue;
            }
            let mut encoded = child.encode_children();
            if child.member && !encoded.is_empty() {
                encoded.insert(".".into(), Value::Object(Map::new()));
            }
            object.insert(element.clone(), Value::Object(encoded));
        }
        object
    }

    /// Parses `fieldsV1`; `None` when it is not an object of objects.
    pub(crate) fn from_fields_v1(fields: &Value) -> Option<FieldSet> {
        let Value::Object(object) = fields else {
            return None;
        };
        let mut set = FieldSet::new();
        for (element, child) in object {
            if element == "." {
                continue;
            }
            let Value::Object(child_object) = child else {
                return None;
            };
            let mut child_set = FieldSet::from_fields_v1(child)?;
            child_set.member = child_object.is_empty() || child_object.contains_key(".");
            set.children.insert(element.clone(), child_set);
        }
        Some(set)
    }
}

/// A path as conflict messages print it: `.spec.containers[name="a"].image`.
pub(crate) fn path_string(path: &[Element]) -> String {
    path.iter().map(|element| display(element)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn path(elements: &[&str]) -> Vec<Element> {
        elements.iter().map(|element| element.to_string()).collect()
    }

    #[test]
    fn encodes_members_with_children_using_a_dot() {
        let mut set = FieldSet::new();
        set.insert(&path(&["f:metadata", "f:labels"]));
        set.insert(&path(&["f:metadata", "f:labels", "f:app"]));
        set.insert(&path(&["f:spec", "f:replicas"]));
        let item = key(&[("name".into(), json!("etcd"))]);
        set.insert(&path(&["f:spec", "f:containers", &item]));
        set.insert(&path(&["f:spec", "f:containers", &item, "f:image"]));
        let encoded = set.to_fields_v1();
        assert_eq!(
            encoded,
            json!({
                "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                "f:spec": {"f:replicas": {}, "f:containers": {"k:{\"name\":\"etcd\"}": {".": {}, "f:image": {}}}},
            })
        );
        assert_eq!(FieldSet::from_fields_v1(&encoded), Some(set));
    }

    #[test]
    fn set_algebra_and_display() {
        let mut left = FieldSet::new();
        left.insert(&path(&["f:spec", "f:a"]));
        left.insert(&path(&["f:spec", "f:b"]));
        let mut right = FieldSet::new();
        right.insert(&path(&["f:spec", "f:b"]));
        right.insert(&path(&["f:spec", "f:c"]));
        assert_eq!(
            left.intersection(&right).paths(),
            [path(&["f:spec", "f:b"])]
        );
        assert_eq!(left.difference(&right).paths(), [path(&["f:spec", "f:a"])]);
        assert_eq!(left.union(&right).paths().len(), 3);
        assert_eq!(
            path_string(&path(&[
                "f:spec",
                &key(&[("name".into(), json!("a")), ("port".into(), json!(80))]),
                "f:image"
            ])),
            r#".spec[name="a",port=80].image"#
        );
        assert_eq!(
            path_string(&path(&["f:metadata", "f:finalizers", &value(&json!("x"))])),
            r#".metadata.finalizers[="x"]"#
        );
    }
}
