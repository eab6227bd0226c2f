//! The alert rules of `deploy/prometheus/alerts.yaml` with the real `promtool` (Debian's
//! `prometheus` package, installed by `scripts/install-deps.sh`): they pass `promtool check
//! rules`, their unit tests in `deploy/prometheus/tests/` pass `promtool test rules`, and every
//! alert has a test case in which it fires. The chart's copy is checked in `manifests_tests.rs`
//! and as rendered in `helm.rs`.

use etcd_operator_e2e_support as support;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use support::repo_root;

fn promtool(args: &[&str], dir: &Path) -> (bool, String) {
    let output = Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("running promtool (scripts/install-deps.sh installs Debian's prometheus)");
    (
        output.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
    )
}

fn yaml(path: &Path) -> serde_yaml::Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_rules_pass_promtool_check() {
    let dir = repo_root().join("deploy/prometheus");
    let (ok, output) = promtool(&["check", "rules", "alerts.yaml"], &dir);
    assert!(
        ok,
        "promtool check rules deploy/prometheus/alerts.yaml:\n{output}"
    );
    assert!(output.contains("SUCCESS: 12 rules found"), "{output}");
}

#[test]
fn the_rules_pass_their_unit_tests() {
    let dir = repo_root().join("deploy/prometheus/tests");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no tests in {}", dir.display());
    let mut args = vec!["test", "rules"];
    args.extend(files.iter().map(String::as_str));
    let (ok, output) = promtool(&args, &dir);
    assert!(ok, "promtool test rules:\n{output}");
}

#[test]
fn every_alert_has_a_test_where_it_fires() {
    let rules = yaml(&repo_root().join("deploy/prometheus/alerts.yaml"));
    let alerts: BTreeSet<String> = rules["groups"]
        .as_sequence()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_sequence().unwrap().iter())
        .filter_map(|r| r["alert"].as_str().map(str::to_string))
        .collect();
    let tests = yaml(&repo_root().join("deploy/prometheus/tests/alerts_test.yaml"));
    let firing: BTreeSet<String> = tests["tests"]
        .as_sequence()
        .unwrap()
        .iter()
        .flat_map(|t| t["alert_rule_test"].as_sequence().unwrap().iter())
        .filter(|c| c["exp_alerts"].as_sequence().is_some_and(|a| !a.is_empty()))
        .filter_map(|c| c["alertname"].as_str().map(str::to_string))
        .collect();
    let untested: Vec<&String> = alerts.difference(&firing).collect();
    assert!(
        untested.is_empty(),
        "alerts without a test case in which they fire: {untested:?}"
    );
    assert_eq!(alerts.len(), 12, "{alerts:?}");
}

/// The unit tests can fail: with a threshold changed in a copy of the rules, promtool fails.
#[test]
fn a_changed_rule_fails_its_unit_test() {
    let dir = tempfile::tempdir().unwrap();
    let rules = std::fs::read_to_string(repo_root().join("deploy/prometheus/alerts.yaml")).unwrap();
    let broken = rules.replace(
        "etcd_operator_member_db_size_bytes / etcd_operator_member_db_quota_bytes > 0.8",
        "etcd_operator_member_db_size_bytes / etcd_operator_member_db_quota_bytes > 0.9",
    );
    assert_ne!(broken, rules);
    std::fs::create_dir(dir.path().join("tests")).unwrap();
    std::fs::write(dir.path().join("alerts.yaml"), broken).unwrap();
    std::fs::copy(
        repo_root().join("deploy/prometheus/tests/alerts_test.yaml"),
        dir.path().join("tests/alerts_test.yaml"),
    )
    .unwrap();
    let (ok, output) = promtool(
        &["test", "rules", "alerts_test.yaml"],
        &dir.path().join("tests"),
    );
    assert!(!ok, "promtool passed a broken rule:\n{output}");
    assert!(output.contains("EtcdDatabaseNearQuota"), "{output}");
}
