//! The proof harness every disruptive test shares: the history a client workload recorded
//! (`support::workload`), written next to the test's other outputs and checked by the history
//! checker (`tools/history-checker`, porcupine; built by `scripts/install-deps.sh`).
//!
//! The checker proves, for one history: every operation linearizable under etcd's key-value
//! model with revisions (per key, with revision order checked across keys), every acknowledged
//! write present in the cluster's final history, and the watch guarantees (ordered, no
//! duplicates, no gaps across resumes, every event a write the history allows, progress never
//! going back). Its verdict and, when something is wrong, porcupine's HTML visualization of the
//! history land in [`history_dir`]: `target/tmp/histories/<test binary>/<label>/`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Where install-deps puts the checker; `HISTORY_CHECKER` names another build.
pub const CHECKER: &str = "/usr/local/lib/history-checker/history-checker";
/// How long porcupine may search before the verdict is "unknown" (its own limit).
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the checker process may run in all before it is killed (its limit plus reading,
/// the other checks and the visualization).
const PROCESS_LIMIT: Duration = Duration::from_secs(180);

/// A recorded history, as `tools/history-checker/history.go` reads it (version 1). Times are
/// nanoseconds of one monotonic clock from the workload's start.
#[derive(Clone, Debug, Default, Serialize)]
pub struct History {
    pub version: u32,
    pub label: String,
    pub prefix: String,
    pub keys: Vec<String>,
    pub start_revision: i64,
    pub final_revision: i64,
    pub allow_loss: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub etcd_version: Option<String>,
    pub clients: Vec<HistoryClient>,
    pub operations: Vec<Operation>,
    pub watches: Vec<WatchRecord>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct HistoryClient {
    pub id: usize,
    pub name: String,
    pub endpoint: String,
}

#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct KeyValue {
    pub key: String,
    pub value: String,
    pub mod_revision: i64,
}

/// What became of a request.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Answered; the response is recorded.
    #[default]
    Ok,
    /// A definite error: etcd refused it and did not apply it.
    Failed,
    /// Timed out or the connection was lost: it may or may not have been applied.
    Unknown,
}

#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum OpType {
    Put,
    Get,
    Range,
    Txn,
    Delete,
}

#[derive(Clone, Debug, Serialize)]
pub struct Operation {
    pub client: usize,
    pub call: u64,
    #[serde(rename = "return")]
    pub ret: u64,
    #[serde(rename = "type")]
    pub kind: OpType,
    pub key: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub value: String,
    #[serde(skip_serializing_if = "is_zero")]
    pub expected_mod_revision: i64,
    pub status: Outcome,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub error: String,
    #[serde(skip_serializing_if = "is_zero")]
    pub revision: i64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub kvs: Vec<KeyValue>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub succeeded: bool,
    #[serde(skip_serializing_if = "is_zero")]
    pub deleted: i64,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct WatchRecord {
    pub id: usize,
    pub name: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub replay: bool,
    pub start_revision: i64,
    pub events: Vec<WatchEvent>,
    pub progress: Vec<Progress>,
    pub resumes: Vec<Resume>,
}

#[derive(Clone, Debug, Serialize)]
pub struct WatchEvent {
    pub at: u64,
    pub revision: i64,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub key: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub value: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct Progress {
    pub at: u64,
    pub revision: i64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Resume {
    pub at: u64,
    pub start_revision: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub compact_revision: i64,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

/// The checker's verdict (`verdict.json`).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Verdict {
    pub label: String,
    /// `ok`, `violation`, or `unknown` (the linearizability search timed out, nothing found).
    pub result: String,
    /// `ok`, `illegal`, `unknown`, or `skipped` (writes were lost where the test allows it).
    pub linearizability: String,
    pub operations: usize,
    pub checked: usize,
    pub acknowledged_writes: usize,
    pub unknown_resolved: usize,
    pub unknown_unresolved: usize,
    pub watches: usize,
    pub watch_events: usize,
    pub lost_writes: Vec<LostWrite>,
    pub violations: Vec<Violation>,
    pub notes: Vec<String>,
    #[serde(default)]
    pub visualization: Option<String>,
    pub check_ms: u64,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct LostWrite {
    pub key: String,
    #[serde(default)]
    pub value: String,
    #[serde(default)]
    pub delete: bool,
    pub revision: i64,
}

impl std::fmt::Display for LostWrite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.delete {
            write!(f, "delete {} at rev {}", self.key, self.revision)
        } else {
            write!(f, "{}={} at rev {}", self.key, self.value, self.revision)
        }
    }
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct Violation {
    pub kind: String,
    pub message: String,
}

impl Verdict {
    pub fn violation_lines(&self) -> Vec<String> {
        self.violations
            .iter()
            .map(|v| format!("{}: {}", v.kind, v.message))
            .collect()
    }
}

/// The directory of one workload's history, verdict and visualization:
/// `$E2E_HISTORY_DIR/<test binary>/<label>/`, by default under cargo's `target/tmp`.
pub fn history_dir(label: &str) -> PathBuf {
    let base = std::env::var_os("E2E_HISTORY_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| super::target_tmpdir().join("histories"));
    let binary = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .map(|stem| match stem.rsplit_once('-') {
            // cargo names test binaries `<name>-<hash>`.
            Some((name, hash)) if hash.chars().all(|c| c.is_ascii_hexdigit()) => name.to_string(),
            _ => stem,
        })
        .unwrap_or_else(|| "test".to_string());
    let label: String = label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    base.join(binary).join(label)
}

/// The digest `scripts/install-deps.sh` stamps into the checker: SHA-256 of `sha256sum`'s
/// listing of go.mod, go.sum and the non-test Go files of `tools/history-checker`, by name.
pub fn source_digest(dir: &Path) -> std::io::Result<String> {
    let mut go_files: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".go") && !n.ends_with("_test.go"))
        .collect();
    go_files.sort();
    let mut listing = String::new();
    for name in ["go.mod".to_string(), "go.sum".to_string()]
        .into_iter()
        .chain(go_files)
    {
        let bytes = std::fs::read(dir.join(&name))?;
        listing.push_str(&format!("{}  {name}\n", hex(&bytes)));
    }
    Ok(hex(listing.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The checker binary, once checked to be built from the sources in this tree; panics with
/// what to run when it is missing or stale.
pub fn checker() -> PathBuf {
    static CHECKED: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    CHECKED
        .get_or_init(|| {
            let path = std::env::var_os("HISTORY_CHECKER")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(CHECKER));
            let sources = super::repo_root().join("tools/history-checker");
            let want = source_digest(&sources)
                .map_err(|e| format!("reading {}: {e}", sources.display()))?;
            let output = std::process::Command::new(&path)
                .arg("-version")
                .output()
                .map_err(|e| {
                    format!(
                        "the history checker {} does not run ({e}): run scripts/install-deps.sh",
                        path.display()
                    )
                })?;
            let said = String::from_utf8_lossy(&output.stdout);
            if said.trim() != format!("history-checker {want}") {
                return Err(format!(
                    "the history checker {} was built from other sources than tools/history-checker (it says {:?}, the sources' digest is {want}): run scripts/install-deps.sh",
                    path.display(),
                    said.trim()
                ));
            }
            Ok(path)
        })
        .clone()
        .unwrap_or_else(|why| panic!("{why}"))
}

/// Writes `history` to `dir/history.json` and runs the checker on it; its verdict (also in
/// `dir/verdict.json`) with the visualization's path when one was written.
/// `HISTORY_VISUALIZE=always` writes the visualization for a passing history too.
pub async fn check(history: &History, dir: &Path) -> Verdict {
    let checker = checker();
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    let path = dir.join("history.json");
    let text = serde_json::to_vec(history).expect("a history serializes");
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    let _ = std::fs::remove_file(dir.join("visualization.html"));
    let visualize = std::env::var("HISTORY_VISUALIZE").unwrap_or_else(|_| "failure".into());
    let mut command = tokio::process::Command::new(&checker);
    command
        .arg(format!("-timeout={}s", CHECK_TIMEOUT.as_secs()))
        .arg(format!("-visualize={visualize}"))
        .arg(format!("-out={}", dir.display()))
        .arg(&path)
        .kill_on_drop(true);
    let output = match tokio::time::timeout(PROCESS_LIMIT, command.output()).await {
        Ok(result) => result.unwrap_or_else(|e| panic!("running {}: {e}", checker.display())),
        Err(_) => {
            // Killed on drop. An honest "unknown", never a hang.
            return Verdict {
                label: history.label.clone(),
                result: "unknown".into(),
                linearizability: "unknown".into(),
                notes: vec![format!(
                    "the checker did not finish within {PROCESS_LIMIT:?} on {}",
                    path.display()
                )],
                ..Default::default()
            };
        }
    };
    let code = output.status.code();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        matches!(code, Some(0..=2)),
        "the history checker refused {} (exit {code:?}): {stderr}{stdout}",
        path.display()
    );
    let verdict_path = dir.join("verdict.json");
    let verdict = std::fs::read(&verdict_path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", verdict_path.display()));
    serde_json::from_slice(&verdict)
        .unwrap_or_else(|e| panic!("{} does not parse: {e}", verdict_path.display()))
}
