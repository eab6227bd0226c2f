//! A stand-in for cert-manager (`kube-sandbox up --cert-manager`,
//! [`crate::SandboxOptions::cert_manager`]): the `cert-manager.io/v1` CRDs `Certificate`,
//! `Issuer` and `ClusterIssuer`, and a controller that behaves like cert-manager's
//! `selfSigned` and `ca` issuers. Generic: nothing in it knows etcd.
//!
//! - Issuers and ClusterIssuers get a Ready condition with cert-manager's reasons:
//!   `IsReady` (selfSigned), `KeyPairVerified`, or `ErrGetKeyPair`/`ErrInvalidKeyPair` when a
//!   `ca` issuer's Secret is missing, unreadable, not a CA or its key does not match;
//!   `ErrInitIssuer` for the issuer types the stand-in does not run (ACME, Vault, Venafi). A
//!   ClusterIssuer's `ca` Secret lives in the cluster resource namespace
//!   ([`CertManagerOptions::cluster_resource_namespace`], `cert-manager` by default, created at
//!   start as cert-manager's installation creates it).
//! - A Certificate gets a Secret (`kubernetes.io/tls` unless it exists with another type) with
//!   `tls.crt`, `tls.key` and `ca.crt` (selfSigned: the certificate itself; ca: the top of the
//!   CA's chain, `tls.crt` carrying the chain without its self-signed root), `key.der` and
//!   `tls-combined.pem` when `additionalOutputFormats` asks, `secretTemplate`'s labels and
//!   annotations, and cert-manager's annotations (`cert-manager.io/certificate-name`,
//!   `issuer-name`, `issuer-kind`, `issuer-group`, `common-name`, `alt-names`, `ip-sans`,
//!   `uri-sans`, subject ones) and label (`controller.cert-manager.io/fao`), written with
//!   server-side apply as cert-manager's issuing controller does. Its status carries Ready
//!   (`Ready`, or the reason of cert-manager's readiness checks: `DoesNotExist`, `MissingData`,
//!   `InvalidKeyPair`, `InvalidCertificate`, `SecretMismatch`, `IncorrectIssuer`,
//!   `IncorrectCertificate`, `RequestChanged`, `Expired`), Issuing while a certificate cannot
//!   be issued yet (`IssuerNotFound`, `IssuerNotReady`; also appended to Ready's message) or
//!   failed (`Failed`, with `lastFailureTime`, `failedIssuanceAttempts` and cert-manager's
//!   back-off of 1 h doubling to 32 h, in cluster time: the sandbox's time scale shortens it; a
//!   changed spec is tried at once), `notBefore`, `notAfter`, `renewalTime` and `revision`.
//! - Renewal: at `renewalTime` = notAfter - renewBefore (or renewBeforePercentage of the
//!   lifetime; by default a third of it), truncated to the second, in real time (certificate
//!   validity is never scaled). A certificate that no longer matches its spec (names,
//!   subject, usages, isCA, duration, key algorithm or size) or issuer is reissued at once; a
//!   Secret whose labels, annotations or output formats drifted is rewritten without
//!   reissuing.
//! - Unlike cert-manager: no minimum `duration` (cert-manager's webhook wants 1 h) or
//!   `renewBefore` (5 min), so tests can use 30 s certificates; the default key is ECDSA
//!   P-256 (cert-manager's is RSA 2048); RSA keys are made by the `openssl` command (ring, the
//!   sandbox's one crypto provider, signs with RSA keys but cannot make them: without openssl,
//!   `algorithm: RSA` fails with a message saying so); no CertificateRequest, Order or
//!   Challenge objects, no webhook (what it would refuse
//!   shows as a failed issuance instead), no `literalSubject`, `otherNames`,
//!   `nameConstraints`, keystores, renewal windows (ignored) or ECDSA P-521; at most one value
//!   per subject attribute; the Secret is not owned by the Certificate (cert-manager's default).

mod certificates;
mod controller;
pub mod crds;
mod der;
pub mod duration;
mod issuers;
mod pki;
mod request;
#[cfg(test)]
mod tests;
pub mod types;

use serde_json::json;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use types::{Certificate, CertificateSpec, CertificateStatus, ClusterIssuer, Issuer};

use crate::apiserver::ApiServer;
use crate::apiserver::bootstrap::create_builtin;
use crate::controllers::TimeScale;

/// How the stand-in runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertManagerOptions {
    /// Where ClusterIssuers' `ca` Secrets live (cert-manager's `--cluster-resource-namespace`,
    /// which defaults to the namespace cert-manager runs in: `cert-manager`).
    pub cluster_resource_namespace: String,
}

impl Default for CertManagerOptions {
    fn default() -> Self {
        Self {
            cluster_resource_namespace: "cert-manager".into(),
        }
    }
}

/// Serves the CRDs (at once: their kinds are served when this returns) and creates the
/// cluster resource namespace.
pub fn install(server: &ApiServer, options: &CertManagerOptions) -> anyhow::Result<()> {
    for crd in crds::all() {
        let name = crd["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        match create_builtin(
            server,
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            "",
            crd,
        ) {
            Ok(_) => {}
            Err(error) if error.code == 409 => {}
            Err(error) => anyhow::bail!("creating the CRD {name}: {}", error.message),
        }
    }
    let namespace = json!({"metadata": {"name": options.cluster_resource_namespace}});
    match create_builtin(server, "", "namespaces", "", namespace) {
        Ok(_) => Ok(()),
        Err(error) if error.code == 409 => Ok(()),
        Err(error) => anyhow::bail!(
            "creating the namespace {}: {}",
            options.cluster_resource_namespace,
            error.message
        ),
    }
}

/// [`install`] through the API, for a real control plane: creates the CRDs, waits until each is
/// Established (its kinds are served), and creates the cluster resource namespace.
pub async fn install_with_client(
    client: &kube::Client,
    options: &CertManagerOptions,
) -> anyhow::Result<()> {
    use k8s_openapi::api::core::v1::Namespace;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{Api, PostParams};
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut names = Vec::new();
    for crd in crds::all() {
        let crd: CustomResourceDefinition = serde_json::from_value(crd)?;
        let name = crd.metadata.name.clone().unwrap_or_default();
        match crds.create(&PostParams::default(), &crd).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => anyhow::bail!("creating the CRD {name}: {error}"),
        }
        names.push(name);
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    for name in names {
        loop {
            let established = crds
                .get_opt(&name)
                .await?
                .and_then(|crd| crd.status)
                .and_then(|status| status.conditions)
                .is_some_and(|conditions| {
                    conditions
                        .iter()
                        .any(|c| c.type_ == "Established" && c.status == "True")
                });
            if established {
                break;
            }
            anyhow::ensure!(
                std::time::Instant::now() < deadline,
                "the CRD {name} was not Established within 30 s"
            );
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
    let namespace: Namespace =
        serde_json::from_value(json!({"metadata": {"name": options.cluster_resource_namespace}}))?;
    match Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(error) => anyhow::bail!(
            "creating the namespace {}: {error}",
            options.cluster_resource_namespace
        ),
    }
}

/// The running controller; dropping it stops it.
pub struct CertManagerHandle {
    token: CancellationToken,
    task: JoinHandle<()>,
}

impl CertManagerHandle {
    pub fn stop(&self) {
        self.token.cancel();
    }
}

impl Drop for CertManagerHandle {
    fn drop(&mut self) {
        self.token.cancel();
        self.task.abort();
    }
}

/// Starts the controller on `client` (the administrator's). Must be called inside a Tokio
/// runtime, after [`install`].
pub fn start(
    client: kube::Client,
    options: CertManagerOptions,
    time_scale: TimeScale,
) -> CertManagerHandle {
    let token = CancellationToken::new();
    let task = tokio::spawn(controller::run(client, options, time_scale, token.clone()));
    CertManagerHandle { token, task }
}
