//! A tiny in-cluster client for the sandbox's tests: with the Pod's service-account
//! credentials (`kube::Config::incluster`), it lists the Pods of its namespace every two
//! seconds and prints their names, as an operator's first request would.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = kube::Config::incluster()?;
    let namespace = config.default_namespace.clone();
    let client = kube_sandbox::kube_client::client_for(config)?;
    let pods: Api<Pod> = Api::namespaced(client, &namespace);
    loop {
        match pods.list(&ListParams::default()).await {
            Ok(list) => {
                let names: Vec<String> = list
                    .items
                    .into_iter()
                    .filter_map(|pod| pod.metadata.name)
                    .collect();
                println!("pods in {namespace}: {}", names.join(" "));
            }
            Err(error) => println!("listing pods failed: {error}"),
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}
