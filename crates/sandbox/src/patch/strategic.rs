//! Strategic merge patch (apimachinery's `strategicpatch`): objects merge key by key, lists
//! whose field has `patchStrategy: merge` merge by their `patchMergeKey` (or as sets of
//! scalars), other lists are replaced; the directives `$patch`, `$retainKeys`,
//! `$deleteFromPrimitiveList/<field>` and `$setElementOrder/<field>` are honoured.

use serde_json::{Map, Value};

use super::errors::PatchError;
use super::type_info::TypeNode;

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList/";
const SET_ELEMENT_ORDER: &str = "$setElementOrder/";

/// Applies `patch` to `original`; `types` describes `original`'s kind (`None` below for
/// fields the kind does not declare, which merge like a JSON merge patch).
pub(crate) fn merge_object(
    original: &Value,
    patch: &Value,
    types: Option<&TypeNode>,
) -> Result<Value, PatchError> {
    let Value::Object(patch_fields) = patch else {
        return Err(PatchError::Malformed(
            "invalid patch: the strategic merge patch must be a JSON object".into(),
        ));
    };
    let original_fields = match original {
        Value::Object(fields) => fields.clone(),
        _ => Map::new(),
    };
    merge_map(original_fields, patch_fields, types)
        .map(|merged| merged.map_or(Value::Null, Value::Object))
}

/// Merges one object; `None` means the `$patch: delete` directive removed it.
fn merge_map(
    mut original: Map<String, Value>,
    patch: &Map<String, Value>,
    types: Option<&TypeNode>,
) -> Result<Option<Map<String, Value>>, PatchError> {
    match patch.get(DIRECTIVE).and_then(Value::as_str) {
        Some("replace") => {
            let mut replaced = patch.clone();
            replaced.remove(DIRECTIVE);
            return Ok(Some(strip_directives(replaced)));
        }
        Some("delete") => return Ok(None),
        Some("merge") | None => {}
        Some(other) => {
            return Err(PatchError::Malformed(format!(
                "Unknown patch type: {other} in map: {}",
                Value::Object(patch.clone())
            )));
        }
    }
    if let Some(retain) = patch.get(RETAIN_KEYS) {
        let Value::Array(keys) = retain else {
            return Err(PatchError::Malformed(format!(
                "invalid patch: {RETAIN_KEYS} must be a list"
            )));
        };
        let keep: Vec<&str> = keys.iter().filter_map(Value::as_str).collect();
        original.retain(|key, _| keep.contains(&key.as_str()));
    }
    for (key, value) in patch {
        if let Some(field) = key.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) {
            let Value::Array(removals) = value else {
                return Err(PatchError::Malformed(format!(
                    "invalid patch: {key} must be a list"
                )));
            };
            if let Some(Value::Array(items)) = original.get_mut(field) {
                items.retain(|item| !removals.contains(item));
            }
        }
    }
    for (key, value) in patch {
        if key == DIRECTIVE
            || key == RETAIN_KEYS
            || key.starts_with(DELETE_FROM_PRIMITIVE_LIST)
            || key.starts_with(SET_ELEMENT_ORDER)
        {
            continue;
        }
        let field_type = types.and_then(|types| types.field(key));
        if value.is_null() {
            original.remove(key);
            continue;
        }
        let order = patch
            .get(&format!("{SET_ELEMENT_ORDER}{key}"))
            .and_then(Value::as_array);
        let merged = match (original.remove(key), value) {
            (Some(Value::Object(existing)), Value::Object(patch_map)) => {
                merge_map(existing, patch_map, field_type)?.map(Value::Object)
            }
            (None, Value::Object(patch_map)) => {
                merge_map(Map::new(), patch_map, field_type)?.map(Value::Object)
            }
            (existing, Value::Array(patch_items)) => {
                let existing_items = match existing {
                    Some(Value::Array(items)) => items,
                    _ => Vec::new(),
                };
                merge_list(existing_items, patch_items, field_type, order)?.map(Value::Array)
            }
            (_, scalar) => Some(scalar.clone()),
        };
        if let Some(merged) = merged {
            original.insert(key.clone(), merged);
        }
    }
    // A `$setElementOrder` for a list the patch does not otherwise touch still reorders it.
    for (key, order) in patch {
        let Some(field) = key.strip_prefix(SET_ELEMENT_ORDER) else {
            continue;
        };
        if patch.contains_key(field) {
            continue;
        }
        let (Some(Value::Array(items)), Value::Array(order)) =
            (original.get(field).cloned(), order)
        else {
            continue;
        };
        let field_type = types.and_then(|types| types.field(field));
        let key_field = field_type.and_then(|t| t.merge_key.clone());
        original.insert(
            field.to_string(),
            Value::Array(reorder(items, Vec::new(), order, key_field.as_deref())),
        );
    }
    Ok(Some(original))
}

fn merge_list(
    original: Vec<Value>,
    patch: &[Value],
    types: Option<&TypeNode>,
    order: Option<&Vec<Value>>,
) -> Result<Option<Vec<Value>>, PatchError> {
    let merges = types.is_some_and(|types| {
        types
            .patch_strategy
            .split(',')
            .any(|strategy| strategy == "merge")
    });
    if !merges {
        // The patch's list replaces the original; a `{"$patch": "replace"}` item says so
        // explicitly and is not itself an item (it used to be stored as an empty `{}`).
        return Ok(Some(
            patch
                .iter()
                .filter(|item| !is_replace_directive(item))
                .cloned()
                .map(strip_value_directives)
                .collect(),
        ));
    }
    let item_type = types.and_then(TypeNode::item);
    let merge_key = types.and_then(|types| types.merge_key.clone());
    // `{"$patch": "replace"}` as an item replaces the whole list with the other items.
    if patch.iter().any(is_replace_directive) {
        let items = patch
            .iter()
            .filter(|item| item.get(DIRECTIVE).is_none())
            .cloned()
            .map(strip_value_directives)
            .collect();
        return Ok(Some(items));
    }
    let Some(key) = merge_key else {
        // A set of scalars: union, keeping the original order.
        let mut merged = original;
        let mut added = Vec::new();
        for item in patch {
            if !merged.contains(item) && !added.contains(item) {
                added.push(item.clone());
            }
        }
        return Ok(Some(match order {
            Some(order) => reorder(merged, added, order, None),
            None => {
                merged.extend(added);
                merged
            }
        }));
    };
    let mut merged = original;
    let mut added = Vec::new();
    for item in patch {
        let Value::Object(item_fields) = item else {
            return Err(PatchError::Malformed(format!(
                "invalid patch: list items of a merge list must be objects, got {item}"
            )));
        };
        let Some(key_value) = item_fields.get(&key) else {
            return Err(PatchError::Malformed(format!(
                "map: {item} does not contain declared merge key: {key}"
            )));
        };
        let position = merged
            .iter()
            .position(|existing| existing.get(&key) == Some(key_value));
        let is_delete = item_fields.get(DIRECTIVE).and_then(Value::as_str) == Some("delete");
        match (position, is_delete) {
            (Some(index), true) => {
                merged.remove(index);
            }
            (None, true) => {}
            (Some(index), false) => {
                let existing = match merged[index].clone() {
                    Value::Object(fields) => fields,
                    _ => Map::new(),
                };
                if let Some(result) = merge_map(existing, item_fields, item_type)? {
                    merged[index] = Value::Object(result);
                }
            }
            (None, false) => {
                if let Some(result) = merge_map(Map::new(), item_fields, item_type)? {
                    added.push(Value::Object(result));
                }
            }
        }
    }
    Ok(Some(match order {
        Some(order) => reorder(merged, added, order, Some(&key)),
        None => {
            merged.extend(added);
            merged
        }
    }))
}

/// A list item that is the directive `{"$patch": "replace"}`.
fn is_replace_directive(item: &Value) -> bool {
    item.get(DIRECTIVE).and_then(Value::as_str) == Some("replace")
}

/// A list item with its position in the merged list.
type Positioned = (usize, Value);

/// Orders the merged list by `$setElementOrder`: listed items in that order, items only on the
/// server keep their place relative to them (apimachinery's `normalizeElementOrder`).
fn reorder(
    existing: Vec<Value>,
    added: Vec<Value>,
    order: &[Value],
    key: Option<&str>,
) -> Vec<Value> {
    let identity = |item: &Value| -> Value {
        match key {
            Some(key) => item.get(key).cloned().unwrap_or(Value::Null),
            None => item.clone(),
        }
    };
    let ordered_ids: Vec<Value> = order.iter().map(&identity).collect();
    let all: Vec<Positioned> = existing.into_iter().chain(added).enumerate().collect();
    let (mut listed, unlisted): (Vec<Positioned>, Vec<Positioned>) = all
        .into_iter()
        .partition(|(_, item)| ordered_ids.contains(&identity(item)));
    listed.sort_by_key(|(_, item)| {
        ordered_ids
            .iter()
            .position(|id| *id == identity(item))
            .unwrap_or(usize::MAX)
    });
    let mut result = Vec::new();
    let mut pending = unlisted.into_iter().peekable();
    for (position, item) in listed {
        while pending
            .peek()
            .is_some_and(|(unlisted_position, _)| *unlisted_position < position)
        {
            if let Some((_, value)) = pending.next() {
                result.push(value);
            }
        }
        result.push(item);
    }
    result.extend(pending.map(|(_, value)| value));
    result
}

fn strip_directives(mut map: Map<String, Value>) -> Map<String, Value> {
    map.retain(|key, _| {
        !(key == DIRECTIVE
            || key == RETAIN_KEYS
            || key.starts_with(DELETE_FROM_PRIMITIVE_LIST)
            || key.starts_with(SET_ELEMENT_ORDER))
    });
    for value in map.values_mut() {
        *value = strip_value_directives(value.take());
    }
    map
}

fn strip_value_directives(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(strip_directives(map)),
        Value::Array(items) => {
            Value::Array(items.into_iter().map(strip_value_directives).collect())
        }
        other => other,
    }
}
