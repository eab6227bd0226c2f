//! The history checker (`tools/history-checker`, built by `scripts/install-deps.sh`) on
//! hand-made histories that must pass and must fail: a stale read, a lost acknowledged write,
//! a watch gap, a watch that delivers out of order or twice, a value no client wrote, a
//! revision going back across keys, and a loss a scenario allows. Each failing history gets
//! porcupine's visualization. Then a history built by the workload's own types (as the end-to-
//! end tests write them) is read the same way, so the two sides agree on the format.

use etcd_operator_e2e_support as support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;
use support::history::{
    self, History, HistoryClient, KeyValue, OpType, Operation, Outcome, WatchEvent, WatchRecord,
};

#[derive(Debug, Deserialize)]
struct Expected {
    result: String,
    kinds: Vec<String>,
    lost: Vec<String>,
}

fn testdata() -> PathBuf {
    support::repo_root().join("tools/history-checker/testdata")
}

fn run_checker(history: &Path, out: &Path) -> (Option<i32>, String, serde_json::Value) {
    let output = Command::new(history::checker())
        .arg("-timeout=20s")
        .arg(format!("-out={}", out.display()))
        .arg(history)
        .output()
        .expect("the checker runs");
    let verdict = std::fs::read(out.join("verdict.json"))
        .map(|b| serde_json::from_slice(&b).expect("verdict.json parses"))
        .unwrap_or(serde_json::Value::Null);
    (
        output.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
        verdict,
    )
}

#[test]
fn hand_made_histories_pass_and_fail_as_expected() {
    let expected: BTreeMap<String, Expected> = serde_json::from_slice(
        &std::fs::read(testdata().join("expected.json")).expect("testdata/expected.json"),
    )
    .expect("expected.json parses");
    assert!(expected.len() >= 10, "the fixtures are listed");
    for must in [
        "fail-stale-read.json",
        "fail-lost-write.json",
        "fail-watch-gap.json",
    ] {
        assert!(expected.contains_key(must), "{must} is among the fixtures");
    }
    // Kept after the run (target/tmp/histories/history_checker/<fixture>/), so a person can
    // open the visualization of each broken history.
    for (name, want) in &expected {
        let dir = history::history_dir(name.trim_end_matches(".json"));
        let _ = std::fs::remove_dir_all(&dir);
        let (code, printed, verdict) = run_checker(&testdata().join(name), &dir);
        let want_code = match want.result.as_str() {
            "ok" => 0,
            "violation" => 1,
            other => panic!("{name}: expected result {other}"),
        };
        assert_eq!(code, Some(want_code), "{name}: exit status\n{printed}");
        assert_eq!(verdict["result"], want.result, "{name}: {printed}");
        let mut kinds: Vec<String> = verdict["violations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["kind"].as_str().unwrap().to_string())
            .collect();
        kinds.sort();
        kinds.dedup();
        assert_eq!(kinds, want.kinds, "{name}: violations\n{printed}");
        let lost: Vec<String> = verdict["lost_writes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| {
                format!(
                    "{}={}@{}",
                    w["key"].as_str().unwrap(),
                    w["value"].as_str().unwrap_or_default(),
                    w["revision"]
                )
            })
            .collect();
        assert_eq!(lost, want.lost, "{name}: lost writes\n{printed}");
        let page = dir.join("visualization.html");
        if want_code == 1 {
            let html = std::fs::read_to_string(&page)
                .unwrap_or_else(|e| panic!("{name}: no visualization at {}: {e}", page.display()));
            assert!(
                html.contains("<html") && html.len() > 10_000,
                "{name}: porcupine's page"
            );
            assert!(
                printed.contains(&page.display().to_string()),
                "{name}: the checker says where the visualization is: {printed}"
            );
            println!(
                "{name}: {} as expected ({}); visualization: {}",
                want.result,
                want.kinds.join(", "),
                page.display()
            );
        } else {
            assert!(
                !page.exists(),
                "{name}: no visualization for a passing history"
            );
            println!("{name}: ok as expected");
        }
    }
}

#[test]
fn a_malformed_history_is_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.json");
    std::fs::write(
        &path,
        r#"{"version": 1, "prefix": "t/", "keys": ["t/a"], "clients": [{"id": 0}], "operations": [{"client": 0, "call": 9, "return": 3, "type": "get", "key": "t/a", "status": "ok", "revision": 1}]}"#,
    )
    .unwrap();
    let (code, printed, _) = run_checker(&path, &dir.path().join("out"));
    assert_eq!(code, Some(3), "{printed}");
    assert!(
        printed.contains("returns (3) before its call (9)"),
        "{printed}"
    );
}

fn op(client: usize, call: u64, ret: u64, kind: OpType, key: &str) -> Operation {
    Operation {
        client,
        call,
        ret,
        kind,
        key: key.to_string(),
        value: String::new(),
        expected_mod_revision: 0,
        status: Outcome::Ok,
        error: String::new(),
        revision: 0,
        kvs: Vec::new(),
        succeeded: false,
        deleted: 0,
    }
}

fn put(client: usize, call: u64, ret: u64, key: &str, value: &str, revision: i64) -> Operation {
    Operation {
        value: value.to_string(),
        revision,
        ..op(client, call, ret, OpType::Put, key)
    }
}

fn read(
    client: usize,
    call: u64,
    ret: u64,
    key: &str,
    kv: Option<(&str, i64)>,
    revision: i64,
) -> Operation {
    Operation {
        revision,
        kvs: kv
            .map(|(value, mod_revision)| KeyValue {
                key: key.to_string(),
                value: value.to_string(),
                mod_revision,
            })
            .into_iter()
            .collect(),
        ..op(client, call, ret, OpType::Get, key)
    }
}

fn event(at: u64, revision: i64, key: &str, value: &str) -> WatchEvent {
    WatchEvent {
        at,
        revision,
        kind: "put",
        key: key.to_string(),
        value: value.to_string(),
    }
}

/// A history as the workload writes it: two clients, an unknown put a watch saw applied, a
/// txn, the final read, a watch and the replay.
fn workload_history(stale: bool) -> History {
    let k = "w/k0";
    let mut unknown = put(1, 2_000, 3_000, k, "c1-1", 0);
    unknown.status = Outcome::Unknown;
    unknown.error = "timed out".into();
    let mut txn = Operation {
        value: "c0-2".into(),
        expected_mod_revision: 12,
        succeeded: true,
        revision: 13,
        ..op(0, 5_000, 6_000, OpType::Txn, k)
    };
    txn.status = Outcome::Ok;
    let late_read = if stale {
        // Called after the txn returned rev 13, it reads c1-1@12 at rev 12.
        read(1, 7_000, 8_000, k, Some(("c1-1", 12)), 12)
    } else {
        read(1, 7_000, 8_000, k, Some(("c0-2", 13)), 13)
    };
    let events = vec![
        event(1_500, 11, k, "c0-1"),
        event(3_500, 12, k, "c1-1"),
        event(6_500, 13, k, "c0-2"),
    ];
    History {
        version: 1,
        label: "rust-side".into(),
        prefix: "w/".into(),
        keys: vec![k.into()],
        start_revision: 10,
        final_revision: 13,
        allow_loss: false,
        etcd_version: Some("3.6.17".into()),
        clients: ["service-0", "member-0", "final"]
            .iter()
            .enumerate()
            .map(|(id, name)| HistoryClient {
                id,
                name: name.to_string(),
                endpoint: "http://etcd-client.w.svc:2379".into(),
            })
            .collect(),
        operations: vec![
            put(0, 1_000, 1_400, k, "c0-1", 11),
            unknown,
            read(0, 4_000, 4_500, k, Some(("c1-1", 12)), 12),
            txn,
            late_read,
            Operation {
                revision: 13,
                kvs: vec![KeyValue {
                    key: k.into(),
                    value: "c0-2".into(),
                    mod_revision: 13,
                }],
                ..op(2, 9_000, 9_500, OpType::Range, "w/")
            },
        ],
        watches: vec![
            WatchRecord {
                id: 0,
                name: "service".into(),
                start_revision: 11,
                events: events.clone(),
                ..Default::default()
            },
            WatchRecord {
                id: 1,
                name: "replay".into(),
                replay: true,
                start_revision: 11,
                events,
                ..Default::default()
            },
        ],
    }
}

#[tokio::test]
async fn the_workloads_history_format_is_the_checkers() {
    let dir = tempfile::tempdir().unwrap();
    let verdict = history::check(&workload_history(false), &dir.path().join("good")).await;
    assert_eq!(verdict.result, "ok", "{:?}", verdict);
    assert_eq!(verdict.linearizability, "ok");
    assert_eq!(
        verdict.unknown_resolved, 1,
        "the watch settled the unknown put"
    );
    assert_eq!(verdict.acknowledged_writes, 2);

    let verdict = history::check(&workload_history(true), &dir.path().join("stale")).await;
    assert_eq!(verdict.result, "violation", "{:?}", verdict);
    assert_eq!(verdict.linearizability, "illegal");
    let page = verdict
        .visualization
        .expect("a visualization of the stale read");
    assert!(Path::new(&page).starts_with(dir.path().join("stale")));
    assert!(std::fs::metadata(&page).unwrap().len() > 10_000);
}

#[test]
fn the_installed_checker_is_built_from_these_sources() {
    // checker() refuses a binary whose digest differs from tools/history-checker's.
    let path = history::checker();
    let digest =
        history::source_digest(&support::repo_root().join("tools/history-checker")).unwrap();
    let said = Command::new(&path).arg("-version").output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&said.stdout).trim(),
        format!("history-checker {digest}")
    );
}
