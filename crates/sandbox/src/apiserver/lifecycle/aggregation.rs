//! ClusterRole aggregation (the clusterrole-aggregation controller): a ClusterRole with an
//! `aggregationRule` gets as its rules those of every ClusterRole its selectors match.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::apiserver::objects::{self, WriteOptions};
use crate::apiserver::selector::LabelSelector;
use crate::apiserver::server::ApiServer;
use crate::apiserver::store::{ResourceId, StoreEvent};

fn cluster_roles() -> ResourceId {
    ResourceId::new("rbac.authorization.k8s.io", "clusterroles")
}

pub async fn run(server: Arc<ApiServer>, mut events: UnboundedReceiver<Arc<StoreEvent>>) {
    loop {
        let event = tokio::select! {
            _ = server.shutdown.cancelled() => return,
            event = events.recv() => match event { Some(event) => event, None => return },
        };
        if event.resource == cluster_roles() {
            aggregate_all(&server);
        }
    }
}

/// The rules an aggregated role should have: those of the roles its selectors match, in name
/// order, without duplicates.
pub fn aggregated_rules(role: &Value, roles: &[Arc<Value>]) -> Option<Vec<Value>> {
    let selectors: Vec<LabelSelector> = role["aggregationRule"]["clusterRoleSelectors"]
        .as_array()?
        .iter()
        .filter_map(LabelSelector::from_object)
        .collect();
    let mut rules: Vec<Value> = Vec::new();
    for source in roles
        .iter()
        .filter(|r| r["metadata"]["name"] != role["metadata"]["name"])
    {
        let labels = &source["metadata"]["labels"];
        if selectors.iter().any(|s| !s.is_empty() && s.matches(labels)) {
            for rule in source["rules"].as_array().into_iter().flatten() {
                if !rules.contains(rule) {
                    rules.push(rule.clone());
                }
            }
        }
    }
    Some(rules)
}

fn aggregate_all(server: &ApiServer) {
    let roles = server
        .store
        .list(&cluster_roles(), None, None, None, &|_| true)
        .items;
    let Some(kind) = server
        .registry
        .get("rbac.authorization.k8s.io", "clusterroles")
    else {
        return;
    };
    for role in &roles {
        let Some(rules) = aggregated_rules(role, &roles) else {
            continue;
        };
        if role["rules"]
            .as_array()
            .is_some_and(|current| *current == rules)
        {
            continue;
        }
        let name = role["metadata"]["name"].as_str().unwrap_or("");
        let options = WriteOptions::internal("clusterrole-aggregation-controller");
        let _ = objects::update_with(
            server,
            &kind,
            "v1",
            "",
            name,
            None,
            &options,
            &mut |current| {
                let mut updated = current.clone();
                updated["rules"] = Value::Array(rules.clone());
                Ok(updated)
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_aggregated_role_collects_the_rules_of_matching_roles() {
        let admin = Arc::new(
            json!({"metadata": {"name": "admin"}, "aggregationRule": {"clusterRoleSelectors": [
            {"matchLabels": {"aggregate-to-admin": "true"}}]}}),
        );
        let etcd = Arc::new(
            json!({"metadata": {"name": "etcd-admin", "labels": {"aggregate-to-admin": "true"}},
            "rules": [{"apiGroups": ["etcd-operator.cozystack.io"], "resources": ["*"], "verbs": ["*"]}]}),
        );
        let other = Arc::new(json!({"metadata": {"name": "other"}, "rules": [{"verbs": ["get"]}]}));
        let roles = vec![admin.clone(), etcd, other.clone()];
        let rules = aggregated_rules(&admin, &roles).unwrap();
        assert_eq!(rules.len(), 1);
        assert_eq!(rules[0]["apiGroups"][0], "etcd-operator.cozystack.io");
        assert!(aggregated_rules(&other, &roles).is_none());
    }
}
