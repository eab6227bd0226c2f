//! [`Written`]: one Kubernetes write `act` made, so the reconciler can wait until its watch
//! caches show it before planning again (planning from a cache that lags our own write would
//! only produce a conflicting write or a duplicate create).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The kinds the operator writes and caches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjectKind {
    Cluster,
    Member,
    Pod,
    Pvc,
    Service,
    Pdb,
}

/// One write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Written {
    /// Created or changed: the cache is current once it holds this resourceVersion or newer
    /// (or, when `may_vanish`, once it lacks the object: a finalizer removal that let a
    /// terminating object go).
    Updated {
        kind: ObjectKind,
        namespace: String,
        name: String,
        resource_version: Option<String>,
        may_vanish: bool,
    },
    /// Deleted: the cache is current once it lacks the object with this UID, or shows it
    /// terminating.
    Deleted {
        kind: ObjectKind,
        namespace: String,
        name: String,
        uid: String,
    },
}

impl Written {
    pub fn updated(kind: ObjectKind, namespace: &str, name: &str, meta: &ObjectMeta) -> Written {
        Written::Updated {
            kind,
            namespace: namespace.to_string(),
            name: name.to_string(),
            resource_version: meta.resource_version.clone(),
            may_vanish: false,
        }
    }

    pub fn deleted(kind: ObjectKind, namespace: &str, name: &str, uid: &str) -> Written {
        Written::Deleted {
            kind,
            namespace: namespace.to_string(),
            name: name.to_string(),
            uid: uid.to_string(),
        }
    }
}
