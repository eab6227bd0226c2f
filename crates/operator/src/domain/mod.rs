//! The vocabulary several capabilities share, below all of them: etcd's own defaults, the
//! Kubernetes quantities the API's fields carry, where a snapshot lives (its object key, its
//! URI, the credential keys of each store), and the operator's settings. Pure, no I/O, and
//! importing nothing of this crate outside `domain`: `build`, `plan`, `observe`, `metrics` and
//! the controllers (`snapshot`, `defrag`) read it, so none of them has to import another's
//! module for a name, a constant or a setting.

pub mod etcd;
pub mod location;
pub mod quantity;
pub mod settings;
pub mod versions;
