//! RBAC as the real server evaluates it: a request is allowed when some rule of a role bound
//! to the user (or one of its groups, or its service account) covers its verb, API group,
//! resource (and subresource), name and namespace.

use serde_json::Value;

use super::Identity;
use crate::apiserver::server::ApiServer;
use crate::apiserver::store::ResourceId;

/// What is being asked, in RBAC's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attributes {
    Resource {
        verb: String,
        group: String,
        resource: String,
        subresource: Option<String>,
        namespace: Option<String>,
        name: Option<String>,
    },
    NonResource {
        verb: String,
        path: String,
    },
}

impl Attributes {
    /// kube-apiserver's wording of a 403: `pods "x" is forbidden: User "u" cannot get resource ...`.
    pub fn forbidden_message(&self, user: &str) -> String {
        match self {
            Attributes::Resource {
                verb,
                group,
                resource,
                subresource,
                namespace,
                name,
            } => {
                let full = match subresource {
                    Some(sub) => format!("{resource}/{sub}"),
                    None => resource.clone(),
                };
                let qualified = if group.is_empty() {
                    resource.clone()
                } else {
                    format!("{resource}.{group}")
                };
                let subject = match name {
                    Some(name) => format!("{qualified} \"{name}\""),
                    None => qualified,
                };
                let scope = match namespace {
                    Some(ns) => format!("in the namespace \"{ns}\""),
                    None => "at the cluster scope".to_string(),
                };
                format!(
                    "{subject} is forbidden: User \"{user}\" cannot {verb} resource \"{full}\" in API group \"{group}\" {scope}"
                )
            }
            Attributes::NonResource { verb, path } => {
                format!("forbidden: User \"{user}\" cannot {verb} path \"{path}\"")
            }
        }
    }
}

/// Whether the stored RBAC objects allow `identity` to do `attributes`.
pub fn is_allowed(server: &ApiServer, identity: &Identity, attributes: &Attributes) -> bool {
    if identity.is_admin {
        return true;
    }
    let namespace = match attributes {
        Attributes::Resource {
            namespace: Some(namespace),
            ..
        } => namespace.as_str(),
        _ => "",
    };
    rules_for(server, identity, namespace)
        .iter()
        .any(|rule| rule_allows(rule, attributes))
}

/// The rules that apply to `identity` in `namespace`: from ClusterRoleBindings, and from the
/// RoleBindings of the namespace (resource rules only), as SelfSubjectRulesReview lists them.
pub fn rules_for(server: &ApiServer, identity: &Identity, namespace: &str) -> Vec<Value> {
    if identity.is_admin {
        return vec![
            serde_json::json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}),
            serde_json::json!({"nonResourceURLs": ["*"], "verbs": ["*"]}),
        ];
    }
    let rbac = |resource: &str| ResourceId::new("rbac.authorization.k8s.io", resource);
    let role_rules = |kind: &str, name: &str, namespace: &str| -> Vec<Value> {
        let (resource, ns) = match kind {
            "ClusterRole" => ("clusterroles", ""),
            _ => ("roles", namespace),
        };
        server
            .store
            .get(&rbac(resource), ns, name)
            .and_then(|role| role["rules"].as_array().cloned())
            .unwrap_or_default()
    };
    let mut rules = Vec::new();
    for binding in server
        .store
        .list(&rbac("clusterrolebindings"), None, None, None, &|_| true)
        .items
    {
        if binds(&binding, identity, "") {
            rules.extend(role_rules("ClusterRole", ref_name(&binding), ""));
        }
    }
    for binding in server
        .store
        .list(&rbac("rolebindings"), Some(namespace), None, None, &|_| {
            true
        })
        .items
    {
        if binds(&binding, identity, namespace) {
            let kind = binding["roleRef"]["kind"].as_str().unwrap_or("");
            rules.extend(
                role_rules(kind, ref_name(&binding), namespace)
                    .into_iter()
                    .filter(|rule| rule["nonResourceURLs"].is_null()),
            );
        }
    }
    rules
}

fn ref_name(binding: &Value) -> &str {
    binding["roleRef"]["name"].as_str().unwrap_or("")
}

/// Whether one of the binding's subjects is the identity (a service account subject's namespace
/// defaults to the binding's own).
fn binds(binding: &Value, identity: &Identity, binding_namespace: &str) -> bool {
    binding["subjects"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|subject| {
            let name = subject["name"].as_str().unwrap_or("");
            match subject["kind"].as_str() {
                Some("User") => identity.user == name,
                Some("Group") => identity.groups.iter().any(|g| g == name),
                Some("ServiceAccount") => {
                    let namespace = subject["namespace"].as_str().unwrap_or(binding_namespace);
                    identity.user == format!("system:serviceaccount:{namespace}:{name}")
                }
                _ => false,
            }
        })
}

fn has(list: &Value, wanted: &str) -> bool {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .any(|item| item == "*" || item == wanted)
}

/// One PolicyRule against the request.
fn rule_allows(rule: &Value, attributes: &Attributes) -> bool {
    match attributes {
        Attributes::Resource {
            verb,
            group,
            resource,
            subresource,
            name,
            ..
        } => {
            if !has(&rule["verbs"], verb) || !has(&rule["apiGroups"], group) {
                return false;
            }
            let resource_matches = rule["resources"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .any(|r| match subresource {
                    Some(sub) => {
                        r == "*" || r == format!("{resource}/{sub}") || r == format!("*/{sub}")
                    }
                    None => r == "*" || r == resource,
                });
            if !resource_matches {
                return false;
            }
            match rule["resourceNames"]
                .as_array()
                .filter(|names| !names.is_empty())
            {
                None => true,
                Some(names) => name
                    .as_ref()
                    .is_some_and(|n| names.iter().any(|v| v == n.as_str())),
            }
        }
        Attributes::NonResource { verb, path } => {
            has(&rule["verbs"], verb)
                && rule["nonResourceURLs"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .any(|url| {
                        url == path
                            || url == "*"
                            || url
                                .strip_suffix('*')
                                .is_some_and(|prefix| path.starts_with(prefix))
                    })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pods(verb: &str, sub: Option<&str>, name: Option<&str>) -> Attributes {
        Attributes::Resource {
            verb: verb.into(),
            group: String::new(),
            resource: "pods".into(),
            subresource: sub.map(str::to_string),
            namespace: Some("ns".into()),
            name: name.map(str::to_string),
        }
    }

    #[test]
    fn rules_match_verbs_resources_subresources_and_names() {
        let rule =
            json!({"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list"]});
        assert!(rule_allows(&rule, &pods("get", None, Some("a"))));
        assert!(rule_allows(&rule, &pods("get", Some("log"), Some("a"))));
        assert!(!rule_allows(&rule, &pods("get", Some("status"), Some("a"))));
        assert!(!rule_allows(&rule, &pods("delete", None, Some("a"))));
        let named = json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["*"], "resourceNames": ["a"]});
        assert!(rule_allows(&named, &pods("delete", None, Some("a"))));
        assert!(!rule_allows(&named, &pods("delete", None, Some("b"))));
        assert!(!rule_allows(&named, &pods("list", None, None)));
        let urls = json!({"verbs": ["get"], "nonResourceURLs": ["/api", "/apis/*"]});
        let path = |p: &str| Attributes::NonResource {
            verb: "get".into(),
            path: p.into(),
        };
        assert!(rule_allows(&urls, &path("/apis/apps/v1")));
        assert!(!rule_allows(&urls, &path("/version")));
    }

    #[test]
    fn service_account_subjects_default_to_the_binding_namespace() {
        let identity = Identity::service_account("etcd", "operator");
        let binding = json!({"subjects": [{"kind": "ServiceAccount", "name": "operator"}]});
        assert!(binds(&binding, &identity, "etcd"));
        assert!(!binds(&binding, &identity, "other"));
        let group = json!({"subjects": [{"kind": "Group", "name": "system:serviceaccounts:etcd"}]});
        assert!(binds(&group, &identity, ""));
    }
}
