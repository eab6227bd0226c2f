//! Alarms against real etcd: NOSPACE raised by a tiny backend quota, CORRUPT raised through the
//! alarm API, both visible in the view and disarmed through the wrapper; and what the member
//! Pods' readiness probe (`/health?exclude=NOSPACE` on the metrics port) answers under each.

mod etcd_harness;

use std::time::Duration;

use etcd_client::{AlarmAction, AlarmOptions, AlarmType};
use etcd_harness::{EtcdVersion, client_for, eventually, start_cluster, wait_healthy};
use etcd_operator::etcd::{Alarm, AlarmKind, Timeouts, observe_cluster};

/// `GET path` on an etcd HTTP listener (`http://host:port`): the response body.
async fn http_get(url: &str, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = url.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect to the metrics listener");
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n").as_bytes())
        .await
        .expect("send the request");
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .await
        .expect("read the response");
    response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or(response)
}

async fn nospace_alarm_is_observed_and_disarmed(version: EtcdVersion) {
    // 256 KiB of quota: a few hundred 4 KiB values exceed it.
    let members = start_cluster(version, 1, &["--quota-backend-bytes=262144"]);
    let refs: Vec<_> = members.iter().collect();
    wait_healthy(&refs).await;
    let endpoints = vec![members[0].client_url()];

    let mut raw = etcd_client::Client::connect(&endpoints, None)
        .await
        .expect("raw client");
    let value = vec![b'x'; 4096];
    let mut refused = None;
    for i in 0..10_000 {
        if let Err(e) = raw.put(format!("fill-{i}"), value.clone(), None).await {
            refused = Some(e.to_string());
            break;
        }
    }
    let refused = refused.expect("etcd refused writes past its quota");
    assert!(refused.contains("database space exceeded"), "{refused}");

    let client = client_for(&refs).await;
    let alarms = client.alarms().await.expect("alarm list");
    assert_eq!(alarms.len(), 1, "{alarms:?}");
    assert_eq!(alarms[0].kind, AlarmKind::NoSpace);

    let view = observe_cluster(&endpoints, Timeouts::OBSERVE, &Default::default()).await;
    assert_eq!(view.active_alarms(), &alarms[..]);
    let status = view.statuses().next().unwrap();
    assert_eq!(alarms[0].member_id, status.member_id);
    assert!(
        status.db_size >= status.db_size_in_use && status.db_size > 0,
        "{status:?}"
    );

    // The readiness probe: plain /health fails under NOSPACE, the probe's form does not (the
    // member still serves reads and deletes).
    let metrics = members[0].metrics_url();
    let plain = http_get(&metrics, "/health").await;
    assert!(plain.contains(r#""health":"false""#), "{plain}");
    let probe = http_get(&metrics, "/health?exclude=NOSPACE").await;
    assert!(probe.contains(r#""health":"true""#), "{probe}");

    client.disarm(alarms[0]).await.expect("disarm");
    assert_eq!(
        client.alarms().await.expect("alarm list"),
        Vec::<Alarm>::new()
    );
}

#[tokio::test]
async fn nospace_alarm_is_observed_and_disarmed_v3_5() {
    nospace_alarm_is_observed_and_disarmed(EtcdVersion::V3_5).await;
}

#[tokio::test]
async fn nospace_alarm_is_observed_and_disarmed_v3_4() {
    nospace_alarm_is_observed_and_disarmed(EtcdVersion::V3_4).await;
}

async fn corrupt_alarm_is_observed_and_disarmed(version: EtcdVersion) {
    let members = start_cluster(version, 3, &[]);
    let refs: Vec<_> = members.iter().collect();
    wait_healthy(&refs).await;
    let endpoints: Vec<String> = members.iter().map(|m| m.client_url()).collect();
    let client = client_for(&refs).await;
    let victim = client.member_list().await.expect("list")[1].id;

    // etcd raises CORRUPT itself when its hash check fails; the alarm API raises the same.
    let mut raw = etcd_client::Client::connect(&endpoints, None)
        .await
        .expect("raw client");
    let mut options = AlarmOptions::new();
    options.with_member(victim);
    raw.alarm(AlarmAction::Activate, AlarmType::Corrupt, Some(options))
        .await
        .expect("activate CORRUPT");

    let view = eventually(
        "the CORRUPT alarm in the view",
        Duration::from_secs(10),
        || {
            let endpoints = endpoints.clone();
            async move {
                let view =
                    observe_cluster(&endpoints, Timeouts::OBSERVE, &Default::default()).await;
                (!view.active_alarms().is_empty()).then_some(view)
            }
        },
    )
    .await;
    assert_eq!(
        view.active_alarms(),
        &[Alarm {
            member_id: victim,
            kind: AlarmKind::Corrupt
        }]
    );

    // A corrupt cluster serves nothing: the readiness probe fails on every member.
    for member in &members {
        let probe = http_get(&member.metrics_url(), "/health?exclude=NOSPACE").await;
        assert!(probe.contains(r#""health":"false""#), "{probe}");
    }

    client
        .disarm(view.active_alarms()[0])
        .await
        .expect("disarm CORRUPT");
    assert!(client.alarms().await.expect("alarm list").is_empty());
}

#[tokio::test]
async fn corrupt_alarm_is_observed_and_disarmed_v3_5() {
    corrupt_alarm_is_observed_and_disarmed(EtcdVersion::V3_5).await;
}

#[tokio::test]
async fn corrupt_alarm_is_observed_and_disarmed_v3_4() {
    corrupt_alarm_is_observed_and_disarmed(EtcdVersion::V3_4).await;
}
