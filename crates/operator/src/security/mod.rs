//! TLS and credentials: checking what the spec refers to, and what the operator dials etcd with.

mod auth;
pub mod certmanager;
pub mod issuer;
mod tls;

pub use auth::{PREVIOUS_PASSWORD_KEY, previous_password, root_password};
pub use tls::{
    CertificateValidity, Purpose, TLS_SECRET_TYPE, TlsMaterial, chains_to, check_tls_secret,
    expiring_certificates, trust_digest,
};
