//! Packet filters inside one Pod's network namespace (`iptables`, nf_tables backend): cuts
//! between the Pod and chosen peer addresses, and the impairment that stands in for `tc netem`
//! on kernels without it (loss by a random match, delay by queueing packets to userspace, see
//! [`super::delay`]).
//!
//! The Pod's rules live in two chains of its own, rewritten whole at every change with one
//! `iptables-restore --noflush` (which flushes a chain it declares), so the rules always say
//! exactly what [`Filters`] holds:
//!
//! ```text
//! INPUT  → SANDBOX-CUT     (-s PEER -j DROP for every peer cut off)
//! OUTPUT → SANDBOX-CUT     (-d PEER -j DROP)
//! OUTPUT -o eth0 → SANDBOX-IMPAIR (random DROP, then NFQUEUE to the delay queue)
//! ```
//!
//! Dropped, not refused: a peer's packets vanish, so connections hang and time out as across
//! a real partition (a blackhole route would make `connect` fail at once).

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::process::Stdio;

use super::NetworkError;
use super::netns::{NetNamespace, namespaced_command};

/// The chain of the cuts.
pub const CUT_CHAIN: &str = "SANDBOX-CUT";
/// The chain of the impairment.
pub const IMPAIR_CHAIN: &str = "SANDBOX-IMPAIR";
/// The queue the delay reads (queues are per network namespace, so every Pod uses 0).
pub const DELAY_QUEUE: u16 = 0;

/// What the Pod's chains should hold.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Filters {
    /// Peers every packet to or from which is dropped.
    pub cut: BTreeSet<Ipv4Addr>,
    /// Probability (0.0..=1.0) that a packet leaving the Pod is dropped.
    pub loss: f64,
    /// Packets leaving the Pod go through the delay queue.
    pub delay: bool,
    /// The jumps into the chains are in place (added by the first write).
    pub hooked: bool,
}

impl Filters {
    /// Nothing to filter: the chains can go.
    pub fn is_empty(&self) -> bool {
        self.cut.is_empty() && self.loss <= 0.0 && !self.delay
    }

    /// The `iptables-restore --noflush` input that makes the chains say what `self` holds.
    pub fn restore_script(&self) -> String {
        let mut script = String::from("*filter\n");
        let _ = writeln!(script, ":{CUT_CHAIN} - [0:0]");
        let _ = writeln!(script, ":{IMPAIR_CHAIN} - [0:0]");
        if !self.hooked {
            let _ = writeln!(script, "-A INPUT -j {CUT_CHAIN}");
            let _ = writeln!(script, "-A OUTPUT -j {CUT_CHAIN}");
            let _ = writeln!(script, "-A OUTPUT -o eth0 -j {IMPAIR_CHAIN}");
        }
        for peer in &self.cut {
            let _ = writeln!(script, "-A {CUT_CHAIN} -s {peer}/32 -j DROP");
            let _ = writeln!(script, "-A {CUT_CHAIN} -d {peer}/32 -j DROP");
        }
        if self.loss > 0.0 {
            let _ = writeln!(
                script,
                "-A {IMPAIR_CHAIN} -m statistic --mode random --probability {:.6} -j DROP",
                self.loss.min(1.0)
            );
        }
        if self.delay {
            // Bypass: with nobody reading the queue (the delay stopped) packets pass.
            let _ = writeln!(
                script,
                "-A {IMPAIR_CHAIN} -j NFQUEUE --queue-num {DELAY_QUEUE} --queue-bypass"
            );
        }
        script.push_str("COMMIT\n");
        script
    }
}

/// Writes `filters` into `namespace` (one `iptables-restore`).
pub(crate) async fn apply(namespace: &NetNamespace, filters: &Filters) -> Result<(), NetworkError> {
    let script = filters.restore_script();
    let mut command = namespaced_command(namespace, "iptables-restore");
    command
        .args(["-w", "--noflush"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = tokio::process::Command::from(command)
        .kill_on_drop(true)
        .spawn()
        .map_err(|error| {
            if error.kind() == std::io::ErrorKind::NotFound {
                NetworkError::Unsupported(
                    "iptables-restore is not installed (the iptables package; scripts/install-deps.sh installs it)"
                        .into(),
                )
            } else {
                NetworkError::IpCommand(error)
            }
        })?;
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let written = {
        use tokio::io::AsyncWriteExt;
        stdin.write_all(script.as_bytes()).await
    };
    drop(stdin);
    let output = child
        .wait_with_output()
        .await
        .map_err(NetworkError::IpCommand)?;
    written.map_err(NetworkError::IpCommand)?;
    if output.status.success() {
        return Ok(());
    }
    Err(NetworkError::IpFailed {
        commands: format!("iptables-restore --noflush <<EOF\n{script}EOF"),
        stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_write_hooks_the_chains_and_later_ones_only_rewrite_them() {
        let mut filters = Filters::default();
        filters.cut.insert(Ipv4Addr::new(10, 244, 0, 7));
        let first = filters.restore_script();
        assert!(first.contains("-A INPUT -j SANDBOX-CUT\n"), "{first}");
        assert!(
            first.contains("-A OUTPUT -o eth0 -j SANDBOX-IMPAIR\n"),
            "{first}"
        );
        assert!(
            first.contains("-A SANDBOX-CUT -s 10.244.0.7/32 -j DROP\n"),
            "{first}"
        );
        assert!(
            first.contains("-A SANDBOX-CUT -d 10.244.0.7/32 -j DROP\n"),
            "{first}"
        );
        assert!(
            !first.contains("NFQUEUE") && !first.contains("statistic"),
            "{first}"
        );
        filters.hooked = true;
        filters.cut.clear();
        filters.loss = 0.25;
        filters.delay = true;
        let later = filters.restore_script();
        assert!(!later.contains("-A INPUT"), "{later}");
        assert!(
            !later.contains("-A SANDBOX-CUT"),
            "the cut is gone: {later}"
        );
        assert!(
            later.contains("--probability 0.250000 -j DROP\n"),
            "{later}"
        );
        assert!(
            later.contains("-j NFQUEUE --queue-num 0 --queue-bypass\n"),
            "{later}"
        );
        assert!(
            later.starts_with("*filter\n:SANDBOX-CUT - [0:0]\n") && later.ends_with("COMMIT\n")
        );
    }

    #[test]
    fn empty_means_nothing_filtered() {
        let mut filters = Filters::default();
        assert!(filters.is_empty());
        filters.loss = 0.01;
        assert!(!filters.is_empty());
        filters.loss = 0.0;
        filters.delay = true;
        assert!(!filters.is_empty());
    }
}
