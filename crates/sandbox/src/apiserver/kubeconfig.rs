//! The kubeconfig a sandbox writes: its server, CA and the administrator's token.

use base64::Engine;

/// A kubeconfig with one cluster, one user and one context, all named `sandbox`.
pub fn render(server_url: &str, ca_pem: &str, token: &str) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: sandbox
  cluster:
    server: {server_url}
    certificate-authority-data: {ca}
users:
- name: sandbox-admin
  user:
    token: {token}
contexts:
- name: sandbox
  context:
    cluster: sandbox
    user: sandbox-admin
    namespace: default
current-context: sandbox
preferences: {{}}
"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubeconfig_parses_as_yaml_with_one_context() {
        let text = render(
            "https://127.0.0.1:6443",
            "-----BEGIN CERTIFICATE-----",
            "secret",
        );
        let parsed: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
        assert_eq!(parsed["current-context"], "sandbox");
        assert_eq!(parsed["users"][0]["user"]["token"], "secret");
        assert_eq!(
            parsed["clusters"][0]["cluster"]["server"],
            "https://127.0.0.1:6443"
        );
    }
}
