//! The vocabulary several capabilities share, below all of them: etcd's own defaults, the
//! Kubernetes quantities the API's fields carry, and where a snapshot lives (its object key,
//! its URI, the credential keys of each store). Pure, no I/O, and importing nothing of this
//! crate: `plan`, `build`, `observe`, `metrics` and the controllers (`snapshot`, `defrag`)
//! read it, so none of them has to import another's module for a name or a constant.

pub mod etcd;
pub mod location;
pub mod quantity;
