//! Pods with real etcd, cluster DNS between Pods, and volumes (needs root).

mod runtime_support;

use std::net::SocketAddr;
use std::time::Duration;

use kube_sandbox::network::dns::{EndpointDns, PortDns, PortProtocol, ServiceDns};
use kube_sandbox::runtime::{ProjectedFile, TerminationReason, Volume, VolumeMount, VolumeSource};
use runtime_support::{Sandbox, etcd, shell};

fn claim(name: &str) -> Volume {
    Volume {
        name: "data".into(),
        source: VolumeSource::PersistentVolumeClaim {
            claim_name: name.into(),
            read_only: false,
        },
    }
}

fn mount(name: &str, path: &str) -> VolumeMount {
    VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_in_a_pod_answers_health_and_is_reached_by_dns_name_from_another_pod() {
    let sandbox = Sandbox::new().await;
    let member = sandbox
        .pod("etcd-0", vec![claim("data-etcd-0")], None)
        .await;
    member.start(&etcd("etcd-0", member.ip()));
    let health = SocketAddr::from((member.ip(), 2379));
    sandbox
        .wait_http(
            health,
            "/health",
            |body| body.contains("\"health\":\"true\""),
            Duration::from_secs(30),
        )
        .await;

    // The headless Service of the members, as the operator makes it.
    sandbox.network.dns().set_service(ServiceDns {
        namespace: "default".into(),
        name: "etcd".into(),
        cluster_ip: None,
        ports: vec![PortDns {
            name: "client".into(),
            protocol: PortProtocol::Tcp,
            port: 2379,
        }],
        endpoints: vec![EndpointDns {
            ip: member.ip(),
            hostname: Some("etcd-0".into()),
            ready: true,
        }],
        publish_not_ready_addresses: true,
    });
    let client = sandbox.pod("client", Vec::new(), None).await;
    // Short names go through the Pod's search path, as they would in Kubernetes.
    client.start(&shell(
        "curl",
        "curl -sS --max-time 5 http://etcd-0.etcd:2379/health && echo && \
         getent hosts etcd-0.etcd.default.svc.cluster.local",
    ));
    let done = client.sandbox.wait_container("curl").await.unwrap();
    let log = client.log("curl");
    assert_eq!(done.reason, TerminationReason::Completed, "{log}");
    assert!(log.contains("\"health\":\"true\""), "{log}");
    assert!(log.contains(&member.ip().to_string()), "{log}");

    // etcdctl from the image, inside the member's own Pod namespace.
    member.start(&kube_sandbox::runtime::ContainerConfig {
        name: "etcdctl".into(),
        image: runtime_support::ETCD_IMAGE.into(),
        command: vec![
            "etcdctl".into(),
            "--endpoints=http://127.0.0.1:2379".into(),
            "put".into(),
            "k".into(),
            "v".into(),
        ],
        ..Default::default()
    });
    let put = member.sandbox.wait_container("etcdctl").await.unwrap();
    assert_eq!(put.exit_code, 0, "{}", member.log("etcdctl"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debian_etcd_3_4_runs_dynamically_linked_from_the_machine() {
    let sandbox = Sandbox::new().await;
    let member = sandbox.pod("old-0", vec![claim("data-old-0")], None).await;
    let mut config = etcd("old-0", member.ip());
    config.image = "registry.k8s.io/etcd:3.4.23-0".into();
    member.start(&config);
    let address = SocketAddr::from((member.ip(), 2379));
    sandbox
        .wait_http(
            address,
            "/version",
            |body| body.contains("etcdserver"),
            Duration::from_secs(30),
        )
        .await;
    let version = sandbox
        .http_get(address, "/version", Duration::from_secs(2))
        .await
        .unwrap();
    assert!(version.contains("\"etcdserver\":\"3.4.23\""), "{version}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claim_data_survives_the_pod_while_empty_dir_does_not() {
    let sandbox = Sandbox::new().await;
    let volumes = || {
        vec![
            claim("data-app-0"),
            Volume {
                name: "scratch".into(),
                source: VolumeSource::EmptyDir,
            },
        ]
    };
    let with_mounts = |script: &str| {
        let mut config = shell("app", script);
        config.volume_mounts = vec![mount("data", "/data"), mount("scratch", "/scratch")];
        config
    };

    let first = sandbox.pod("app-0", volumes(), None).await;
    first.start(&with_mounts(
        "echo kept > /data/file && echo lost > /scratch/file",
    ));
    assert_eq!(
        first.sandbox.wait_container("app").await.unwrap().exit_code,
        0,
        "{}",
        first.log("app")
    );
    let first_dir = first.sandbox.dir().to_path_buf();
    drop(first);
    assert!(
        !first_dir.exists(),
        "the Pod's directory (and its emptyDir) went with it"
    );

    let second = sandbox.pod("app-0", volumes(), None).await;
    second.start(&with_mounts("cat /data/file; ls -A /scratch | wc -l"));
    second.sandbox.wait_container("app").await.unwrap();
    assert_eq!(second.log("app"), "kept\n0\n");

    // Faults on the claim: corruption changes its files, a wipe empties it.
    let store = sandbox.runtime.persistent_volumes();
    assert_eq!(store.corrupt("default", "data-app-0").unwrap(), 1);
    let corrupted = std::fs::read(
        store
            .existing("default", "data-app-0")
            .unwrap()
            .join("file"),
    )
    .unwrap();
    assert_ne!(corrupted, b"kept\n");
    store.wipe("default", "data-app-0").unwrap();
    drop(second);
    let third = sandbox.pod("app-0", volumes(), None).await;
    third.start(&with_mounts("ls -A /data | wc -l"));
    third.sandbox.wait_container("app").await.unwrap();
    assert_eq!(third.log("app"), "0\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_empty_dir_is_a_tmpfs_with_the_size_limit_shared_by_containers() {
    let sandbox = Sandbox::new().await;
    let cache = Volume {
        name: "cache".into(),
        source: VolumeSource::Memory {
            size_limit: Some(2 * 1024 * 1024),
        },
    };
    let pod = sandbox.pod("cache", vec![cache], Some(4000)).await;
    let mut writer = shell(
        "writer",
        "grep ' /cache ' /proc/self/mountinfo; stat -c 'group=%g' /cache; echo shared > /cache/note; \
         dd if=/dev/zero of=/cache/big bs=1M count=4 2>/dev/null || echo full",
    );
    writer.volume_mounts = vec![mount("cache", "/cache")];
    pod.start(&writer);
    pod.sandbox.wait_container("writer").await.unwrap();
    let log = pod.log("writer");
    assert!(log.contains(" - tmpfs "), "{log}");
    assert!(log.contains("size=2048k"), "{log}");
    assert!(log.contains("group=4000"), "{log}");
    assert!(
        log.contains("full"),
        "writing 4 MiB into 2 MiB must fail: {log}"
    );

    let mut reader = shell("reader", "cat /note");
    reader.volume_mounts = vec![mount("cache", "/")];
    assert!(
        pod.sandbox.start_container(&reader).is_err(),
        "mounting over / is refused"
    );
    reader.volume_mounts = vec![mount("cache", "/mnt/cache")];
    reader.command[2] = "cat /mnt/cache/note".into();
    pod.start(&reader);
    pod.sandbox.wait_container("reader").await.unwrap();
    assert_eq!(pod.log("reader"), "shared\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_files_are_read_only_and_refresh_while_the_container_runs() {
    let sandbox = Sandbox::new().await;
    let file = |content: &str| ProjectedFile {
        path: "settings.conf".into(),
        content: content.as_bytes().to_vec(),
        mode: 0o640,
    };
    let config = Volume {
        name: "config".into(),
        source: VolumeSource::Files(vec![file("version=1")]),
    };
    let pod = sandbox.pod("configured", vec![config], None).await;
    let mut reader = shell(
        "reader",
        "stat -L -c 'mode=%a' /etc/app/settings.conf; touch /etc/app/x 2>/dev/null || echo read-only; \
         while ! grep -q version=2 /etc/app/settings.conf; do sleep 0.05; done; echo refreshed",
    );
    reader.volume_mounts = vec![mount("config", "/etc/app")];
    pod.start(&reader);
    tokio::time::sleep(Duration::from_millis(300)).await;
    pod.sandbox
        .refresh_files("config", &[file("version=2")])
        .unwrap();
    let done = tokio::time::timeout(
        Duration::from_secs(10),
        pod.sandbox.wait_container("reader"),
    )
    .await
    .expect("the container sees the new file");
    assert_eq!(done.unwrap().exit_code, 0);
    let log = pod.log("reader");
    assert!(log.starts_with("mode=640\nread-only\n"), "{log}");
    assert!(log.ends_with("refreshed\n"), "{log}");
}
