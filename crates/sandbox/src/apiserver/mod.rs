//! The Kubernetes REST API server: HTTPS with its own CA, in-memory storage with one
//! cluster-wide resourceVersion counter, watch with history, discovery and OpenAPI, built-in
//! kinds and CRDs through one registry, RBAC for service-account tokens, garbage collection,
//! namespace deletion, PodDisruptionBudget status and eviction.
//!
//! Start one with [`RunningApiServer::start`]; most users want [`crate::Sandbox`] instead.

pub mod auth;
pub mod bootstrap;
mod convert;
pub mod crd;
pub mod error;
mod http;
mod jsonpath;
pub mod kinds;
pub mod kubeconfig;
mod lifecycle;
pub mod logs;
pub mod objects;
pub mod pdb;
mod protobuf;
pub mod registry;
pub mod request;
pub mod selector;
mod server;
pub mod store;
pub mod streams;
pub mod tls;

pub use error::{ApiError, ApiResult};
pub use logs::{LogError, LogRequest, LogStream, PodLogs};
pub use server::{ApiServer, ApiServerConfig, RunningApiServer};
pub use streams::{ExecRequest, PodStreams};
