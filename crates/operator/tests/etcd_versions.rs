//! The operator's command line per etcd version, against the real binaries
//! `scripts/install-deps.sh` installs (3.4.23, 3.5.1, 3.5.36, 3.6.17, 3.7.4):
//!
//! - the flag table (`build/flags.rs`) says of every flag exactly what each binary's
//!   `etcd --help` says (listed or not);
//! - a member with every option the API sets (quota, auto-compaction mode and retention,
//!   snapshot count, TLS on both ports with client certificates) gets a command line whose
//!   every flag its version's `etcd --help` lists;
//! - a member of each version started with that command line (every option; plaintext, on
//!   loopback addresses and a temporary data directory in place of the Pod's) becomes healthy;
//! - the restore flags are listed by each version's restore tool (`etcdutl` from 3.5,
//!   `etcdctl` on 3.4).

use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use etcd_operator::build::etcd_command;
use etcd_operator::build::flags::{ETCD_FLAGS, RESTORE_FLAGS, accepts, flag_name};
use etcd_operator::domain::versions::EtcdVersion;
use etcd_operator_api::EtcdMember;
use serde_json::json;

/// (version, directory of etcd, etcdctl and etcdutl).
const BINARIES: &[(&str, &str)] = &[
    ("3.4.23", "/usr/bin"),
    ("3.5.1", "/usr/local/lib/etcd-3.5.1"),
    ("3.5.36", "/usr/local/lib/etcd-3.5.36"),
    ("3.6.17", "/usr/local/lib/etcd-3.6.17"),
    ("3.7.4", "/usr/local/lib/etcd-3.7.4"),
];

/// The `--flag` names a binary's help lists (it prints to stdout or stderr by version).
fn help_flags(program: &str, args: &[&str]) -> BTreeSet<String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} {args:?}: {e} (run scripts/install-deps.sh)"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let flags: BTreeSet<String> = text
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("--"))
        .map(|w| {
            w.trim_end_matches([',', '\'', '"', ':'])
                .split('=')
                .next()
                .unwrap_or_default()
                .to_string()
        })
        .filter(|w| !w.is_empty())
        .collect();
    assert!(flags.len() > 3, "{program} {args:?} lists flags: {text}");
    flags
}

/// A member of cluster `etcd` on `version` with every option the API sets and TLS on both
/// ports.
fn member(version: &str) -> EtcdMember {
    serde_json::from_value(json!({
        "apiVersion": "etcd-operator.cozystack.io/v1alpha2",
        "kind": "EtcdMember",
        "metadata": {"name": "etcd-0", "namespace": "prod", "uid": "uid-etcd-0"},
        "spec": {
            "clusterName": "etcd",
            "version": version,
            "clusterToken": "prod-etcd-uid",
            "initialCluster": "",
            "storage": {},
            "options": {
                "quotaBackendBytes": 4294967296i64,
                "autoCompactionMode": "periodic",
                "autoCompactionRetention": "5m",
                "snapshotCount": 50000,
            },
            "tls": {
                "clientServerSecretRef": {"name": "etcd-client"},
                "clientMTLS": true,
                "peerSecretRef": {"name": "etcd-peer"},
            },
        },
    }))
    .expect("an EtcdMember")
}

#[test]
fn the_flag_table_is_what_each_binary_says() {
    for (version, dir) in BINARIES {
        let parsed = EtcdVersion::parse(version).unwrap();
        let help = help_flags(&format!("{dir}/etcd"), &["--help"]);
        for flag in ETCD_FLAGS {
            assert_eq!(
                accepts(parsed, flag.name),
                help.contains(flag.name),
                "etcd {version}: the table and `etcd --help` disagree on --{}",
                flag.name
            );
        }
        let (tool, args): (&str, &[&str]) = if parsed.minor() >= (3, 5) {
            ("etcdutl", &["snapshot", "restore", "--help"])
        } else {
            ("etcdctl", &["snapshot", "restore", "--help"])
        };
        let restore = help_flags(&format!("{dir}/{tool}"), args);
        for flag in RESTORE_FLAGS {
            assert!(
                restore.contains(*flag),
                "{tool} {version} snapshot restore lists --{flag}"
            );
        }
    }
}

#[test]
fn a_member_with_every_option_starts_on_each_version() {
    for (version, dir) in BINARIES {
        let help = help_flags(&format!("{dir}/etcd"), &["--help"]);
        let m = member(version);
        let tls = vec![
            "--cert-file=/etc/etcd/tls/client/tls.crt".to_string(),
            "--key-file=/etc/etcd/tls/client/tls.key".to_string(),
            "--client-cert-auth=true".to_string(),
            "--trusted-ca-file=/etc/etcd/tls/client/ca.crt".to_string(),
            "--peer-cert-file=/etc/etcd/tls/peer/tls.crt".to_string(),
            "--peer-key-file=/etc/etcd/tls/peer/tls.key".to_string(),
            "--peer-client-cert-auth=true".to_string(),
            "--peer-trusted-ca-file=/etc/etcd/tls/peer/ca.crt".to_string(),
        ];
        let command = etcd_command(&m, tls).expect("a command line");
        for argument in &command[1..] {
            let name = flag_name(argument).unwrap_or_else(|| panic!("{argument} is a flag"));
            assert!(
                help.contains(name),
                "etcd {version} does not list --{name} (command {command:?})"
            );
        }
        for option in [
            "--quota-backend-bytes=4294967296",
            "--auto-compaction-mode=periodic",
            "--auto-compaction-retention=5m",
            "--snapshot-count=50000",
        ] {
            assert!(
                command.iter().any(|a| a == option),
                "{option} in {command:?}"
            );
        }

        // Started as built, but plaintext and on loopback: the Pod's addresses and TLS files
        // do not exist here. Every option flag is passed as the operator wrote it.
        let plain = etcd_command(&member_plain(version), Vec::new()).unwrap();
        let data = tempfile::tempdir().unwrap();
        // A loopback address of its own whose 2379, 2380 and 2381 are free.
        let ip = etcd_operator_e2e_support::loopback::free_address();
        let (client, peer, metrics) = (
            format!("{ip}:2379"),
            format!("{ip}:2380"),
            format!("{ip}:2381"),
        );
        let local = |a: &String| -> String {
            match flag_name(a) {
                Some("data-dir") => format!("--data-dir={}", data.path().display()),
                Some("listen-peer-urls") | Some("initial-advertise-peer-urls") => {
                    format!("--{}=http://{peer}", flag_name(a).unwrap())
                }
                Some("listen-client-urls") | Some("advertise-client-urls") => {
                    format!("--{}=http://{client}", flag_name(a).unwrap())
                }
                Some("listen-metrics-urls") => {
                    format!("--listen-metrics-urls=http://{metrics}")
                }
                _ => a.clone(),
            }
        };
        let mut args: Vec<String> = plain[1..].iter().map(local).collect();
        args.push(format!("--initial-cluster=etcd-0=http://{peer}"));
        args.push("--initial-cluster-state=new".to_string());
        let log = tempfile::NamedTempFile::new().unwrap();
        let mut child = Command::new(format!("{dir}/etcd"))
            .args(&args)
            .stdout(Stdio::null())
            .stderr(log.reopen().unwrap())
            .spawn()
            .unwrap();
        let started = Instant::now();
        let healthy = loop {
            let out = Command::new(format!("{dir}/etcdctl"))
                .env("ETCDCTL_API", "3")
                .args([
                    &format!("--endpoints=http://{client}"),
                    "endpoint",
                    "health",
                ])
                .output()
                .unwrap();
            if out.status.success() {
                break true;
            }
            if started.elapsed() > Duration::from_secs(30) || child.try_wait().unwrap().is_some() {
                break false;
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            healthy,
            "etcd {version} with {args:?} did not become healthy:\n{}",
            std::fs::read_to_string(log.path()).unwrap_or_default()
        );
        println!(
            "etcd {version}: healthy in {:.1} s with {}",
            started.elapsed().as_secs_f64(),
            args.join(" ")
        );
    }
}

/// [`member`] without TLS.
fn member_plain(version: &str) -> EtcdMember {
    let mut m = member(version);
    m.spec.tls = None;
    m
}
