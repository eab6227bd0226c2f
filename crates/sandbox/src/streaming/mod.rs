//! The streaming protocols of `pods/portforward` that Kubernetes clients speak beside the
//! WebSocket channel protocols (see `apiserver/http/streams.rs`): SPDY/3.1 ([`spdy`]), as a
//! plain connection upgrade (`Upgrade: SPDY/3.1`) or tunnelled inside a WebSocket
//! (subprotocol `SPDY/3.1+portforward.k8s.io`, what kubectl 1.31 and newer send first), and
//! the port-forward protocol over it ([`portforward`]).

pub mod channels;
pub mod portforward;
pub mod spdy;
pub mod tunnel;
