//! Authentication: the kubeconfig's bearer token is the cluster administrator; a
//! service-account token (issued through TokenRequest) is `system:serviceaccount:<ns>:<name>`.
//! Everyone but the administrator is authorized against the stored RBAC objects.

pub mod rbac;

use std::collections::HashMap;
use std::sync::RwLock;

use http::HeaderMap;
use rand::Rng;

use super::error::{ApiError, ApiResult};

/// Who is making a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub user: String,
    pub groups: Vec<String>,
    /// The kubeconfig's identity, in `system:masters`: every request is allowed.
    pub is_admin: bool,
}

impl Identity {
    pub fn admin() -> Self {
        Self {
            user: "kubernetes-admin".into(),
            groups: vec!["system:masters".into(), "system:authenticated".into()],
            is_admin: true,
        }
    }

    pub fn service_account(namespace: &str, name: &str) -> Self {
        Self {
            user: format!("system:serviceaccount:{namespace}:{name}"),
            groups: service_account_groups(namespace),
            is_admin: false,
        }
    }

    /// An impersonated user: `--as` and `--as-group` of kubectl, allowed for the administrator.
    fn impersonated(user: &str, mut groups: Vec<String>) -> Self {
        if let Some(rest) = user.strip_prefix("system:serviceaccount:")
            && let Some((namespace, _)) = rest.split_once(':')
        {
            groups.extend(service_account_groups(namespace));
        } else {
            groups.push("system:authenticated".into());
        }
        groups.dedup();
        let is_admin = groups.iter().any(|g| g == "system:masters");
        Self {
            user: user.to_string(),
            groups,
            is_admin,
        }
    }
}

fn service_account_groups(namespace: &str) -> Vec<String> {
    vec![
        "system:serviceaccounts".into(),
        format!("system:serviceaccounts:{namespace}"),
        "system:authenticated".into(),
    ]
}

/// Tokens issued to service accounts, by token.
#[derive(Default)]
pub struct ServiceAccountTokens {
    issued: RwLock<HashMap<String, (String, String)>>,
}

impl ServiceAccountTokens {
    pub fn issue(&self, namespace: &str, name: &str) -> String {
        let token = format!("sandbox-sa.{}", random_token());
        self.issued
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(token.clone(), (namespace.to_string(), name.to_string()));
        token
    }

    fn lookup(&self, token: &str) -> Option<(String, String)> {
        self.issued
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(token)
            .cloned()
    }
}

/// 32 random alphanumeric characters.
pub fn random_token() -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut rng = rand::rng();
    (0..32)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// The identity behind a request's `Authorization` header; `None` for an anonymous request.
/// A service-account token stops authenticating once its account is deleted, as bound tokens
/// do; `account_exists` answers for (namespace, name).
pub fn authenticate(
    headers: &HeaderMap,
    admin_token: &str,
    tokens: &ServiceAccountTokens,
    account_exists: &dyn Fn(&str, &str) -> bool,
) -> ApiResult<Option<Identity>> {
    let Some(value) = headers.get(http::header::AUTHORIZATION) else {
        return Ok(None);
    };
    let token = value
        .to_str()
        .ok()
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .ok_or_else(ApiError::unauthorized)?;
    let identity = if token == admin_token {
        Identity::admin()
    } else if let Some((namespace, name)) = tokens.lookup(token)
        && account_exists(&namespace, &name)
    {
        Identity::service_account(&namespace, &name)
    } else {
        return Err(ApiError::unauthorized());
    };
    impersonate(identity, headers).map(Some)
}

/// Applies `Impersonate-User`/`Impersonate-Group`; only the administrator may impersonate.
fn impersonate(identity: Identity, headers: &HeaderMap) -> ApiResult<Identity> {
    let Some(user) = headers
        .get("impersonate-user")
        .and_then(|v| v.to_str().ok())
    else {
        return Ok(identity);
    };
    if !identity.is_admin {
        return Err(ApiError::forbidden(format!(
            "users \"{user}\" is forbidden: User \"{}\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope",
            identity.user
        )));
    }
    let groups = headers
        .get_all("impersonate-group")
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_string))
        .collect();
    Ok(Identity::impersonated(user, groups))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_map_to_identities_and_unknown_tokens_are_unauthorized() {
        let tokens = ServiceAccountTokens::default();
        let sa = tokens.issue("etcd", "operator");
        let mut headers = HeaderMap::new();
        headers.insert("authorization", format!("Bearer {sa}").parse().unwrap());
        let exists = |_: &str, name: &str| name == "operator";
        let identity = authenticate(&headers, "admin", &tokens, &exists)
            .unwrap()
            .unwrap();
        assert_eq!(identity.user, "system:serviceaccount:etcd:operator");
        assert!(
            identity
                .groups
                .contains(&"system:serviceaccounts:etcd".to_string())
        );
        headers.insert("authorization", "Bearer nope".parse().unwrap());
        let code = |headers: &HeaderMap| {
            authenticate(headers, "admin", &tokens, &exists)
                .unwrap_err()
                .code
        };
        assert_eq!(code(&headers), 401);
        let gone = tokens.issue("etcd", "deleted");
        headers.insert("authorization", format!("Bearer {gone}").parse().unwrap());
        assert_eq!(code(&headers), 401, "the token of a deleted account");
        headers.insert("authorization", "Bearer admin".parse().unwrap());
        headers.insert(
            "impersonate-user",
            "system:serviceaccount:etcd:operator".parse().unwrap(),
        );
        let impersonated = authenticate(&headers, "admin", &tokens, &exists)
            .unwrap()
            .unwrap();
        assert!(!impersonated.is_admin);
        assert_eq!(impersonated.user, "system:serviceaccount:etcd:operator");
    }
}
