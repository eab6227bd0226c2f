//! The registry of served kinds: built-in kinds and custom resources take one path through it,
//! for discovery, routing, storage keys and printing.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use serde_json::Value;

use super::store::ResourceId;

/// The verbs of an ordinary read-write resource.
pub const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// Where the scale subresource reads and writes replicas.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalePaths {
    /// e.g. `.spec.replicas`
    pub spec_replicas: String,
    /// e.g. `.status.replicas`
    pub status_replicas: String,
    /// e.g. `.status.selector`
    pub label_selector: Option<String>,
}

/// How a printer column gets its cell.
#[derive(Clone)]
pub enum ColumnSource {
    /// A JSONPath as in `additionalPrinterColumns`, e.g. `.status.phase`.
    JsonPath(String),
    /// A built-in computation, such as a Pod's READY count.
    Computed(fn(&Value) -> Value),
}

#[derive(Clone)]
pub struct PrinterColumn {
    pub name: String,
    /// `string`, `integer`, `number`, `boolean` or `date`.
    pub column_type: String,
    pub format: String,
    pub description: String,
    pub priority: i64,
    pub source: ColumnSource,
}

/// One served version of a kind.
#[derive(Clone)]
pub struct VersionInfo {
    pub name: String,
    pub served: bool,
    pub storage: bool,
    pub status_subresource: bool,
    pub scale: Option<ScalePaths>,
    pub printer_columns: Vec<PrinterColumn>,
    /// The version's compiled `openAPIV3Schema` (custom resources only).
    pub schema: Option<Arc<crate::schema::StructuralSchema>>,
}

/// A kind the server serves: group, kind, names, scope, verbs and subresources.
#[derive(Clone)]
pub struct ResourceType {
    pub group: String,
    pub kind: String,
    pub list_kind: String,
    pub plural: String,
    pub singular: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub verbs: Vec<String>,
    /// Subresources other than status and scale: `log`, `eviction`, `token`, `binding`.
    pub extra_subresources: Vec<String>,
    pub versions: Vec<VersionInfo>,
    /// Whether this is a custom resource (schema from its CRD, JSON merge patch only).
    pub custom: bool,
    /// Storage shared with another resource (core/v1 and events.k8s.io/v1 events).
    pub storage: Option<ResourceId>,
}

impl ResourceType {
    pub fn id(&self) -> ResourceId {
        ResourceId::new(&self.group, &self.plural)
    }

    /// Where the objects are kept: shared storage for kinds served in two groups.
    pub fn storage_id(&self) -> ResourceId {
        self.storage.clone().unwrap_or_else(|| self.id())
    }

    pub fn version(&self, name: &str) -> Option<&VersionInfo> {
        self.versions.iter().find(|v| v.name == name && v.served)
    }

    /// The version discovery lists first and objects are stored in.
    pub fn storage_version(&self) -> &VersionInfo {
        self.versions
            .iter()
            .find(|v| v.storage)
            .unwrap_or(&self.versions[0])
    }

    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{version}", self.group)
        }
    }

    /// The apiVersion objects are stored with (for shared storage, the other group's `v1`).
    pub fn storage_api_version(&self) -> String {
        match &self.storage {
            Some(id) if id.group.is_empty() => "v1".to_string(),
            Some(id) => format!("{}/v1", id.group),
            None => self.api_version(&self.storage_version().name),
        }
    }

    pub fn has_subresource(&self, version: &str, subresource: &str) -> bool {
        match subresource {
            "status" => self.version(version).is_some_and(|v| v.status_subresource),
            "scale" => self.version(version).is_some_and(|v| v.scale.is_some()),
            other => self.extra_subresources.iter().any(|s| s == other),
        }
    }

    /// The RBAC/GC-facing `group/resource` string, e.g. `deployments.apps`.
    pub fn qualified_name(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }
}

/// All served kinds, looked up by (group, plural) or by the names kubectl uses.
#[derive(Default)]
pub struct Registry {
    kinds: RwLock<BTreeMap<ResourceId, Arc<ResourceType>>>,
    /// Bumped on every change, so documents derived from the registry know when to rebuild.
    revision: std::sync::atomic::AtomicU64,
}

impl Registry {
    pub fn new(builtins: Vec<ResourceType>) -> Self {
        let registry = Self::default();
        for kind in builtins {
            registry.register(kind);
        }
        registry
    }

    pub fn register(&self, kind: ResourceType) {
        let mut kinds = self.kinds.write().unwrap_or_else(|p| p.into_inner());
        kinds.insert(kind.id(), Arc::new(kind));
        self.revision
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn revision(&self) -> u64 {
        self.revision.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub fn unregister(&self, id: &ResourceId) {
        let mut kinds = self.kinds.write().unwrap_or_else(|p| p.into_inner());
        kinds.remove(id);
        self.revision
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn get(&self, group: &str, plural: &str) -> Option<Arc<ResourceType>> {
        let kinds = self.kinds.read().unwrap_or_else(|p| p.into_inner());
        kinds.get(&ResourceId::new(group, plural)).cloned()
    }

    /// The kind served at `group/version/plural`, if that version is served.
    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceType>> {
        self.get(group, plural)
            .filter(|kind| kind.version(version).is_some())
    }

    /// The resource of `kind` in `group`, for ownerReferences and RBAC.
    pub fn by_kind(&self, group: &str, kind: &str) -> Option<Arc<ResourceType>> {
        let kinds = self.kinds.read().unwrap_or_else(|p| p.into_inner());
        kinds
            .values()
            .find(|k| k.group == group && k.kind == kind)
            .cloned()
    }

    pub fn all(&self) -> Vec<Arc<ResourceType>> {
        let kinds = self.kinds.read().unwrap_or_else(|p| p.into_inner());
        kinds.values().cloned().collect()
    }

    /// Served groups in discovery order: built-in groups first, then custom ones by name.
    pub fn groups(&self) -> Vec<String> {
        let mut groups: Vec<(bool, String)> = Vec::new();
        for kind in self.all() {
            if kind.group.is_empty() {
                continue;
            }
            let entry = (kind.custom, kind.group.clone());
            if !groups.iter().any(|(_, g)| *g == kind.group) {
                groups.push(entry);
            }
        }
        groups.sort();
        groups.into_iter().map(|(_, g)| g).collect()
    }

    /// The versions served by `group`, preferred (storage) version first.
    pub fn group_versions(&self, group: &str) -> Vec<String> {
        let mut versions: Vec<String> = Vec::new();
        for kind in self.all().iter().filter(|k| k.group == group) {
            let preferred = kind.storage_version().name.clone();
            if !versions.contains(&preferred) {
                versions.insert(0, preferred);
            }
            for v in kind.versions.iter().filter(|v| v.served) {
                if !versions.contains(&v.name) {
                    versions.push(v.name.clone());
                }
            }
        }
        sort_versions(&mut versions);
        versions
    }
}

/// Kubernetes version priority: GA before beta before alpha, higher numbers first.
pub fn sort_versions(versions: &mut [String]) {
    fn rank(v: &str) -> (u8, i64, i64) {
        let rest = v.strip_prefix('v').unwrap_or(v);
        let major_len = rest.chars().take_while(char::is_ascii_digit).count();
        let Ok(major) = rest[..major_len].parse::<i64>() else {
            return (3, 0, 0);
        };
        let tail = &rest[major_len..];
        let (stage, minor) = if tail.is_empty() {
            (0, 0)
        } else if let Some(n) = tail.strip_prefix("beta") {
            (1, n.parse().unwrap_or(0))
        } else if let Some(n) = tail.strip_prefix("alpha") {
            (2, n.parse().unwrap_or(0))
        } else {
            return (3, 0, 0);
        };
        (stage, -major, -minor)
    }
    versions.sort_by(|a, b| rank(a).cmp(&rank(b)).then(a.cmp(b)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_sort_as_kubernetes_prioritises_them() {
        let mut versions: Vec<String> = ["v1alpha1", "v1beta1", "v2", "v1", "v1alpha2", "v10beta3"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        sort_versions(&mut versions);
        assert_eq!(
            versions,
            ["v2", "v1", "v10beta3", "v1beta1", "v1alpha2", "v1alpha1"]
        );
    }
}
