//! What one call answered, reduced to what is compared, and the comparison itself.

use std::collections::BTreeMap;
use std::fmt;

/// A call's answer: the facts the operator reads, or etcd's refusal (gRPC code and message).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Accepted; each fact by name (values as text, IDs replaced by relations such as
    /// "is the member itself", so two clusters with different IDs compare).
    Ok(BTreeMap<&'static str, String>),
    /// Refused with this gRPC code and message.
    Refused { code: String, message: String },
}

impl Outcome {
    /// A refusal from an etcd client error.
    pub fn refused(e: etcd_client::Error) -> Outcome {
        match e {
            etcd_client::Error::GRpcStatus(s) => Outcome::Refused {
                code: format!("{:?}", s.code()),
                message: s.message().to_string(),
            },
            other => Outcome::Refused {
                code: "client".to_string(),
                message: other.to_string(),
            },
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Ok(facts) => {
                let text: Vec<String> = facts.iter().map(|(k, v)| format!("{k}={v}")).collect();
                write!(f, "ok {}", text.join(" "))
            }
            Outcome::Refused { code, message } => write!(f, "{code} \"{message}\""),
        }
    }
}

/// One call of the sequence, as one target answered it.
#[derive(Clone, Debug)]
pub struct Answer {
    /// The call, e.g. `MemberAdd learner`.
    pub call: &'static str,
    /// What is compared.
    pub outcome: Outcome,
    /// Raw values shown beside it (IDs, indexes), not compared.
    pub info: String,
}

/// One line of the comparison.
#[derive(Clone, Debug)]
pub struct Row {
    /// The call.
    pub call: &'static str,
    /// The real etcd's answer.
    pub real: Answer,
    /// The simulator's answer.
    pub sim: Answer,
}

impl Row {
    /// Whether both answered the same.
    pub fn matches(&self) -> bool {
        self.real.outcome == self.sim.outcome
    }
}

/// Pairs the two sequences call by call; a call one side lacks, or a different call at the
/// same place, is a mismatch of its own.
pub fn pair(real: Vec<Answer>, sim: Vec<Answer>) -> (Vec<Row>, Vec<String>) {
    let mut problems = Vec::new();
    if real.len() != sim.len() {
        problems.push(format!(
            "the real etcd answered {} calls, the simulator {}",
            real.len(),
            sim.len()
        ));
    }
    let mut rows = Vec::new();
    for (r, s) in real.into_iter().zip(sim) {
        if r.call != s.call {
            problems.push(format!("call {:?} paired with {:?}", r.call, s.call));
            continue;
        }
        rows.push(Row {
            call: r.call,
            real: r,
            sim: s,
        });
    }
    (rows, problems)
}

/// Every row whose answers differ, described; empty when all match.
pub fn mismatches(rows: &[Row]) -> Vec<String> {
    rows.iter()
        .filter(|r| !r.matches())
        .map(|r| {
            format!(
                "{}: real etcd {} / simulator {}",
                r.call, r.real.outcome, r.sim.outcome
            )
        })
        .collect()
}

/// The table, in Markdown: call, real answer, simulator answer, match.
pub fn render(rows: &[Row]) -> String {
    let mut out =
        String::from("| call | real etcd 3.6.17 | simulator | same |\n|---|---|---|---|\n");
    for r in rows {
        let mark = if r.matches() { "yes" } else { "**NO**" };
        out.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            r.call, r.real.outcome, r.sim.outcome, mark
        ));
    }
    out
}

/// The raw values of each side, for the log.
pub fn render_info(rows: &[Row]) -> String {
    let mut out = String::new();
    for r in rows {
        out.push_str(&format!(
            "{:<34} real: {:<40} sim: {}\n",
            r.call, r.real.info, r.sim.info
        ));
    }
    out
}
