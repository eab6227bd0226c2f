//! Managed fields and server-side apply, as structured-merge-diff and the API server's field
//! manager do them.
//!
//! `metadata.managedFields` holds one entry per (manager, operation, subresource, and for
//! `Update` the apiVersion), each with the `fieldsV1` set of paths the manager owns. An apply
//! merges the configuration into the live object, takes ownership of what it sets, removes what
//! the same manager applied before and no longer does (unless someone else owns it), and
//! conflicts when it would change a value another manager owns. Other writes record the
//! fields they changed for their manager (`Update`) and take them away from others.

mod entries;
mod fieldset;
mod typed;

use serde_json::Value;

use self::entries::{Identity, Managers};
use self::fieldset::FieldSet;
use self::typed::{compare, ensure_named_fields_are_members, merge, remove_items, to_field_set};
use super::TypeInfo;
use super::type_info::TypeNode;

/// An apply that would change fields other managers own; the server answers 409.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.message())]
pub struct ApplyConflicts {
    /// Each conflicting field: the owning manager and the field path (`.spec.replicas`).
    pub conflicts: Vec<Conflict>,
}

/// One field that an apply would take from another manager.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The manager that owns the field now.
    pub manager: String,
    /// The field path as kube-apiserver prints it, e.g. `.spec.replicas`.
    pub field: String,
    /// The manager as kube-apiserver describes it: `"kubectl"`, `"kube-controller-manager"
    /// using apps/v1` for an `Update` manager, with ` with subresource "status"` when it wrote
    /// through a subresource.
    pub described_manager: String,
}

impl Conflict {
    /// The `StatusCause.message` of this conflict: `conflict with "m" using v1`.
    pub fn cause_message(&self) -> String {
        format!("conflict with {}", self.described_manager)
    }
}

impl ApplyConflicts {
    /// The message kube-apiserver puts in the 409 status, e.g.
    /// `Apply failed with 1 conflict: conflict with "kubectl" using v1: .spec.replicas`.
    pub fn message(&self) -> String {
        if let [only] = self.conflicts.as_slice() {
            return format!(
                "Apply failed with 1 conflict: conflict with {}: {}",
                only.described_manager, only.field
            );
        }
        let mut lines = Vec::new();
        let mut current: Option<&str> = None;
        for conflict in &self.conflicts {
            if current != Some(conflict.described_manager.as_str()) {
                lines.push(format!("conflicts with {}:", conflict.described_manager));
                current = Some(&conflict.described_manager);
            }
            lines.push(format!("- {}", conflict.field));
        }
        format!(
            "Apply failed with {} conflicts: {}",
            self.conflicts.len(),
            lines.join("\n")
        )
    }
}

/// Paths no manager owns: the object's identity and bookkeeping (`stripMetaManager`).
const STRIPPED: &[&[&str]] = &[
    &["f:apiVersion"],
    &["f:kind"],
    &["f:metadata"],
    &["f:metadata", "f:name"],
    &["f:metadata", "f:namespace"],
    &["f:metadata", "f:creationTimestamp"],
    &["f:metadata", "f:selfLink"],
    &["f:metadata", "f:uid"],
    &["f:metadata", "f:clusterName"],
    &["f:metadata", "f:generation"],
    &["f:metadata", "f:managedFields"],
    &["f:metadata", "f:resourceVersion"],
];

fn stripped_set() -> FieldSet {
    let mut set = FieldSet::new();
    for path in STRIPPED {
        let path: Vec<String> = path.iter().map(|element| element.to_string()).collect();
        set.insert(&path);
    }
    set
}

/// The `apiVersion` of an object, which managed fields entries record.
fn api_version_of(object: &Value) -> String {
    object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// The empty object of the same kind: what a create compares against.
fn empty_like(object: &Value) -> Value {
    let mut empty = serde_json::Map::new();
    for meta in ["apiVersion", "kind"] {
        if let Some(value) = object.get(meta) {
            empty.insert(meta.into(), value.clone());
        }
    }
    Value::Object(empty)
}

fn without_managed_fields(object: &Value) -> Value {
    let mut copy = object.clone();
    if let Some(metadata) = copy.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
    }
    copy
}

/// Server-side apply: merges `config` into `live` as field manager `manager`.
///
/// `live` is `None` when the apply creates the object. Returns the new object with
/// `metadata.managedFields` updated (unchanged apart from ownership when the apply is a no-op,
/// in which case the applier's timestamp is kept), or the conflicts unless `force`, in which
/// case the applier takes the conflicting fields. `now` is the RFC 3339 timestamp to record.
pub fn apply(
    live: Option<&Value>,
    config: &Value,
    manager: &str,
    force: bool,
    subresource: Option<&str>,
    types: &TypeInfo,
    now: &str,
) -> Result<Value, ApplyConflicts> {
    let node = types.root();
    let config = without_managed_fields(config);
    let mut live_object = live.cloned().unwrap_or_else(|| empty_like(&config));
    let version = api_version_of(&config);
    let mut managers = Managers::decode(&live_object).unwrap_or_default();
    let subresource = subresource.unwrap_or_default();
    if managers.is_empty() {
        // Fields set before the first apply belong to `before-first-apply`.
        let empty = empty_like(&live_object);
        let identity = Identity::update("before-first-apply", &version, subresource);
        record(
            &mut managers,
            &empty,
            &without_managed_fields(&live_object),
            &identity,
            node,
            now,
        );
    }
    live_object = without_managed_fields(&live_object);

    let identity = Identity::apply(manager, subresource);
    let mut merged =
        merge(Some(&live_object), Some(&config), node).unwrap_or_else(|| empty_like(&config));
    let last_applied = managers.set_of(&identity).cloned();
    let applied_set = to_field_set(&config, node);
    managers.set(identity.clone(), applied_set, &version);
    if let Some(last_applied) = last_applied {
        merged = prune_unapplied(&merged, &managers, &last_applied, node);
    }
    let comparison = compare(&live_object, &merged, node);
    let conflicts = managers.conflicts(&identity, &comparison.modified.union(&comparison.added));
    if !force && !conflicts.is_empty() {
        return Err(ApplyConflicts { conflicts });
    }
    managers.take_away(&identity, &comparison.modified.union(&comparison.added));
    managers.take_away_all(&comparison.removed);
    managers.strip(&identity, &stripped_set());
    let changed = merged != live_object;
    if changed {
        managers.touch(&identity, now);
    }
    let mut result = if changed { merged } else { live_object };
    managers.encode_into(&mut result);
    Ok(result)
}

/// Removes what `applier` applied last time and no longer does, unless another manager owns it
/// (structured-merge-diff's `prune`, with `addBackOwnedItems` and `addBackDanglingItems`).
fn prune_unapplied(
    merged: &Value,
    managers: &Managers,
    last_applied: &FieldSet,
    node: &TypeNode,
) -> Value {
    let named = |set: &FieldSet| ensure_named_fields_are_members(set, node);
    let empty = serde_json::json!({});
    let pruned = remove_items(merged, &named(last_applied), node).unwrap_or_else(|| empty.clone());
    let merged_set = named(&to_field_set(merged, node));
    let pruned_set = named(&to_field_set(&pruned, node));
    let owned = named(&managers.all_owned());
    let pruned = remove_items(
        merged,
        &merged_set.difference(&pruned_set.union(&owned)),
        node,
    )
    .unwrap_or_else(|| empty.clone());
    let pruned_set = named(&to_field_set(&pruned, node));
    remove_items(
        merged,
        &merged_set
            .difference(&pruned_set)
            .intersection(&named(last_applied)),
        node,
    )
    .unwrap_or(empty)
}

/// The field manager's bookkeeping for a non-apply write: `Update` ownership of what changed.
fn record(
    managers: &mut Managers,
    old: &Value,
    new: &Value,
    identity: &Identity,
    node: &TypeNode,
    now: &str,
) {
    let comparison = compare(old, new, node);
    let changed = comparison.modified.union(&comparison.added);
    managers.take_away(identity, &changed);
    managers.take_away_all(&comparison.removed);
    let own = changed.difference(&stripped_set());
    if !own.is_empty() {
        let previous = managers.set_of(identity).cloned().unwrap_or_default();
        managers.set(
            identity.clone(),
            previous.difference(&comparison.removed).union(&own),
            identity.api_version(),
        );
        managers.touch(identity, now);
    }
}

/// Records in `metadata.managedFields` the fields a non-apply write (create, update, patch) set,
/// as manager `manager` with operation `Update`, taking them away from other managers.
///
/// `old` is the stored object (`None` on create). As in kube-apiserver, the managed fields come
/// from `new` when the client sent valid ones (an empty list resets them), else from `old`; a
/// stored object that has none gets none (tracking starts at create or at the first apply).
pub fn record_update(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    subresource: Option<&str>,
    types: &TypeInfo,
    now: &str,
) {
    let subresource = subresource.unwrap_or_default();
    let from_old = || {
        old.and_then(|old| Managers::decode(old).ok())
            .unwrap_or_default()
    };
    let mut managers = if !subresource.is_empty() {
        from_old()
    } else if Managers::is_reset(new) {
        Managers::default()
    } else {
        match Managers::decode(new) {
            Ok(managers) if !managers.is_empty() => managers,
            _ => from_old(),
        }
    };
    let cleaned = without_managed_fields(new);
    *new = cleaned;
    let has_uid = old
        .and_then(|old| old.pointer("/metadata/uid"))
        .is_some_and(|uid| !uid.as_str().unwrap_or_default().is_empty());
    if managers.is_empty() && has_uid {
        return;
    }
    let live = old
        .map(without_managed_fields)
        .unwrap_or_else(|| empty_like(new));
    let identity = Identity::update(manager, &api_version_of(new), subresource);
    record(&mut managers, &live, new, &identity, types.root(), now);
    managers.cap_update_managers();
    managers.encode_into(new);
}

#[cfg(test)]
mod tests;
