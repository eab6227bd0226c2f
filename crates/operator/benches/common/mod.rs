#![allow(dead_code)]
//! What the benchmarks share (included with `#[path]`): numbers from the environment, the
//! sandbox's processes (Pods are host processes, descendants of the bench) and their memory.

use std::time::Duration;

pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(text) => text
            .parse()
            .unwrap_or_else(|_| panic!("{name}={text:?} is not a valid number")),
        Err(_) => default,
    }
}

/// Whether `pid` descends from this process (the sandbox's Pods are its host processes).
pub fn descends_from_this_process(pid: u32) -> bool {
    let me = std::process::id();
    let mut current = pid;
    while current > 1 {
        if current == me {
            return true;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{current}/stat")) else {
            return false;
        };
        let Some(parent) = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse().ok())
        else {
            return false;
        };
        current = parent;
    }
    false
}

/// The operator's process (the sandbox runs Pods as host processes).
pub fn operator_pid() -> u32 {
    let found = descendant_pids(|args| {
        args.first().is_some_and(|a| a.ends_with(b"/etcd-operator"))
            && args.get(1) == Some(&&b"run"[..])
    });
    assert_eq!(found.len(), 1, "exactly one operator process: {found:?}");
    found[0]
}

/// The processes this benchmark started (directly or not) whose arguments (`/proc/<pid>/cmdline`
/// split at its NULs) satisfy `matches`.
pub fn descendant_pids(matches: impl Fn(&[&[u8]]) -> bool) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            matches(&args) && descends_from_this_process(*pid)
        })
        .collect()
}

/// A `/proc/<pid>/status` figure in MiB (`VmRSS`, `VmHWM`).
pub fn memory_mib(pid: u32, field: &str) -> f64 {
    try_memory_mib(pid, field).unwrap_or_else(|| panic!("no {field} for process {pid}"))
}

/// [`memory_mib`], or None when the process is gone.
pub fn try_memory_mib(pid: u32, field: &str) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| {
            v.trim_start_matches(':')
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .ok()
        })?;
    Some(kib / 1024.0)
}

/// Watches this process's descendants whose command line holds `marker` (a short-lived agent
/// Pod's process) until stopped; returns the highest peak resident memory (VmHWM) seen, MiB.
pub struct PeakWatch {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<f64>,
}

impl PeakWatch {
    pub fn start(marker: &'static str) -> PeakWatch {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut peak = 0.0f64;
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                for entry in std::fs::read_dir("/proc").unwrap().flatten() {
                    let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                        continue;
                    };
                    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                    if cmdline.split(|b| *b == 0).any(|a| a == marker.as_bytes())
                        && descends_from_this_process(pid)
                        && let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status"))
                        && let Some(kib) = status
                            .lines()
                            .find_map(|l| l.strip_prefix("VmHWM:"))
                            .and_then(|v| {
                                v.trim().trim_end_matches("kB").trim().parse::<f64>().ok()
                            })
                    {
                        peak = peak.max(kib / 1024.0);
                    }
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            peak
        });
        PeakWatch { stop, thread }
    }

    pub fn finish(self) -> f64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

/// User plus system CPU time of a process, in seconds.
pub fn cpu_seconds(pid: u32) -> f64 {
    try_cpu_seconds(pid).unwrap_or_else(|| panic!("no CPU time for process {pid}"))
}

/// [`cpu_seconds`], or None when the process is gone.
pub fn try_cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(|a, b| a.total_cmp(b));
    sorted[sorted.len() / 2]
}
