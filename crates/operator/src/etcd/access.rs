//! [`EtcdAccess`]: what the operator dials etcd with beyond the URL: the CA it verifies the
//! members with, its client certificate under mutual TLS, and its credentials once etcd's
//! authentication is on. Built fresh from the Secrets at every observation, so a rotated
//! certificate or a changed Secret is used from the next pass on, never cached past it.

use etcd_client::{Certificate, Identity, TlsOptions};

/// TLS of the operator's connections to etcd's client API.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientTls {
    /// The CA the members' server certificates chain to.
    pub ca_pem: Vec<u8>,
    /// The operator's certificate and key, under mutual TLS.
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
}

/// How to reach etcd: plaintext and anonymous by default.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct EtcdAccess {
    pub tls: Option<ClientTls>,
    /// User name and password (etcd's `Authenticate`), once authentication is enabled.
    pub credentials: Option<(String, String)>,
}

impl std::fmt::Debug for EtcdAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdAccess")
            .field("tls", &self.tls.as_ref().map(|t| t.identity.is_some()))
            .field("user", &self.credentials.as_ref().map(|(u, _)| u.as_str()))
            .finish()
    }
}

impl EtcdAccess {
    pub fn plaintext() -> Self {
        Self::default()
    }

    /// The tonic TLS configuration, if TLS is on.
    pub fn tls_options(&self) -> Option<TlsOptions> {
        let tls = self.tls.as_ref()?;
        let mut options = TlsOptions::new().ca_certificate(Certificate::from_pem(&tls.ca_pem));
        if let Some((cert, key)) = &tls.identity {
            options = options.identity(Identity::from_pem(cert, key));
        }
        Some(options)
    }

    /// The same access without credentials (to find out whether etcd asks for them).
    pub fn anonymous(&self) -> Self {
        Self {
            tls: self.tls.clone(),
            credentials: None,
        }
    }
}
