//! The Kubernetes client every program of this project uses: kube-rs' default stack (base URI,
//! authentication, extra headers, its retry of 429/503/504, the connect, read and write
//! timeouts of the `Config`), with one change: an idle connection leaves the pool before
//! kube-apiserver closes it.
//!
//! kube-apiserver closes a keep-alive connection after 90 s idle (`IdleTimeout` in
//! k8s.io/apiserver's `secure_serving.go`), and hyper-util's pool keeps an idle connection for
//! the same 90 s by default. A request that takes a connection from the pool as the server closes
//! it fails with `IncompleteMessage` (seen in the landing CI of stop 35, on a test's GET; see
//! `docs/testing.md` item 8). With [`POOL_IDLE_TIMEOUT`] below the server's, a connection the
//! server may be closing is never handed out.
//!
//! This file has no dependency on the rest of its crate: `kube-sandbox` (whose clients talk to
//! the same kube-apiserver) compiles it too, with `#[path]`, rather than carry a copy.

use std::time::Duration;

use hyper_util::rt::TokioExecutor;
use kube::client::ConfigExt;
use kube::client::retry::RetryPolicy;
use tower::retry::RetryLayer;
use tower::{BoxError, ServiceBuilder};

/// How long an idle connection stays in the pool: well below kube-apiserver's 90 s, so a
/// loaded machine that notices the server's close late still never reuses it. The pool checks
/// it when it hands a connection out, and a timer drops expired connections in the background.
pub const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(45);

/// A client for `config`, as `kube::Client::try_from(config)` builds it but with
/// [`POOL_IDLE_TIMEOUT`]. Proxy URLs are not supported (kube-rs' proxy features are not built
/// into this project); a `Config` that names one is refused with a clear error.
pub fn client_for(config: kube::Config) -> Result<kube::Client, kube::Error> {
    client_with_pool_idle(config, POOL_IDLE_TIMEOUT)
}

/// [`client_for`] with another pool idle timeout (its tests use a short one).
pub fn client_with_pool_idle(
    config: kube::Config,
    pool_idle_timeout: Duration,
) -> Result<kube::Client, kube::Error> {
    if let Some(proxy_url) = &config.proxy_url {
        return Err(kube::Error::ProxyProtocolUnsupported {
            proxy_url: Box::new(proxy_url.clone()),
        });
    }
    let mut connector = hyper_timeout::TimeoutConnector::new(config.rustls_https_connector()?);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);
    let http = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .pool_idle_timeout(pool_idle_timeout)
        .pool_timer(hyper_util::rt::TokioTimer::new())
        .build(connector);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(
            config
                .default_retry
                .then_some(RetryLayer::new(RetryPolicy::server_retry())),
        )
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(BoxError::from)
        .service(http);
    Ok(kube::Client::new(service, config.default_namespace))
}
