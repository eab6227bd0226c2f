//! One member's HTTP routes (etcd's `--listen-metrics-urls`, and its client URLs too):
//! `/health`, `/readyz`, `/livez` and `/metrics`, answered from the member's state with
//! etcd 3.6's bodies.

use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::grpc::MemberApi;
use crate::state::AlarmKind;

/// The HTTP routes of `api`'s member (etcd serves them on its metrics and client URLs).
pub fn router(api: MemberApi) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/readyz", get(readyz))
        .route("/livez", get(livez))
        .route("/metrics", get(metrics))
        .with_state(api)
}

fn text(code: StatusCode, body: String) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body,
    )
        .into_response()
}

/// What `/health` looks at: the cluster's alarms, the member's leader.
struct Facts {
    alarms: Vec<AlarmKind>,
    has_leader: bool,
}

fn facts(api: &MemberApi) -> Option<Facts> {
    let id = api.id();
    api.with(|c| {
        c.status(id).ok().map(|s| Facts {
            alarms: c.alarms().iter().map(|a| a.kind).collect(),
            has_leader: s.leader != 0,
        })
    })
}

/// The `exclude=` alarm names and whether `serializable=true` is in `query`.
fn health_query(query: Option<&str>) -> (Vec<String>, bool) {
    let mut exclude = Vec::new();
    let mut serializable = false;
    for pair in query.unwrap_or_default().split('&') {
        match pair.split_once('=') {
            Some(("exclude", name)) => exclude.push(name.to_string()),
            Some(("serializable", "true")) => serializable = true,
            _ => {}
        }
    }
    (exclude, serializable)
}

/// etcd's `/health` verdict: `None` when healthy, else the reason.
fn health_reason(facts: &Facts, exclude: &[String], serializable: bool) -> Option<String> {
    if let Some(alarm) = facts
        .alarms
        .iter()
        .find(|a| !exclude.iter().any(|e| e == a.name()))
    {
        return Some(format!("ALARM {}", alarm.name()));
    }
    if !serializable && !facts.has_leader {
        return Some("RAFT NO LEADER".to_string());
    }
    None
}

async fn health(State(api): State<MemberApi>, RawQuery(query): RawQuery) -> Response {
    let (exclude, serializable) = health_query(query.as_deref());
    let reason = match facts(&api) {
        Some(f) => health_reason(&f, &exclude, serializable),
        None => Some("RANGE ERROR:etcdserver: server stopped".to_string()),
    };
    match reason {
        None => text(
            StatusCode::OK,
            r#"{"health":"true","reason":""}"#.to_string(),
        ),
        Some(reason) => text(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(r#"{{"health":"false","reason":"{reason}"}}"#),
        ),
    }
}

/// etcd's `/readyz` and `/livez` checks: each either passes or says why not.
fn failed_checks(facts: Option<&Facts>, ready: bool) -> Vec<String> {
    let Some(f) = facts else {
        return vec!["[-]serializable_read failed: etcdserver: server stopped".to_string()];
    };
    let mut failed = Vec::new();
    if ready && f.alarms.contains(&AlarmKind::Corrupt) {
        failed.push("[-]data_corruption failed: alarm activated: CORRUPT".to_string());
    }
    if ready && !f.has_leader {
        failed.push("[-]linearizable_read failed: etcdserver: no leader".to_string());
    }
    failed
}

fn checks_answer(facts: Option<Facts>, ready: bool, name: &str) -> Response {
    let failed = failed_checks(facts.as_ref(), ready);
    if failed.is_empty() {
        text(StatusCode::OK, "ok\n".to_string())
    } else {
        text(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("{}\n{name} check failed\n", failed.join("\n")),
        )
    }
}

async fn readyz(State(api): State<MemberApi>) -> Response {
    checks_answer(facts(&api), true, "readyz")
}

async fn livez(State(api): State<MemberApi>) -> Response {
    checks_answer(facts(&api), false, "livez")
}

/// A few of etcd's metrics, in Prometheus' text format: the ones dashboards and the
/// operator's documentation look at.
async fn metrics(State(api): State<MemberApi>) -> Response {
    let id = api.id();
    let Some(s) = api.with(|c| c.status(id).ok()) else {
        return text(StatusCode::SERVICE_UNAVAILABLE, String::new());
    };
    let gauges: [(&str, &str, i64); 6] = [
        (
            "etcd_server_has_leader",
            "Whether or not a leader exists. 1 is existence, 0 is not.",
            i64::from(s.leader != 0),
        ),
        (
            "etcd_server_is_leader",
            "Whether or not this member is a leader. 1 if is, 0 otherwise.",
            i64::from(s.leader == id),
        ),
        (
            "etcd_server_is_learner",
            "Whether or not this member is a learner. 1 if is, 0 otherwise.",
            i64::from(s.is_learner),
        ),
        (
            "etcd_mvcc_db_total_size_in_bytes",
            "Total size of the underlying database physically allocated in bytes.",
            s.db_size,
        ),
        (
            "etcd_mvcc_db_total_size_in_use_in_bytes",
            "Total size of the underlying database logically in use in bytes.",
            s.db_size_in_use,
        ),
        (
            "etcd_server_quota_backend_bytes",
            "Current backend storage quota size in bytes.",
            s.db_size_quota,
        ),
    ];
    let mut body = String::new();
    for (name, help, value) in gauges {
        body.push_str(&format!(
            "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}\n"
        ));
    }
    text(StatusCode::OK, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(alarms: &[AlarmKind], has_leader: bool) -> Facts {
        Facts {
            alarms: alarms.to_vec(),
            has_leader,
        }
    }

    #[test]
    fn health_reasons_follow_etcd_order() {
        let nospace = facts(&[AlarmKind::NoSpace], true);
        assert_eq!(
            health_reason(&nospace, &[], false).as_deref(),
            Some("ALARM NOSPACE")
        );
        let excluded = vec!["NOSPACE".to_string()];
        assert_eq!(health_reason(&nospace, &excluded, false), None);
        let leaderless = facts(&[], false);
        assert_eq!(
            health_reason(&leaderless, &[], false).as_deref(),
            Some("RAFT NO LEADER")
        );
        assert_eq!(health_reason(&leaderless, &[], true), None);
        let corrupt = facts(&[AlarmKind::Corrupt], false);
        assert_eq!(
            health_reason(&corrupt, &excluded, false).as_deref(),
            Some("ALARM CORRUPT")
        );
    }

    #[test]
    fn health_queries_parse() {
        let (exclude, serializable) = health_query(Some("exclude=NOSPACE&serializable=true"));
        assert_eq!(exclude, vec!["NOSPACE".to_string()]);
        assert!(serializable);
        assert_eq!(health_query(None), (Vec::new(), false));
    }

    #[test]
    fn readiness_needs_a_leader_and_no_corruption_liveness_only_a_process() {
        assert!(failed_checks(Some(&facts(&[], true)), true).is_empty());
        assert_eq!(
            failed_checks(Some(&facts(&[AlarmKind::Corrupt], false)), true).len(),
            2
        );
        assert!(failed_checks(Some(&facts(&[AlarmKind::Corrupt], false)), false).is_empty());
        assert_eq!(failed_checks(None, false).len(), 1);
    }
}
