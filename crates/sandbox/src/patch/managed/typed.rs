//! Typed operations of structured-merge-diff over JSON values: the field set a value sets
//! (`ToFieldSet`), the difference of two values (`Compare`), the merge of an applied
//! configuration into a live object (`Merge`), and the removal of paths (`RemoveItems`).

use serde_json::{Map, Value};

use super::fieldset::{Element, FieldSet, field, key, value as value_element};
use crate::patch::type_info::{ListKind, Shape, TypeNode};

/// The type used for values no schema describes.
static UNKNOWN: TypeNode = TypeNode {
    shape: Shape::Unknown,
    fields: std::collections::BTreeMap::new(),
    element: None,
    list: ListKind::Atomic,
    atomic: false,
    patch_strategy: String::new(),
    merge_key: None,
};

fn field_type<'a>(parent: &'a TypeNode, name: &str) -> &'a TypeNode {
    parent.field(name).unwrap_or(&UNKNOWN)
}

fn item_type(parent: &TypeNode) -> &TypeNode {
    parent.item().unwrap_or(&UNKNOWN)
}

/// The path element of a list item, or `None` for lists that are atomic.
fn item_element(list_type: &TypeNode, item: &Value) -> Option<Element> {
    match &list_type.list {
        ListKind::Set => Some(value_element(item)),
        ListKind::Map(keys) => {
            let fields: Vec<(String, Value)> = keys
                .iter()
                .filter_map(|name| item.get(name).map(|value| (name.clone(), value.clone())))
                .collect();
            Some(key(&fields))
        }
        ListKind::Atomic => None,
    }
}

fn is_empty_container(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => true,
        Some(Value::Array(items)) => items.is_empty(),
        Some(Value::Object(fields)) => fields.is_empty(),
        Some(_) => false,
    }
}

/// Whether the pair is compared and merged as one leaf.
fn is_leaf(lhs: Option<&Value>, rhs: Option<&Value>, node: &TypeNode) -> bool {
    let Some(sample) = rhs.or(lhs) else {
        return true;
    };
    if sample.is_null() {
        return true;
    }
    match node.shape_of(sample) {
        Shape::Scalar | Shape::Unknown => true,
        Shape::List => {
            node.is_atomic_for(sample) || (is_empty_container(lhs) && is_empty_container(rhs))
        }
        Shape::Object => node.atomic || (is_empty_container(lhs) && is_empty_container(rhs)),
    }
}

/// `ToFieldSet`: every path `value` sets.
pub(crate) fn to_field_set(value: &Value, node: &TypeNode) -> FieldSet {
    let mut set = FieldSet::new();
    walk_field_set(value, node, &mut Vec::new(), &mut set);
    set
}

fn walk_field_set(value: &Value, node: &TypeNode, path: &mut Vec<Element>, set: &mut FieldSet) {
    if value.is_null() {
        set.insert(path);
        return;
    }
    match node.shape_of(value) {
        Shape::Scalar | Shape::Unknown => set.insert(path),
        Shape::List => {
            if node.is_atomic_for(value) {
                set.insert(path);
                return;
            }
            let Value::Array(items) = value else {
                return set.insert(path);
            };
            let elements: Vec<Option<Element>> =
                items.iter().map(|item| item_element(node, item)).collect();
            for (item, element) in items.iter().zip(&elements) {
                let Some(element) = element else { continue };
                path.push(element.clone());
                if elements
                    .iter()
                    .filter(|other| other.as_ref() == Some(element))
                    .count()
                    > 1
                {
                    set.insert(path);
                } else {
                    walk_field_set(item, item_type(node), path, set);
                    set.insert(path);
                }
                path.pop();
            }
        }
        Shape::Object => {
            if node.atomic {
                set.insert(path);
                return;
            }
            let Value::Object(fields) = value else {
                return set.insert(path);
            };
            for (name, child) in fields {
                path.push(field(name));
                walk_field_set(child, field_type(node, name), path, set);
                if is_empty_container(Some(child)) && !child.is_array() || !node.declares(name) {
                    set.insert(path);
                }
                path.pop();
            }
        }
    }
}

/// `Compare`: what changed from `lhs` to `rhs`.
#[derive(Debug, Default)]
pub(crate) struct Comparison {
    pub(crate) added: FieldSet,
    pub(crate) modified: FieldSet,
    pub(crate) removed: FieldSet,
}

pub(crate) fn compare(lhs: &Value, rhs: &Value, node: &TypeNode) -> Comparison {
    let mut comparison = Comparison::default();
    walk_compare(Some(lhs), Some(rhs), node, &mut Vec::new(), &mut comparison);
    comparison
}

fn walk_compare(
    lhs: Option<&Value>,
    rhs: Option<&Value>,
    node: &TypeNode,
    path: &mut Vec<Element>,
    out: &mut Comparison,
) {
    if is_leaf(lhs, rhs, node) {
        match (lhs, rhs) {
            (None, Some(_)) => out.added.insert(path),
            (Some(_), None) => out.removed.insert(path),
            (Some(left), Some(right)) if left != right => out.modified.insert(path),
            _ => {}
        }
        return;
    }
    let sample = rhs.or(lhs).unwrap_or(&Value::Null);
    // A change of kind of value compares like a removal and an addition.
    let lhs = lhs.filter(|left| std::mem::discriminant(*left) == std::mem::discriminant(sample));
    match node.shape_of(sample) {
        Shape::List => {
            let empty = Vec::new();
            let left_items = lhs.and_then(Value::as_array).unwrap_or(&empty);
            let right_items = rhs.and_then(Value::as_array).unwrap_or(&empty);
            let mut order: Vec<Element> = Vec::new();
            let indexed = |items: &'_ [Value]| -> Vec<(Element, Value)> {
                items
                    .iter()
                    .filter_map(|item| {
                        item_element(node, item).map(|element| (element, item.clone()))
                    })
                    .collect()
            };
            let left_indexed = indexed(left_items);
            let right_indexed = indexed(right_items);
            for (element, _) in left_indexed.iter().chain(&right_indexed) {
                if !order.contains(element) {
                    order.push(element.clone());
                }
            }
            for element in order {
                let left = left_indexed
                    .iter()
                    .find(|(candidate, _)| *candidate == element)
                    .map(|(_, item)| item);
                let right = right_indexed
                    .iter()
                    .find(|(candidate, _)| *candidate == element)
                    .map(|(_, item)| item);
                path.push(element);
                walk_compare(left, right, item_type(node), path, out);
                path.pop();
            }
        }
        _ => {
            let empty = Map::new();
            let left_fields = lhs.and_then(Value::as_object).unwrap_or(&empty);
            let right_fields = rhs.and_then(Value::as_object).unwrap_or(&empty);
            let mut names: Vec<&String> = left_fields.keys().collect();
            names.extend(
                right_fields
                    .keys()
                    .filter(|name| !left_fields.contains_key(*name)),
            );
            for name in names {
                path.push(field(name));
                walk_compare(
                    left_fields.get(name),
                    right_fields.get(name),
                    field_type(node, name),
                    path,
                    out,
                );
                path.pop();
            }
        }
    }
    match (lhs, rhs) {
        (None, Some(_)) => out.added.insert(path),
        (Some(_), None) => out.removed.insert(path),
        _ => {}
    }
}

/// `Merge`: `rhs` (an applied configuration) over `lhs` (the live object).
pub(crate) fn merge(lhs: Option<&Value>, rhs: Option<&Value>, node: &TypeNode) -> Option<Value> {
    let (Some(left), Some(right)) = (lhs, rhs) else {
        return rhs.or(lhs).cloned();
    };
    if is_leaf(lhs, rhs, node) || std::mem::discriminant(left) != std::mem::discriminant(right) {
        return Some(right.clone());
    }
    match (left, right) {
        (Value::Array(left_items), Value::Array(right_items)) => {
            let merged = merge_list(left_items, right_items, node);
            (!merged.is_empty()).then_some(Value::Array(merged))
        }
        (Value::Object(left_fields), Value::Object(right_fields)) => {
            let mut merged = Map::new();
            for name in left_fields.keys().chain(
                right_fields
                    .keys()
                    .filter(|name| !left_fields.contains_key(*name)),
            ) {
                if let Some(value) = merge(
                    left_fields.get(name),
                    right_fields.get(name),
                    field_type(node, name),
                ) {
                    merged.insert(name.clone(), value);
                }
            }
            (!merged.is_empty()).then_some(Value::Object(merged))
        }
        _ => Some(right.clone()),
    }
}

/// The list ordering of structured-merge-diff's merge: the applied order wins for the items it
/// names, live-only items stay where they were relative to those.
fn merge_list(lhs: &[Value], rhs: &[Value], node: &TypeNode) -> Vec<Value> {
    let index = |items: &[Value]| -> Vec<(Element, Value)> {
        let mut seen: Vec<(Element, Value)> = Vec::new();
        for item in items {
            if let Some(element) = item_element(node, item)
                && !seen.iter().any(|(existing, _)| *existing == element)
            {
                seen.push((element, item.clone()));
            }
        }
        seen
    };
    let left = index(lhs);
    let right = index(rhs);
    let in_left = |element: &Element| {
        left.iter()
            .find(|(candidate, _)| candidate == element)
            .map(|(_, item)| item)
    };
    let in_right = |element: &Element| {
        right
            .iter()
            .find(|(candidate, _)| candidate == element)
            .map(|(_, item)| item)
    };
    let mut shared_order: std::collections::VecDeque<&Element> = right
        .iter()
        .map(|(element, _)| element)
        .filter(|element| in_left(element).is_some())
        .collect();
    let mut next_shared = shared_order.pop_front();
    let mut merged_right: Vec<Element> = Vec::new();
    let mut out = Vec::new();
    let item_node = item_type(node);
    let (mut l, mut r) = (0, 0);
    while l < left.len() || r < right.len() {
        if l < left.len() && r < right.len() {
            let element = &left[l].0;
            if *element == right[r].0 {
                merged_right.push(element.clone());
                out.extend(merge(in_left(element), in_right(element), item_node));
                l += 1;
                r += 1;
                next_shared = shared_order.pop_front();
                continue;
            }
            if in_right(element).is_some() && next_shared.is_some_and(|shared| shared != element) {
                l += 1;
                continue;
            }
        }
        if l < left.len() {
            let element = &left[l].0;
            if in_right(element).is_none() {
                out.extend(merge(in_left(element), None, item_node));
                l += 1;
                continue;
            } else if merged_right.contains(element) {
                l += 1;
            }
        }
        if r < right.len() {
            let element = right[r].0.clone();
            merged_right.push(element.clone());
            out.extend(merge(in_left(&element), in_right(&element), item_node));
            r += 1;
            if next_shared.is_some_and(|shared| *shared == element) {
                next_shared = shared_order.pop_front();
            }
        }
    }
    out
}

/// `RemoveItems`: `value` without the members of `set`; `None` when nothing is left.
pub(crate) fn remove_items(value: &Value, set: &FieldSet, node: &TypeNode) -> Option<Value> {
    if node.is_atomic_for(value) {
        return Some(value.clone());
    }
    match value {
        Value::Object(fields) => {
            let mut kept = Map::new();
            for (name, child) in fields {
                let element = field(name);
                match set.children.get(&element) {
                    Some(subset) if subset.member => {}
                    Some(subset) if !subset.children.is_empty() => {
                        if let Some(remaining) = remove_items(child, subset, field_type(node, name))
                        {
                            kept.insert(name.clone(), remaining);
                        }
                    }
                    _ => {
                        kept.insert(name.clone(), child.clone());
                    }
                }
            }
            (!kept.is_empty()).then_some(Value::Object(kept))
        }
        Value::Array(items) => {
            let mut kept = Vec::new();
            for item in items {
                let Some(element) = item_element(node, item) else {
                    kept.push(item.clone());
                    continue;
                };
                match set.children.get(&element) {
                    Some(subset) if subset.member => {}
                    Some(subset) if !subset.children.is_empty() => {
                        kept.extend(remove_items(item, subset, item_type(node)))
                    }
                    _ => kept.push(item.clone()),
                }
            }
            (!kept.is_empty()).then_some(Value::Array(kept))
        }
        other => Some(other.clone()),
    }
}

/// `EnsureNamedFieldsAreMembers`: declared fields with owned children are owned themselves.
pub(crate) fn ensure_named_fields_are_members(set: &FieldSet, node: &TypeNode) -> FieldSet {
    let mut result = FieldSet {
        member: set.member,
        children: Default::default(),
    };
    for (element, child) in &set.children {
        let (child_type, named) = match element.strip_prefix("f:") {
            Some(name) => (field_type(node, name), node.declares(name)),
            None => (item_type(node), false),
        };
        let mut converted = ensure_named_fields_are_members(child, child_type);
        if named {
            converted.member = true;
        }
        result.children.insert(element.clone(), converted);
    }
    result
}
