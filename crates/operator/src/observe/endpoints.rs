//! [`EtcdUrlMap`]: where the operator dials a member's client URL.
//!
//! In a Kubernetes cluster the member URLs (`http://<member>.<cluster>.<ns>.svc:2379`) resolve
//! through cluster DNS and the map is the identity. A test that runs the operator outside any
//! cluster network maps them to the addresses where it started etcd.

use std::sync::Arc;

type Rewrite = Arc<dyn Fn(&str) -> String + Send + Sync>;

/// Maps a member's client URL to the URL to dial.
#[derive(Clone, Default)]
pub struct EtcdUrlMap {
    rewrite: Option<Rewrite>,
}

impl EtcdUrlMap {
    /// The identity: dial the URLs as they are (in-cluster).
    pub fn identity() -> Self {
        Self::default()
    }

    /// Dial `rewrite(url)` instead of `url`.
    pub fn new(rewrite: impl Fn(&str) -> String + Send + Sync + 'static) -> Self {
        Self {
            rewrite: Some(Arc::new(rewrite)),
        }
    }

    pub fn map(&self, url: &str) -> String {
        match &self.rewrite {
            Some(rewrite) => rewrite(url),
            None => url.to_string(),
        }
    }

    pub fn map_all(&self, urls: &[String]) -> Vec<String> {
        urls.iter().map(|u| self.map(u)).collect()
    }
}

impl std::fmt::Debug for EtcdUrlMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.rewrite.is_some() {
            "EtcdUrlMap(rewrite)"
        } else {
            "EtcdUrlMap(identity)"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_keeps_urls_and_rewrite_applies() {
        assert_eq!(EtcdUrlMap::identity().map("http://a:2379"), "http://a:2379");
        let map = EtcdUrlMap::new(|u| u.replace("a.svc", "127.0.0.9"));
        assert_eq!(
            map.map_all(&["http://a.svc:2379".to_string()]),
            vec!["http://127.0.0.9:2379".to_string()]
        );
    }
}
