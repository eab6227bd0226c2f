//! `metadata.managedFields` entries: decoding, ownership bookkeeping, encoding.

use serde_json::{Map, Value};

use super::Conflict;
use super::fieldset::{FieldSet, path_string};

/// Most `Update` managers kept; older ones merge into `ancient-changes` (`capManagersManager`).
const MAX_UPDATE_MANAGERS: usize = 10;

/// What makes two entries the same manager: name, operation, subresource, and the apiVersion
/// for `Update` (an `Apply` manager keeps one entry across versions).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Identity {
    manager: String,
    operation: &'static str,
    api_version: String,
    subresource: String,
}

impl Identity {
    pub(crate) fn apply(manager: &str, subresource: &str) -> Identity {
        Identity {
            manager: manager.into(),
            operation: "Apply",
            api_version: String::new(),
            subresource: subresource.into(),
        }
    }

    pub(crate) fn update(manager: &str, api_version: &str, subresource: &str) -> Identity {
        Identity {
            manager: manager.into(),
            operation: "Update",
            api_version: api_version.into(),
            subresource: subresource.into(),
        }
    }

    pub(crate) fn api_version(&self) -> &str {
        &self.api_version
    }

    /// kube-apiserver's `printManager`.
    fn describe(&self, entry_version: &str) -> String {
        let mut text = Value::String(self.manager.clone()).to_string();
        if !self.subresource.is_empty() {
            text.push_str(&format!(
                " with subresource {}",
                Value::String(self.subresource.clone())
            ));
        }
        if self.operation == "Update" {
            text.push_str(&format!(" using {entry_version}"));
        }
        text
    }
}

#[derive(Debug, Clone)]
struct Entry {
    identity: Identity,
    api_version: String,
    time: Option<String>,
    set: FieldSet,
}

/// All managers of one object.
#[derive(Debug, Clone, Default)]
pub(crate) struct Managers {
    entries: Vec<Entry>,
}

impl Managers {
    /// Reads `metadata.managedFields`; an entry with an unknown operation, no apiVersion or a
    /// fieldsType other than `FieldsV1` makes the whole list invalid, as in kube-apiserver.
    pub(crate) fn decode(object: &Value) -> Result<Managers, String> {
        let Some(list) = object.pointer("/metadata/managedFields") else {
            return Ok(Managers::default());
        };
        let Value::Array(items) = list else {
            return Err("managedFields must be a list".into());
        };
        let mut managers = Managers::default();
        for (index, item) in items.iter().enumerate() {
            let text = |key: &str| {
                item.get(key)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            let operation = match text("operation").as_str() {
                "Apply" => "Apply",
                "Update" => "Update",
                _ => return Err("operation must be `Apply` or `Update`".into()),
            };
            let api_version = text("apiVersion");
            if api_version.is_empty() {
                return Err("apiVersion must not be empty".into());
            }
            match text("fieldsType").as_str() {
                "FieldsV1" => {}
                "" => {
                    return Err(format!(
                        "missing fieldsType in managed fields entry {index}"
                    ));
                }
                other => {
                    return Err(format!(
                        "invalid fieldsType {other:?} in managed fields entry {index}"
                    ));
                }
            }
            let set = match item.get("fieldsV1") {
                Some(fields) => FieldSet::from_fields_v1(fields)
                    .ok_or_else(|| format!("invalid fieldsV1 in managed fields entry {index}"))?,
                None => FieldSet::new(),
            };
            let identity = Identity {
                manager: text("manager"),
                operation,
                api_version: if operation == "Update" {
                    api_version.clone()
                } else {
                    String::new()
                },
                subresource: text("subresource"),
            };
            let time = item.get("time").and_then(Value::as_str).map(str::to_string);
            managers.entries.retain(|entry| entry.identity != identity);
            managers.entries.push(Entry {
                identity,
                api_version,
                time,
                set,
            });
        }
        Ok(managers)
    }

    /// `managedFields: []` or `[{}]` in a request clears ownership.
    pub(crate) fn is_reset(object: &Value) -> bool {
        match object.pointer("/metadata/managedFields") {
            Some(Value::Array(items)) => {
                items.is_empty()
                    || (items.len() == 1 && items[0].as_object().is_some_and(Map::is_empty))
            }
            _ => false,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub(crate) fn set_of(&self, identity: &Identity) -> Option<&FieldSet> {
        self.entries
            .iter()
            .find(|entry| entry.identity == *identity)
            .map(|entry| &entry.set)
    }

    /// Sets `identity`'s fields, creating the entry (without a time) when it is new.
    pub(crate) fn set(&mut self, identity: Identity, set: FieldSet, api_version: &str) {
        match self
            .entries
            .iter_mut()
            .find(|entry| entry.identity == identity)
        {
            Some(entry) => {
                entry.set = set;
                entry.api_version = api_version.to_string();
            }
            None => self.entries.push(Entry {
                identity,
                api_version: api_version.to_string(),
                time: None,
                set,
            }),
        }
    }

    pub(crate) fn touch(&mut self, identity: &Identity, now: &str) {
        if let Some(entry) = self
            .entries
            .iter_mut()
            .find(|entry| entry.identity == *identity)
        {
            entry.time = Some(now.to_string());
        }
    }

    /// Union of every manager's fields.
    pub(crate) fn all_owned(&self) -> FieldSet {
        self.entries
            .iter()
            .fold(FieldSet::new(), |owned, entry| owned.union(&entry.set))
    }

    /// The fields of `changed` that managers other than `except` own.
    pub(crate) fn conflicts(&self, except: &Identity, changed: &FieldSet) -> Vec<Conflict> {
        let mut conflicts = Vec::new();
        let mut others: Vec<&Entry> = self
            .entries
            .iter()
            .filter(|entry| entry.identity != *except)
            .collect();
        others.sort_by(|left, right| left.identity.cmp(&right.identity));
        for entry in others {
            for path in entry.set.intersection(changed).paths() {
                conflicts.push(Conflict {
                    manager: entry.identity.manager.clone(),
                    field: path_string(&path),
                    described_manager: entry.identity.describe(&entry.api_version),
                });
            }
        }
        conflicts
    }

    /// Other managers lose `fields` (a write by `except` changed them).
    pub(crate) fn take_away(&mut self, except: &Identity, fields: &FieldSet) {
        for entry in self
            .entries
            .iter_mut()
            .filter(|entry| entry.identity != *except)
        {
            entry.set = entry.set.difference(fields);
        }
    }

    /// Every manager loses `fields` (they were removed from the object).
    pub(crate) fn take_away_all(&mut self, fields: &FieldSet) {
        for entry in &mut self.entries {
            entry.set = entry.set.difference(fields);
        }
    }

    pub(crate) fn strip(&mut self, identity: &Identity, stripped: &FieldSet) {
        if let Some(entry) = self
            .entries
            .iter_mut()
            .find(|entry| entry.identity == *identity)
        {
            entry.set = entry.set.difference(stripped);
        }
    }

    /// Keeps at most [`MAX_UPDATE_MANAGERS`] `Update` managers, merging the oldest into
    /// `ancient-changes` per apiVersion.
    pub(crate) fn cap_update_managers(&mut self) {
        self.entries.retain(|entry| !entry.set.is_empty());
        let mut updaters: Vec<usize> = (0..self.entries.len())
            .filter(|&index| self.entries[index].identity.operation == "Update")
            .collect();
        if updaters.len() <= MAX_UPDATE_MANAGERS {
            return;
        }
        updaters.sort_by(|&left, &right| {
            let (left, right) = (&self.entries[left], &self.entries[right]);
            left.time
                .cmp(&right.time)
                .then_with(|| left.identity.cmp(&right.identity))
        });
        let excess = updaters.len() - MAX_UPDATE_MANAGERS + 1;
        let mut merged: Vec<Entry> = Vec::new();
        for &index in &updaters[..excess] {
            let entry = &self.entries[index];
            match merged
                .iter_mut()
                .find(|bucket| bucket.api_version == entry.api_version)
            {
                Some(bucket) => {
                    bucket.set = bucket.set.union(&entry.set);
                    bucket.time.clone_from(&entry.time);
                }
                None => merged.push(Entry {
                    identity: Identity::update("ancient-changes", &entry.api_version, ""),
                    api_version: entry.api_version.clone(),
                    time: entry.time.clone(),
                    set: entry.set.clone(),
                }),
            }
        }
        let removed: Vec<Identity> = updaters[..excess]
            .iter()
            .map(|&index| self.entries[index].identity.clone())
            .collect();
        self.entries
            .retain(|entry| !removed.contains(&entry.identity));
        self.entries.extend(merged);
    }

    /// Writes `metadata.managedFields`, sorted as kube-apiserver sorts it, without empty entries;
    /// the key is removed when no manager is left.
    pub(crate) fn encode_into(&self, object: &mut Value) {
        let mut entries: Vec<&Entry> = self
            .entries
            .iter()
            .filter(|entry| !entry.set.is_empty())
            .collect();
        entries.sort_by(|left, right| {
            left.identity
                .operation
                .cmp(right.identity.operation)
                .then_with(|| left.time.cmp(&right.time))
                .then_with(|| left.identity.manager.cmp(&right.identity.manager))
                .then_with(|| left.api_version.cmp(&right.api_version))
                .then_with(|| left.identity.subresource.cmp(&right.identity.subresource))
        });
        let encoded: Vec<Value> = entries
            .iter()
            .map(|entry| {
                let mut fields = Map::new();
                fields.insert(
                    "manager".into(),
                    Value::String(entry.identity.manager.clone()),
                );
                fields.insert(
                    "operation".into(),
                    Value::String(entry.identity.operation.into()),
                );
                fields.insert(
                    "apiVersion".into(),
                    Value::String(entry.api_version.clone()),
                );
                if let Some(time) = &entry.time {
                    fields.insert("time".into(), Value::String(time.clone()));
                }
                fields.insert("fieldsType".into(), Value::String("FieldsV1".into()));
                fields.insert("fieldsV1".into(), entry.set.to_fields_v1());
                if !entry.identity.subresource.is_empty() {
                    fields.insert(
                        "subresource".into(),
                        Value::String(entry.identity.subresource.clone()),
                    );
                }
                Value::Object(fields)
            })
            .collect();
        let Some(object_fields) = object.as_object_mut() else {
            return;
        };
        let metadata = object_fields
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        let Some(metadata) = metadata.as_object_mut() else {
            return;
        };
        if encoded.is_empty() {
            metadata.remove("managedFields");
        } else {
            metadata.insert("managedFields".into(), Value::Array(encoded));
        }
    }
}
