//! etcd-sim: a simulator of the etcd v3 API calls the operator makes.
//!
//! - [`pb`]: the server side of our own declarations of etcd's gRPC API (`proto/`).
//! - [`refusal`]: etcd's refusals, each with its gRPC code and exact message.
//! - [`state`]: the simulated clusters and etcd's rules, pure and unit-tested.
//! - [`grpc`], [`http`]: one member's gRPC services and HTTP routes.
//! - [`server`]: the process-wide [`server::Sim`] and its members' listeners.
//! - [`flags`], [`single`]: the `etcd-sim` binary, one member started with etcd's flags.
//! - [`hub`], [`front`]: the binary's other two modes: a hub holding every cluster, and one
//!   process per member (in place of `etcd`) forwarding to it.

#![warn(missing_docs)]

/// The generated messages and service traits of `proto/etcdserverpb.proto`.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod pb {
    tonic::include_proto!("etcdserverpb");
}
pub mod flags;
pub mod front;
pub mod grpc;
pub mod http;
pub mod hub;
pub mod refusal;
pub mod server;
pub mod single;
pub mod state;
