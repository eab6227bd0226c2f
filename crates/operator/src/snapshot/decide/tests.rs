use super::*;
use crate::snapshot::codec::{Decoded, Layers};
use etcd_operator_api::shared::{PvcSnapshotLocation, S3SnapshotLocation};
use etcd_operator_api::snapshot::{EtcdSnapshotStatus, SnapshotCompression, SnapshotVerify};

fn s3() -> S3SnapshotLocation {
    S3SnapshotLocation {
        endpoint: "http://s3:9000".into(),
        bucket: "backups".into(),
        key: Some("etcd".into()),
        ..Default::default()
    }
}

fn to_s3() -> SnapshotLocation {
    SnapshotLocation {
        s3: Some(s3()),
        ..Default::default()
    }
}

fn voter(member: &str, healthy: bool, leader: bool) -> Voter {
    Voter {
        member: member.into(),
        endpoint: format!("http://{member}:2379"),
        client_url: format!("http://{member}.etcd:2379"),
        healthy,
        leader,
    }
}

fn healthy() -> ClusterFacts {
    ClusterFacts {
        name: "etcd".into(),
        replicas: 3,
        voters: vec![
            voter("etcd-0", true, true),
            voter("etcd-1", true, false),
            voter("etcd-2", true, false),
        ],
        ..Default::default()
    }
}

fn failure(next: Next) -> &'static str {
    match next {
        Next::Fail(f) => f.reason(),
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[test]
fn a_finished_snapshot_is_left_alone() {
    for phase in [SnapshotPhase::Complete, SnapshotPhase::Failed] {
        assert_eq!(next(Some(phase), &to_s3(), "etcd", None), Next::Nothing);
    }
}

#[test]
fn new_and_interrupted_snapshots_are_taken_from_a_follower() {
    for phase in [
        None,
        Some(SnapshotPhase::Pending),
        Some(SnapshotPhase::Started),
    ] {
        match next(phase, &to_s3(), "etcd", Some(&healthy())) {
            Next::Take { voter, to } => {
                assert_eq!(voter.member, "etcd-1");
                assert_eq!(*to, to_s3());
            }
            other => panic!("{other:?}"),
        }
    }
}

fn to_pvc() -> SnapshotLocation {
    SnapshotLocation {
        pvc: Some(PvcSnapshotLocation {
            claim_name: "backups".into(),
            sub_path: Some("etcd".into()),
        }),
        ..Default::default()
    }
}

#[test]
fn the_pvc_destination_is_taken_from_a_follower_like_s3() {
    for phase in [None, Some(SnapshotPhase::Started)] {
        match next(phase, &to_pvc(), "etcd", Some(&healthy())) {
            Next::TakeToPvc { voter, pvc } => {
                assert_eq!(voter.member, "etcd-1");
                assert_eq!(pvc.claim_name, "backups");
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(
        next(Some(SnapshotPhase::Complete), &to_pvc(), "etcd", None),
        Next::Nothing
    );
    // The cluster's reasons come first, as for S3.
    assert_eq!(
        failure(next(None, &to_pvc(), "gone", None)),
        "ClusterNotFound"
    );
    let mut unhealthy = healthy();
    unhealthy.voters.iter_mut().for_each(|v| v.healthy = false);
    assert_eq!(
        failure(next(None, &to_pvc(), "etcd", Some(&unhealthy))),
        "ClusterUnavailable"
    );
    let nowhere = SnapshotLocation::default();
    assert_eq!(
        failure(next(None, &nowhere, "etcd", Some(&healthy()))),
        "InvalidDestination"
    );
}

#[test]
fn the_cluster_decides_in_order() {
    assert_eq!(
        failure(next(None, &to_s3(), "gone", None)),
        "ClusterNotFound"
    );
    let mut c = healthy();
    c.deleting = true;
    c.paused = true;
    assert_eq!(
        failure(next(None, &to_s3(), "etcd", Some(&c))),
        "ClusterDeleting"
    );
    c.deleting = false;
    assert_eq!(
        failure(next(None, &to_s3(), "etcd", Some(&c))),
        "ClusterPaused"
    );
    c.paused = false;
    c.replicas = 0;
    assert_eq!(
        failure(next(None, &to_s3(), "etcd", Some(&c))),
        "ClusterParked"
    );
    c.replicas = 3;
    c.security_problems = vec!["Secret etcd-server is missing".into()];
    assert_eq!(
        failure(next(None, &to_s3(), "etcd", Some(&c))),
        "ClusterSecretsInvalid"
    );
    c.security_problems.clear();
    c.unhealthy = Some("no voter served a linearizable read".into());
    assert_eq!(
        failure(next(None, &to_s3(), "etcd", Some(&c))),
        "ClusterUnavailable"
    );
    c.unhealthy = None;
    c.voters.iter_mut().for_each(|v| v.healthy = false);
    assert_eq!(
        failure(next(None, &to_s3(), "etcd", Some(&c))),
        "ClusterUnavailable"
    );
    c.voters.clear();
    assert_eq!(
        failure(next(None, &to_s3(), "etcd", Some(&c))),
        "ClusterUnavailable"
    );
}

#[test]
fn the_messages_say_what_the_issue_promises() {
    let cases = [
        (
            Failure::Unauthorized {
                store: String::new(),
            },
            "the S3 credentials were refused",
        ),
        (
            Failure::Unauthorized {
                store: "GCS".into(),
            },
            "the GCS credentials were refused",
        ),
        (
            Failure::Unauthorized {
                store: "Azure".into(),
            },
            "AZURE_STORAGE_ACCOUNT_KEY/AZURE_STORAGE_SAS_TOKEN",
        ),
        (
            Failure::BucketNotFound {
                bucket: "b".into(),
                store: "S3".into(),
            },
            "bucket not found",
        ),
        (
            Failure::BucketNotFound {
                bucket: "c".into(),
                store: "Azure".into(),
            },
            "container not found: the store has no container c; create it or fix destination.azure.container",
        ),
        (
            Failure::EndpointUnreachable {
                endpoint: "http://gcs:4443".into(),
                detail: "refused".into(),
                store: "GCS".into(),
            },
            "the GCS endpoint http://gcs:4443 is unreachable (refused); check destination.gcs.endpoint",
        ),
        (
            Failure::ClusterUnavailable {
                cluster: "etcd".into(),
                detail: "x".into(),
            },
            "cluster not available",
        ),
        (
            Failure::ClusterPaused {
                cluster: "etcd".into(),
            },
            "cluster is paused",
        ),
        (
            Failure::ClusterParked {
                cluster: "etcd".into(),
            },
            "cluster has 0 replicas",
        ),
        (
            Failure::Encoding {
                detail: "zstd: out of memory".into(),
            },
            "compressing or encrypting the snapshot failed: zstd: out of memory; nothing was stored",
        ),
    ];
    assert_eq!(
        Failure::Encoding {
            detail: String::new()
        }
        .reason(),
        "EncodingFailed",
        "not the store's fault: not StoreError"
    );
    for (failure, words) in cases {
        assert!(
            failure.message().contains(words),
            "{failure:?}: {}",
            failure.message()
        );
    }
}

#[test]
fn facts_come_from_the_observation() {
    use crate::plan::tests::fixtures::{Answer, Fx};
    let mut fx = Fx::healthy(3);
    let facts = cluster_facts(&fx.obs, |u| format!("{u}#dialled"));
    assert_eq!(
        (facts.replicas, facts.paused, facts.deleting),
        (3, false, false)
    );
    assert_eq!(facts.unhealthy, None);
    let mut members: Vec<_> = facts
        .voters
        .iter()
        .map(|v| (v.member.as_str(), v.healthy, v.leader))
        .collect();
    members.sort();
    assert_eq!(
        members,
        [
            ("etcd-0", true, true),
            ("etcd-1", true, false),
            ("etcd-2", true, false)
        ]
    );
    assert!(
        facts
            .voters
            .iter()
            .all(|v| v.endpoint.ends_with("#dialled"))
    );
    match next(None, &to_s3(), "etcd", Some(&facts)) {
        Next::Take { voter, .. } => assert_eq!(voter.member, "etcd-1"),
        other => panic!("{other:?}"),
    }

    // A member down, one a learner: neither is a voter to stream from.
    fx.answer("etcd-1", Answer::Down);
    fx.answer("etcd-2", Answer::Learner);
    let facts = cluster_facts(&fx.obs, str::to_string);
    let names: Vec<_> = facts.voters.iter().map(|v| v.member.as_str()).collect();
    assert_eq!(names, ["etcd-0"]);

    // Without quorum nobody serves a linearizable read: the cluster is unavailable.
    for m in ["etcd-0", "etcd-1", "etcd-2"] {
        fx.answer(m, Answer::NoQuorum);
    }
    fx.obs.etcd.health = Err(crate::etcd::EtcdError::new(
        "Health",
        &[],
        crate::etcd::EtcdErrorKind::NoLeader,
        "no voter served a linearizable read",
    ));
    let facts = cluster_facts(&fx.obs, str::to_string);
    assert!(facts.voters.iter().all(|v| !v.healthy));
    assert_eq!(
        failure(next(None, &to_s3(), "etcd", Some(&facts))),
        "ClusterUnavailable"
    );

    fx.obs.security.problems = vec!["Secret etcd-server is missing".into()];
    fx.obs.cluster.spec.paused = Some(true);
    let facts = cluster_facts(&fx.obs, str::to_string);
    assert!(facts.paused);
    assert_eq!(facts.security_problems.len(), 1);
}

#[test]
fn a_voter_is_healthy_and_preferably_not_the_leader() {
    assert_eq!(pick_voter(&[]), None);
    assert_eq!(pick_voter(&[voter("a", false, false)]), None);
    assert_eq!(
        pick_voter(&[voter("a", true, true)]).map(|v| v.member.as_str()),
        Some("a")
    );
    let voters = [
        voter("c", true, false),
        voter("a", true, true),
        voter("b", false, false),
        voter("d", true, false),
    ];
    assert_eq!(pick_voter(&voters).map(|v| v.member.as_str()), Some("c"));
}

#[test]
fn the_guard_replaces_only_its_own_object() {
    let uri = "s3://b/k.db";
    assert_eq!(may_write(&Existing::Absent, "u1", uri), Ok(()));
    assert_eq!(
        may_write(
            &Existing::Present {
                writer: Some("u1".into())
            },
            "u1",
            uri
        ),
        Ok(())
    );
    let other = may_write(
        &Existing::Present {
            writer: Some("u2".into()),
        },
        "u1",
        uri,
    );
    assert_eq!(
        other,
        Err(Failure::ObjectExists {
            uri: uri.into(),
            writer: Some("u2".into())
        })
    );
    assert!(
        other
            .unwrap_err()
            .message()
            .contains("another EtcdSnapshot")
    );
    let in_gcs = may_write(&Existing::Present { writer: None }, "u1", "gs://b/k.db")
        .unwrap_err()
        .message();
    assert!(
        in_gcs.contains("choose another destination.gcs.key"),
        "{in_gcs}"
    );
    let local = may_write(
        &Existing::Present { writer: None },
        "u1",
        "file:///var/lib/etcd-operator/snapshots/k.db",
    )
    .unwrap_err()
    .message();
    assert!(local.contains("destination.local.path"), "{local}");
    let foreign = may_write(&Existing::Present { writer: None }, "u1", uri).unwrap_err();
    assert_eq!(foreign.reason(), "ObjectExists");
    assert!(foreign.message().contains("no EtcdSnapshot wrote it"));
}

fn stored() -> Stored {
    Stored {
        uri: "s3://b/k.db".into(),
        size: 10,
        sha256: "ab".into(),
        snapshot_size: 30,
        snapshot_sha256: "cd".into(),
        compression: SnapshotCompression::Zstd,
        recipients: vec!["sha256:0123456789abcdef".into()],
        revision: Some(42),
        total_keys: Some(17),
    }
}

fn decoded(stored: &Stored) -> Decoded {
    Decoded {
        layers: stored.layers(),
        stored_size: stored.size,
        stored_sha256: stored.sha256.clone(),
        snapshot: crate::snapshot::digest::Digested {
            size: stored.snapshot_size,
            sha256: stored.snapshot_sha256.clone(),
            trailer_matches: true,
        },
        scanned: Some(crate::snapshot::revision::Scanned {
            revision: 42,
            total_keys: 17,
        }),
    }
}

#[test]
fn verification_compares_size_then_hash() {
    let stored = stored();
    assert_eq!(verify(&stored, 10, "ab"), Ok(()));
    let short = verify(&stored, 9, "ab").unwrap_err();
    assert!(
        short
            .message()
            .contains("has 9 bytes where 10 were written")
    );
    let other = verify(&stored, 10, "cd").unwrap_err();
    assert_eq!(other.reason(), "VerificationFailed");
    assert!(other.message().contains("cd"));
}

#[test]
fn the_read_back_checks_every_layer_and_figure() {
    let written = stored();
    let good = decoded(&written);
    let checked = check_read_back(&written, 10, "ab", Some(&good)).unwrap();
    assert!(checked.content_checked);
    assert_eq!((checked.revision, checked.total_keys), (Some(42), Some(17)));
    assert!(
        checked.message.contains("zstd + age"),
        "{}",
        checked.message
    );

    // Without an identity: the stored bytes only, said so.
    let blind = check_read_back(&written, 10, "ab", None).unwrap();
    assert!(!blind.content_checked);
    assert!(blind.message.contains("no identity"));
    assert_eq!(blind.revision, None);

    let cases: Vec<(&str, Decoded)> = vec![
        (
            "encoded as gzip + age",
            Decoded {
                layers: Layers {
                    compression: SnapshotCompression::Gzip,
                    encrypted: true,
                },
                ..good.clone()
            },
        ),
        (
            "etcd's integrity check",
            Decoded {
                snapshot: crate::snapshot::digest::Digested {
                    trailer_matches: false,
                    ..good.snapshot.clone()
                },
                ..good.clone()
            },
        ),
        (
            "where etcd sent 30 bytes",
            Decoded {
                snapshot: crate::snapshot::digest::Digested {
                    sha256: "ee".into(),
                    ..good.snapshot.clone()
                },
                ..good.clone()
            },
        ),
        (
            "revision and keys",
            Decoded {
                scanned: Some(crate::snapshot::revision::Scanned {
                    revision: 43,
                    total_keys: 17,
                }),
                ..good.clone()
            },
        ),
        (
            "revision and keys",
            Decoded {
                scanned: None,
                ..good.clone()
            },
        ),
    ];
    for (says, read) in cases {
        let failure = check_read_back(&written, 10, "ab", Some(&read)).unwrap_err();
        assert_eq!(failure.reason(), "VerificationFailed");
        assert!(
            failure.message().contains(says),
            "{says}: {}",
            failure.message()
        );
    }
    // The stored bytes first, whatever decoding says.
    let failure = check_read_back(&written, 11, "ab", Some(&good)).unwrap_err();
    assert!(failure.message().contains("11 bytes"));
    // Pages that could not be read while writing are not required when reading back.
    let unread = Stored {
        revision: None,
        total_keys: None,
        ..written.clone()
    };
    let read = Decoded {
        scanned: None,
        ..good.clone()
    };
    assert!(check_read_back(&unread, 10, "ab", Some(&read)).is_ok());
}

#[test]
fn the_restored_etcd_must_serve_the_snapshots_revision() {
    let written = stored();
    let checksum = check_read_back(&written, 10, "ab", Some(&decoded(&written))).unwrap();
    let restored = check_restored(&written, &checksum, 42, 5).unwrap();
    assert_eq!(restored.method, SnapshotVerify::Restore);
    assert_eq!((restored.revision, restored.keys), (Some(42), Some(5)));
    assert_eq!(restored.total_keys, Some(17));
    assert!(restored.message.contains("served revision 42 and 5 keys"));
    let off = check_restored(&written, &checksum, 41, 5).unwrap_err();
    assert!(
        off.message()
            .contains("serves revision 41 where the snapshot holds revision 42")
    );
}

#[test]
fn statuses_carry_phase_artifact_and_condition() {
    let now: Timestamp = "2026-01-02T03:04:05Z".parse().unwrap();
    let pending = pending_status(now, Some(1));
    assert_eq!(pending.phase, Some(SnapshotPhase::Pending));
    let started = started_status("etcd-1", "s3://b/k.db", now, Some(1));
    assert_eq!(started.phase, Some(SnapshotPhase::Started));
    assert_eq!(started.member.as_deref(), Some("etcd-1"));
    assert_eq!(started.start_time.as_deref(), Some("2026-01-02T03:04:05Z"));
    let stored = Stored {
        size: 20480,
        sha256: "00ff".into(),
        ..stored()
    };
    let source = Source {
        member: "etcd-1".into(),
        revision: Some(40),
        etcd_version: Some("3.5.1".into()),
    };
    let checked = check_read_back(&stored, 20480, "00ff", Some(&decoded(&stored))).unwrap();
    let later: Timestamp = "2026-01-02T03:04:09Z".parse().unwrap();
    let done = complete_status(&started, &stored, &source, &checked, later, Some(1));
    assert_eq!(done.phase, Some(SnapshotPhase::Complete));
    let artifact = done.artifact.clone().unwrap();
    assert_eq!(artifact.uri, "s3://b/k.db");
    assert_eq!(artifact.size_bytes, Some(20480));
    assert_eq!(artifact.checksum.as_deref(), Some("sha256:00ff"));
    assert_eq!(
        done.revision,
        Some(42),
        "the pages' revision, not the one asked"
    );
    assert_eq!(done.verified, Some(true));
    assert_eq!(done.compression, Some(SnapshotCompression::Zstd));
    let encryption = done.encryption.clone().unwrap();
    assert_eq!(encryption.method, "age");
    assert_eq!(encryption.recipients, ["sha256:0123456789abcdef"]);
    assert_eq!(done.snapshot_size_bytes, Some(30));
    assert_eq!(done.snapshot_checksum.as_deref(), Some("sha256:cd"));
    let v = done.verification.clone().unwrap();
    assert_eq!(v.method, SnapshotVerify::Checksum);
    assert_eq!(v.time.as_deref(), Some("2026-01-02T03:04:09Z"));
    assert_eq!(
        (v.revision, v.total_keys, v.content_checked),
        (Some(42), Some(17), Some(true))
    );
    assert_eq!(done.start_time.as_deref(), Some("2026-01-02T03:04:05Z"));
    assert_eq!(
        done.completion_time.as_deref(),
        Some("2026-01-02T03:04:09Z")
    );
    let ready = &done.conditions.as_ref().unwrap()[0];
    assert_eq!(
        (ready.type_.as_str(), ready.status.as_str()),
        ("Ready", "True")
    );
    assert!(ready.message.contains("revision 42"));
    assert!(ready.message.contains("zstd + age"), "{}", ready.message);
    // The stored figures come back from the status (the restore check needs them).
    assert_eq!(Stored::from_status(&done), Some(stored.clone()));
    // Asked revision when the pages could not be read.
    let unread = Stored {
        revision: None,
        total_keys: None,
        ..stored.clone()
    };
    let done = complete_status(&started, &unread, &source, &checked, later, Some(1));
    assert_eq!(done.revision, Some(40));

    let failed = failed_status(
        &started,
        &Failure::Unauthorized {
            store: String::new(),
        },
        None,
        None,
        later,
        Some(1),
    );
    assert_eq!(failed.phase, Some(SnapshotPhase::Failed));
    assert_eq!(failed.artifact, None);
    assert_eq!(failed.verified, None);
    assert_eq!(failed.verification, None);
    assert_eq!(failed.member.as_deref(), Some("etcd-1"));
    let ready = &failed.conditions.as_ref().unwrap()[0];
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "Unauthorized")
    );
    assert_eq!(
        failed.failure_reason.as_deref(),
        Some(ready.message.as_str())
    );

    let mismatch = Failure::VerificationFailed { detail: "x".into() };
    let unverified = failed_status(
        &started,
        &mismatch,
        Some(&stored),
        Some(SnapshotVerify::Restore),
        later,
        Some(1),
    );
    assert_eq!(unverified.verified, Some(false));
    assert!(unverified.artifact.is_some());
    assert_eq!(unverified.compression, Some(SnapshotCompression::Zstd));
    let v = unverified.verification.unwrap();
    assert_eq!(v.method, SnapshotVerify::Restore);
    assert!(v.message.unwrap().contains("verification failed"));
}

#[test]
fn a_restore_check_is_pending_only_while_stored_and_unfinished() {
    let now: Timestamp = "2026-01-02T03:04:05Z".parse().unwrap();
    let started = started_status("etcd-1", "s3://b/k.db", now, Some(1));
    assert!(!restore_check_pending(&started), "not stored yet");
    let stored = stored();
    let source = Source::default();
    let checksum = check_read_back(&stored, 10, "ab", Some(&decoded(&stored))).unwrap();
    let verifying = verifying_status(&started, &stored, &source, &checksum, "pod", now, Some(1));
    assert!(restore_check_pending(&verifying));
    assert_eq!(verifying.phase, Some(SnapshotPhase::Started));
    assert_eq!(verifying.verified, None);
    assert_eq!(
        verifying.conditions.as_ref().unwrap()[0].reason,
        "Verifying"
    );
    assert_eq!(Stored::from_status(&verifying), Some(stored.clone()));
    let back = checked_from_status(&verifying).unwrap();
    assert_eq!((back.revision, back.total_keys), (Some(42), Some(17)));
    let restored = check_restored(&stored, &back, 42, 3).unwrap();
    let done = complete_status(&verifying, &stored, &source, &restored, now, Some(1));
    assert!(!restore_check_pending(&done));
    assert_eq!(done.verification.unwrap().keys, Some(3));
}

#[test]
fn the_latest_success_is_the_newest_complete_and_verified_snapshot_per_cluster() {
    let snapshot = |ns: &str, cluster: &str, phase, verified, done: &str| {
        let mut s = etcd_operator_api::EtcdSnapshot::new("s", Default::default());
        s.metadata.namespace = Some(ns.into());
        s.spec.cluster_ref.name = cluster.into();
        s.status = Some(EtcdSnapshotStatus {
            phase: Some(phase),
            verified,
            completion_time: Some(done.into()),
            ..Default::default()
        });
        std::sync::Arc::new(s)
    };
    let all = [
        snapshot(
            "a",
            "etcd",
            SnapshotPhase::Complete,
            Some(true),
            "2026-01-01T00:00:00Z",
        ),
        snapshot(
            "a",
            "etcd",
            SnapshotPhase::Complete,
            Some(true),
            "2026-01-02T00:00:00Z",
        ),
        // Newer, but failed or not verified: not a success.
        snapshot(
            "a",
            "etcd",
            SnapshotPhase::Failed,
            None,
            "2026-01-03T00:00:00Z",
        ),
        snapshot(
            "a",
            "etcd",
            SnapshotPhase::Complete,
            Some(false),
            "2026-01-04T00:00:00Z",
        ),
        snapshot(
            "b",
            "etcd",
            SnapshotPhase::Complete,
            Some(true),
            "2026-01-01T00:00:00Z",
        ),
        snapshot(
            "b",
            "other",
            SnapshotPhase::Started,
            None,
            "2026-01-01T00:00:00Z",
        ),
    ];
    let latest = latest_successes(&all);
    let day = |d: &str| d.parse::<Timestamp>().unwrap().as_second();
    assert_eq!(
        latest,
        std::collections::BTreeMap::from([
            (("a".into(), "etcd".into()), day("2026-01-02T00:00:00Z")),
            (("b".into(), "etcd".into()), day("2026-01-01T00:00:00Z")),
        ])
    );
}
