//! The hub in process: real listeners, registrations as the gRPC service receives them.

use std::net::Ipv4Addr;

use tokio_stream::StreamExt;

use super::*;

const INITIAL: &str = "m-0=http://m-0.c:2380,m-1=http://m-1.c:2380,m-2=http://m-2.c:2380";

fn registration(name: &str, state: &str) -> pb::Registration {
    let mut initial_cluster = INITIAL.to_string();
    if name == "m-3" {
        initial_cluster.push_str(",m-3=http://m-3.c:2380");
    }
    pb::Registration {
        name: name.to_string(),
        initial_cluster,
        initial_cluster_state: state.to_string(),
        initial_cluster_token: "tok".to_string(),
        initial_advertise_peer_urls: vec![format!("http://{name}.c:2380")],
        advertise_client_urls: vec![format!("http://{name}.c:2379")],
        ..Default::default()
    }
}

fn hub() -> Arc<Hub> {
    Hub::new(
        Sim::new(SimConfig::default()),
        IpAddr::V4(Ipv4Addr::LOCALHOST),
    )
}

#[tokio::test]
async fn a_closed_registration_stops_the_member_and_registering_again_restarts_it() {
    let hub = hub();
    let mut leases = Vec::new();
    for name in ["m-0", "m-1", "m-2"] {
        let (registered, lease) = hub.register(&registration(name, "new")).await.unwrap();
        assert_eq!(registered.member_id, lease.id());
        assert_ne!(registered.client_address, registered.metrics_address);
        leases.push(lease);
    }
    assert_eq!(hub.running(), 3);
    assert_eq!(hub.sim().world().len(), 1, "one cluster for the token");
    let key = leases[0].cluster();
    let ids: Vec<MemberId> = leases.iter().map(Lease::id).collect();
    let leader = hub.sim().with(key, |c| c.leader());
    assert!(ids.contains(&leader));

    let at = ids.iter().position(|id| *id == leader).unwrap();
    drop(leases.remove(at));
    assert_eq!(hub.running(), 2);
    hub.sim().with(key, |c| {
        assert!(
            !c.is_running(leader),
            "the member stopped with its registration"
        );
        assert_eq!(c.members().len(), 3, "and stays a member");
        assert!(c.leader() != 0 && c.leader() != leader);
    });

    let name = format!("m-{at}");
    let (registered, lease) = hub.register(&registration(&name, "new")).await.unwrap();
    assert_eq!(registered.member_id, leader, "the same member again");
    assert_eq!(lease.cluster(), key);
    assert!(hub.sim().with(key, |c| c.is_running(leader)));
    assert_eq!(hub.sim().world().len(), 1);
}

#[tokio::test]
async fn a_second_registration_of_a_member_supersedes_the_first() {
    let hub = hub();
    let (first, lease) = hub.register(&registration("m-0", "new")).await.unwrap();
    let mut stream = Registration {
        first: Some(first.clone()),
        lease,
    };
    assert_eq!(stream.next().await.unwrap().unwrap(), first);
    let (second, _lease) = hub.register(&registration("m-0", "new")).await.unwrap();
    assert_eq!(second.member_id, first.member_id);
    assert_ne!(second.client_address, first.client_address, "new listeners");
    let ended = stream.next().await.unwrap().unwrap_err();
    assert_eq!(ended.code(), tonic::Code::Aborted);
    assert!(stream.next().await.is_none());
    // The superseded registration closing does not stop the member the second one runs.
    drop(stream);
    assert_eq!(hub.running(), 1);
    let key = hub.registry().tokens["tok"];
    assert!(hub.sim().with(key, |c| c.is_running(first.member_id)));
}

#[tokio::test]
async fn refusals_say_why_etcd_would_not_start() {
    let hub = hub();
    let status = hub
        .register(&registration("m-0", "existing"))
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::FailedPrecondition);
    assert!(status.message().contains("no cluster"), "{status:?}");

    let (_, _lease) = hub.register(&registration("m-0", "new")).await.unwrap();
    let status = hub
        .register(&registration("m-3", "existing"))
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::FailedPrecondition);
    assert!(status.message().contains("MemberAdd"), "{status:?}");

    let mut wrong = registration("m-9", "new");
    wrong.initial_cluster_token = "other".into();
    let status = hub.register(&wrong).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert_eq!(hub.running(), 1);
}

#[test]
fn the_hub_takes_listen_only() {
    let args = |list: &[&str]| list.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    assert_eq!(
        parse_args(&args(&["--listen", "0.0.0.0:2300"])).unwrap(),
        "0.0.0.0:2300"
    );
    assert_eq!(
        parse_args(&args(&["-listen=127.0.0.1:0"])).unwrap(),
        "127.0.0.1:0"
    );
    assert!(parse_args(&args(&[])).is_err());
    assert!(parse_args(&args(&["--listen"])).is_err());
    assert!(parse_args(&args(&["--name=x"])).is_err());
    assert!(parse_args(&args(&["listen"])).is_err());
}

/// Waits up to a generous deadline for `hub` to run `n` members.
async fn running_becomes(hub: &Hub, n: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while hub.running() != n {
        assert!(
            std::time::Instant::now() < deadline,
            "{} members run, not {n}",
            hub.running()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_call_or_its_connection_stops_the_member() {
    let hub = hub();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve(hub.clone(), listener));
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = pb::hub_client::HubClient::new(channel);
    for name in ["m-0", "m-1"] {
        let mut stream = client
            .register(registration(name, "new"))
            .await
            .unwrap()
            .into_inner();
        assert!(stream.message().await.unwrap().is_some());
        assert_eq!(hub.running(), 1);
        // The call cancelled, its connection still open.
        drop(stream);
        running_becomes(&hub, 0).await;
    }
    // The connection closed under an open call, as when the front's process dies: the
    // client runs in a runtime of its own, dropped with every task and socket it has.
    let client_runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let registered = std::thread::spawn(move || {
        let registered = client_runtime.block_on(async move {
            let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
                .unwrap()
                .connect()
                .await
                .unwrap();
            let mut client = pb::hub_client::HubClient::new(channel);
            let mut stream = client
                .register(registration("m-2", "new"))
                .await
                .unwrap()
                .into_inner();
            let registered = stream.message().await.unwrap().unwrap();
            // Kept open until the runtime goes.
            tokio::spawn(async move {
                let _open = (client, stream);
                std::future::pending::<()>().await
            });
            registered
        });
        drop(client_runtime);
        registered
    })
    .join()
    .unwrap();
    assert_ne!(registered.member_id, 0);
    running_becomes(&hub, 0).await;
}
