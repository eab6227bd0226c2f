//! A Kubernetes control plane in one process, for tests and demos.
//!
//! Generic: nothing here knows about etcd except through configuration.
//! - [`apiserver`]: the Kubernetes REST API (storage, watch, discovery, CRDs, RBAC, GC).
//! - [`schema`]: structural schemas of CRDs: validation, defaulting, pruning, CEL rules, OpenAPI.
//! - [`patch`]: JSON merge, JSON patch, strategic merge and server-side apply.
//! - [`runtime`]: Pods as real processes in their own namespaces, with volumes.
//! - [`network`]: the cluster network: namespaces, bridge, addresses, DNS, Service proxy.
//! - [`kubelet`]: the node agent; [`scheduler`]; [`controllers`]: Jobs, Deployments, node lifecycle.
//! - [`certmanager`]: a stand-in for cert-manager's `selfSigned` and `ca` issuers (optional).
//! - [`Sandbox`]: all of it as one value; [`control`]: faults sent to a running `kube-sandbox up`.

pub mod apiserver;
pub mod certmanager;
mod cluster;
pub mod control;
pub mod controllers;
/// The client stack with a pool idle timeout below kube-apiserver's; the one file shared with
/// `etcd-operator-api` (see its module documentation).
#[path = "../../api/src/kube_client.rs"]
pub mod kube_client;
pub mod kubelet;
pub mod kubernetes;
pub mod network;
pub mod patch;
pub mod runtime;
mod sandbox;
pub mod scheduler;
pub mod schema;
pub mod streaming;

pub use cluster::ClusterOptions;
pub use sandbox::{ControlPlane, Sandbox, SandboxOptions};
