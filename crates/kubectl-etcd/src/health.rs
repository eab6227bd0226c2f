//! The cluster's health as seed 004 classifies it: every voter healthy, a minority of voters
//! lost (quorum holds: etcd serves, one more loss may stop it), or quorum lost (etcd refuses
//! writes and linearizable reads until a majority is back or the quorum is recovered).

use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Health {
    Healthy,
    MinorityLost,
    QuorumLost,
}

impl Health {
    /// The exit code a script tests: 0 healthy, 3 minority lost, 4 quorum lost.
    pub fn exit_code(self) -> i32 {
        match self {
            Health::Healthy => 0,
            Health::MinorityLost => 3,
            Health::QuorumLost => 4,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Health::Healthy => "Healthy",
            Health::MinorityLost => "MinorityLost",
            Health::QuorumLost => "QuorumLost",
        }
    }
}

/// One voter as observed: its name and, when it is not healthy, why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct VoterEvidence {
    pub name: String,
    pub healthy: bool,
    pub detail: String,
}

/// The classification from the voters (learners never count towards quorum).
pub fn classify(voters: &[VoterEvidence]) -> Health {
    let total = voters.len();
    let healthy = voters.iter().filter(|v| v.healthy).count();
    if total == 0 || healthy < total / 2 + 1 {
        Health::QuorumLost
    } else if healthy < total {
        Health::MinorityLost
    } else {
        Health::Healthy
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn voters(healthy: usize, lost: usize) -> Vec<VoterEvidence> {
        (0..healthy + lost)
            .map(|i| VoterEvidence {
                name: format!("m-{i}"),
                healthy: i < healthy,
                detail: String::new(),
            })
            .collect()
    }

    #[test]
    fn every_size_classifies_by_majority() {
        for total in 1..=7 {
            for healthy in 0..=total {
                let expected = if healthy == total {
                    Health::Healthy
                } else if healthy > total / 2 {
                    Health::MinorityLost
                } else {
                    Health::QuorumLost
                };
                assert_eq!(
                    classify(&voters(healthy, total - healthy)),
                    expected,
                    "{healthy} of {total}"
                );
            }
        }
        assert_eq!(classify(&[]), Health::QuorumLost, "no voter observed");
        assert_eq!(Health::MinorityLost.exit_code(), 3);
    }
}
