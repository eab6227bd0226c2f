//! The root credentials Secret of `spec.auth`.

use k8s_openapi::api::core::v1::Secret;

/// The Secret type `spec.auth.rootCredentialsSecretRef` must have.
pub const BASIC_AUTH_SECRET_TYPE: &str = "kubernetes.io/basic-auth";

/// The root password of the Secret `name`, or what is wrong with it (never the password).
pub fn root_password(name: &str, secret: &Secret) -> Result<String, String> {
    let kind = secret.type_.as_deref().unwrap_or("Opaque");
    if kind != BASIC_AUTH_SECRET_TYPE {
        return Err(format!(
            "Secret {name} (root credentials) has type {kind}; it must be of type {BASIC_AUTH_SECRET_TYPE}"
        ));
    }
    // `stringData` overwrites `data`, as the API server folds it in on write (a server never
    // returns it; a Secret built in memory may carry it).
    let value = |key: &str| -> Option<String> {
        secret
            .string_data
            .as_ref()
            .and_then(|d| d.get(key))
            .cloned()
            .or_else(|| {
                secret
                    .data
                    .as_ref()
                    .and_then(|d| d.get(key))
                    .map(|v| String::from_utf8_lossy(&v.0).into_owned())
            })
    };
    if let Some(user) = value("username")
        && user != "root"
    {
        return Err(format!(
            "Secret {name} (root credentials) names the user {user:?}; the operator manages the user \"root\" only"
        ));
    }
    match value("password") {
        Some(password) if !password.is_empty() => Ok(password),
        Some(_) => Err(format!(
            "Secret {name} (root credentials) has an empty password"
        )),
        None => Err(format!("Secret {name} (root credentials) has no password")),
    }
}

/// The key under which a user may keep the password etcd still has while `password` holds the
/// new one: the operator authenticates with it once to change etcd's password.
pub const PREVIOUS_PASSWORD_KEY: &str = "previousPassword";

/// The Secret's `previousPassword`, when it has a non-empty one.
pub fn previous_password(secret: &Secret) -> Option<String> {
    secret
        .string_data
        .as_ref()
        .and_then(|d| d.get(PREVIOUS_PASSWORD_KEY))
        .cloned()
        .or_else(|| {
            secret
                .data
                .as_ref()
                .and_then(|d| d.get(PREVIOUS_PASSWORD_KEY))
                .map(|v| String::from_utf8_lossy(&v.0).into_owned())
        })
        .filter(|p| !p.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    fn secret(kind: &str, entries: &[(&str, &str)]) -> Secret {
        Secret {
            type_: Some(kind.to_string()),
            data: Some(
                entries
                    .iter()
                    .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                    .collect(),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn the_root_password_is_read_and_bad_secrets_are_named_without_it() {
        let good = secret(
            BASIC_AUTH_SECRET_TYPE,
            &[("username", "root"), ("password", "s3cret")],
        );
        assert_eq!(root_password("root", &good).unwrap(), "s3cret");
        let no_user = secret(BASIC_AUTH_SECRET_TYPE, &[("password", "s3cret")]);
        assert_eq!(root_password("root", &no_user).unwrap(), "s3cret");
        for (bad, expected) in [
            (
                secret("Opaque", &[("password", "s3cret")]),
                "has type Opaque",
            ),
            (
                secret(BASIC_AUTH_SECRET_TYPE, &[("password", "")]),
                "has an empty password",
            ),
            (
                secret(BASIC_AUTH_SECRET_TYPE, &[("username", "root")]),
                "has no password",
            ),
            (
                secret(
                    BASIC_AUTH_SECRET_TYPE,
                    &[("username", "admin"), ("password", "s3cret")],
                ),
                "names the user \"admin\"",
            ),
        ] {
            let problem = root_password("root", &bad).unwrap_err();
            assert!(problem.contains(expected), "{problem}");
            assert!(!problem.contains("s3cret"), "never the password: {problem}");
        }
    }

    #[test]
    fn string_data_wins_over_data_as_the_api_server_folds_it() {
        let mut both = secret(
            BASIC_AUTH_SECRET_TYPE,
            &[("username", "root"), ("password", "old")],
        );
        both.string_data = Some([("password".to_string(), "new".to_string())].into());
        assert_eq!(root_password("root", &both).unwrap(), "new");
    }

    #[test]
    fn the_previous_password_is_read_only_when_it_is_not_empty() {
        let with = secret(
            BASIC_AUTH_SECRET_TYPE,
            &[("password", "new"), ("previousPassword", "old")],
        );
        assert_eq!(previous_password(&with).as_deref(), Some("old"));
        let empty = secret(
            BASIC_AUTH_SECRET_TYPE,
            &[("password", "new"), ("previousPassword", "")],
        );
        assert_eq!(previous_password(&empty), None);
        let without = secret(BASIC_AUTH_SECRET_TYPE, &[("password", "new")]);
        assert_eq!(previous_password(&without), None);
    }
}
