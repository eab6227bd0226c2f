//! The simulator against a real etcd 3.6.17: the same sequence of calls, through the same
//! client (`etcd-client`), to a real single-member cluster and to a simulated one; each
//! answer reduced to what the operator reads (outcome class, gRPC code and etcd's message,
//! member counts, learner flags, leader, raft index growth, header consistency) and compared.
//! The table of both answers is printed; any difference fails the test.
//!
//! `cargo test -p etcd-sim --test compare_with_etcd -- --nocapture` shows the table.

#[path = "common/mod.rs"]
mod common;
#[path = "compare/learner.rs"]
mod learner;
#[path = "compare/real.rs"]
mod real;
#[path = "compare/steps.rs"]
mod steps;
#[path = "compare/table.rs"]
mod table;

use std::collections::BTreeMap;

pub use common::http_get;
use etcd_sim::server::{Sim, SimConfig, start_cluster};
use table::{Answer, Outcome, mismatches, pair, render, render_info};

fn spare_peer_urls() -> [String; 3] {
    let ports = real::free_ports(3);
    [0, 1, 2].map(|i| format!("http://127.0.0.1:{}", ports[i]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulator_answers_the_operators_calls_like_etcd_3_6_17() {
    let etcd = real::RealEtcd::start().await;
    let mut real_target = steps::Target {
        client_url: etcd.client_url.clone(),
        metrics_url: etcd.metrics_url.clone(),
        spare_peer_urls: spare_peer_urls(),
        starter: learner::Starter::Real(Vec::new()),
    };
    let real_answers = steps::run(&mut real_target).await;
    drop(real_target);
    drop(etcd);

    let sim = Sim::new(SimConfig::default());
    let members = start_cluster(&sim, "compare", 1)
        .await
        .expect("simulated cluster");
    let mut sim_target = steps::Target {
        client_url: members[0].client_url(),
        metrics_url: members[0].metrics_url(),
        spare_peer_urls: spare_peer_urls(),
        starter: learner::Starter::Sim {
            sim: sim.clone(),
            key: members[0].cluster(),
            servers: Vec::new(),
        },
    };
    let sim_answers = steps::run(&mut sim_target).await;

    let (rows, mut problems) = pair(real_answers, sim_answers);
    println!("{}", render(&rows));
    println!("{}", render_info(&rows));
    problems.extend(mismatches(&rows));
    assert!(rows.len() >= 30, "the sequence ran {} calls", rows.len());
    assert!(
        problems.is_empty(),
        "the simulator differs from etcd:\n{}",
        problems.join("\n")
    );
}

fn answer(call: &'static str, outcome: Outcome) -> Answer {
    Answer {
        call,
        outcome,
        info: String::new(),
    }
}

fn refused(code: &str, message: &str) -> Outcome {
    Outcome::Refused {
        code: code.to_string(),
        message: message.to_string(),
    }
}

#[test]
fn the_comparison_catches_a_wrong_code_a_wrong_message_and_a_wrong_fact() {
    let learners = "etcdserver: too many learner members in cluster";
    let real = vec![
        answer(
            "MemberAdd 2nd learner",
            refused("FailedPrecondition", learners),
        ),
        answer(
            "MemberRemove unknown ID",
            refused("NotFound", "etcdserver: member not found"),
        ),
        answer(
            "Status",
            Outcome::Ok(BTreeMap::from([("isLearner", "false".to_string())])),
        ),
        answer("Defragment", Outcome::Ok(BTreeMap::new())),
    ];
    let wrong = vec![
        // The right message under the wrong code.
        answer("MemberAdd 2nd learner", refused("Unavailable", learners)),
        // The right code with a different message.
        answer(
            "MemberRemove unknown ID",
            refused("NotFound", "etcdserver: no such member"),
        ),
        // A fact the operator reads, wrong.
        answer(
            "Status",
            Outcome::Ok(BTreeMap::from([("isLearner", "true".to_string())])),
        ),
        // Accepted where etcd accepts: the one row that matches.
        answer("Defragment", Outcome::Ok(BTreeMap::new())),
    ];
    let (rows, problems) = pair(real.clone(), wrong);
    assert!(problems.is_empty());
    let found = mismatches(&rows);
    assert_eq!(found.len(), 3, "{found:#?}");
    assert!(found[0].starts_with("MemberAdd 2nd learner"));
    assert!(render(&rows).contains("**NO**"));

    let (rows, _) = pair(real.clone(), real.clone());
    assert!(
        mismatches(&rows).is_empty(),
        "identical answers compare equal"
    );

    // A simulator that skips a call, or answers another call in its place, is caught too.
    let (_, problems) = pair(real.clone(), real[..3].to_vec());
    assert_eq!(problems.len(), 1);
    let mut swapped = real.clone();
    swapped.swap(0, 1);
    let (_, problems) = pair(real, swapped);
    assert_eq!(problems.len(), 2);
}
