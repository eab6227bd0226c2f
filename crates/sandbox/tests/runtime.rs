//! Containers as real processes (needs root): isolation, exit status, signals, graceful stop,
//! logs, users and errors.

mod runtime_support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use kube_sandbox::runtime::{
    ContainerConfig, ContainerState, LogOptions, RuntimeError, TerminationReason,
};
use nix::sys::signal::Signal;
use runtime_support::{Sandbox, TOOLS_IMAGE, eventually, hostname_server, sendable, shell};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_pods_bind_the_same_port_side_by_side() {
    let sandbox = Sandbox::new().await;
    let a = sandbox.pod("web-a", Vec::new(), None).await;
    let b = sandbox.pod("web-b", Vec::new(), None).await;
    a.start(&hostname_server("server", 2379));
    b.start(&hostname_server("server", 2379));
    let limit = Duration::from_secs(10);
    sandbox
        .wait_http(
            SocketAddr::from((a.ip(), 2379)),
            "/",
            |body| body == "web-a",
            limit,
        )
        .await;
    sandbox
        .wait_http(
            SocketAddr::from((b.ip(), 2379)),
            "/",
            |body| body == "web-b",
            limit,
        )
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_is_isolated_in_its_own_namespaces_and_root() {
    let sandbox = Sandbox::new().await;
    let pod = sandbox.pod("isolated", Vec::new(), None).await;
    pod.start(&shell(
        "probe",
        "echo pid=$$$$; echo host=$(hostname); echo init=$(tr '\\0' ' ' < /proc/1/cmdline); \
         cat /etc/hosts | tail -1; ls /; \
         touch /usr/x 2>/dev/null && echo usr-writable || echo usr-read-only; \
         touch /tmp/x && echo tmp-writable; ls /home 2>/dev/null || echo no-home; \
         grep -c . /proc/self/mountinfo",
    ));
    let termination = pod.sandbox.wait_container("probe").await.unwrap();
    let log = pod.log("probe");
    assert_eq!(termination.reason, TerminationReason::Completed, "{log}");
    assert!(log.contains("pid=1\n"), "{log}");
    assert!(log.contains("host=isolated\n"), "{log}");
    // `$$` is the escape of `$` in a Pod's command; its own /proc shows the shell as PID 1.
    assert!(log.contains("init=sh -c echo pid=$$;"), "{log}");
    assert!(log.contains(&format!("{}\tisolated", pod.ip())), "{log}");
    assert!(log.contains("usr-read-only"), "{log}");
    assert!(log.contains("tmp-writable"), "{log}");
    assert!(
        log.contains("no-home"),
        "the machine's /home is not in the root: {log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containers_cannot_reach_the_machine_unless_privileged() {
    let sandbox = Sandbox::new().await;
    let pod = sandbox.pod("confined", Vec::new(), None).await;
    let probe = "grep ' / / ' /proc/self/mountinfo | sed 's/^/root: /'; awk 'BEGIN {print \"awk-ok\"}'; \
                 mkdir -p /tmp/m; mount -t tmpfs none /tmp/m 2>/dev/null && echo mount-ok || echo mount-denied; \
                 mknod /tmp/disk b 8 0 2>/dev/null && echo mknod-ok || echo mknod-denied";
    pod.start(&shell("plain", probe));
    pod.sandbox.wait_container("plain").await.unwrap();
    let plain = pod.log("plain");
    assert!(
        plain.contains("mount-denied") && plain.contains("mknod-denied"),
        "{plain}"
    );
    // The root is the container's tmpfs; the machine's root is not mounted anywhere inside.
    assert_eq!(
        plain
            .lines()
            .filter(|line| line.starts_with("root:"))
            .count(),
        1,
        "{plain}"
    );
    assert!(
        plain.contains("root: mode=755 tmpfs") || plain.contains("tmpfs"),
        "{plain}"
    );

    let mut privileged = shell("privileged", probe);
    privileged.privileged = true;
    pod.start(&privileged);
    pod.sandbox.wait_container("privileged").await.unwrap();
    let log = pod.log("privileged");
    assert!(
        log.contains("mount-ok") && log.contains("mknod-ok"),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_codes_and_signals_become_kubernetes_terminations() {
    let sandbox = Sandbox::new().await;
    let pod = sandbox.pod("exits", Vec::new(), None).await;

    pod.start(&shell("ok", "exit 0"));
    let ok = sendable(pod.sandbox.wait_container("ok")).await.unwrap();
    assert_eq!(
        (ok.exit_code, ok.signal, ok.reason),
        (0, None, TerminationReason::Completed)
    );

    pod.start(&shell("fails", "exit 3"));
    let fails = pod.sandbox.wait_container("fails").await.unwrap();
    assert_eq!(
        (fails.exit_code, fails.reason),
        (3, TerminationReason::Error)
    );

    pod.start(&shell("killed", "sleep 600"));
    pod.sandbox
        .signal_container("killed", Signal::SIGKILL)
        .unwrap();
    let killed = pod.sandbox.wait_container("killed").await.unwrap();
    assert_eq!((killed.exit_code, killed.signal), (137, Some(9)));
    assert_eq!(killed.reason, TerminationReason::Error);
    assert!(matches!(
        pod.sandbox.signal_container("killed", Signal::SIGKILL),
        Err(RuntimeError::NotRunning(_))
    ));

    // A chosen signal the program handles.
    pod.start(&shell(
        "trapped",
        "trap 'exit 42' USR1; while true; do sleep 0.05; done",
    ));
    tokio::time::sleep(Duration::from_millis(300)).await;
    pod.sandbox
        .signal_container("trapped", Signal::SIGUSR1)
        .unwrap();
    assert_eq!(
        pod.sandbox
            .wait_container("trapped")
            .await
            .unwrap()
            .exit_code,
        42
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigstop_makes_a_server_hang_and_sigcont_brings_it_back() {
    let sandbox = Sandbox::new().await;
    let pod = sandbox.pod("member", Vec::new(), None).await;
    pod.start(&hostname_server("server", 8080));
    let address = SocketAddr::from((pod.ip(), 8080));
    sandbox
        .wait_http(
            address,
            "/",
            |body| body == "member",
            Duration::from_secs(10),
        )
        .await;

    pod.sandbox
        .signal_container("server", Signal::SIGSTOP)
        .unwrap();
    assert_eq!(
        sandbox
            .http_get(address, "/", Duration::from_millis(800))
            .await,
        None
    );
    assert!(matches!(
        pod.sandbox.container_status("server").unwrap().state,
        ContainerState::Running { .. }
    ));

    pod.sandbox
        .signal_container("server", Signal::SIGCONT)
        .unwrap();
    assert_eq!(
        sandbox
            .http_get(address, "/", Duration::from_secs(5))
            .await
            .as_deref(),
        Some("member")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_stop_waits_for_sigterm_then_kills() {
    let sandbox = Sandbox::new().await;
    let pod = sandbox.pod("stopping", Vec::new(), None).await;

    pod.start(&shell(
        "polite",
        "trap 'echo bye; exit 0' TERM; while true; do sleep 0.05; done",
    ));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    let polite = sendable(
        pod.sandbox
            .stop_container("polite", Duration::from_secs(10)),
    )
    .await
    .unwrap();
    assert_eq!(polite.reason, TerminationReason::Completed);
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(pod.log("polite").contains("bye"));

    // PID 1 without a SIGTERM handler ignores it: the grace period runs out, then SIGKILL.
    pod.start(&shell("stubborn", "exec sleep 600"));
    let started = Instant::now();
    let stubborn = pod
        .sandbox
        .stop_container("stubborn", Duration::from_millis(700))
        .await
        .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(700));
    assert_eq!(stubborn.signal, Some(9));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarts_keep_the_previous_log_and_count() {
    let sandbox = Sandbox::new().await;
    let pod = sandbox.pod("restarting", Vec::new(), None).await;
    let run = |n: u32| {
        shell(
            "app",
            &format!("for i in 1 2 3; do echo run{n}-line$i; done; echo oops >&2; exit {n}"),
        )
    };
    for n in 1..=3 {
        pod.start(&run(n));
        pod.sandbox.wait_container("app").await.unwrap();
    }
    let status = pod.sandbox.container_status("app").unwrap();
    assert_eq!(status.restart_count, 2);
    assert!(matches!(status.state, ContainerState::Terminated(ref t) if t.exit_code == 3));
    assert_eq!(status.last_termination.unwrap().exit_code, 2);

    let current = pod.log("app");
    assert_eq!(current, "run3-line1\nrun3-line2\nrun3-line3\noops\n");
    let previous = pod
        .sandbox
        .read_log(
            "app",
            &LogOptions {
                previous: true,
                ..Default::default()
            },
        )
        .unwrap();
    assert!(String::from_utf8_lossy(&previous).starts_with("run2-line1"));
    let tail = pod
        .sandbox
        .read_log(
            "app",
            &LogOptions {
                tail_lines: Some(2),
                timestamps: true,
                ..Default::default()
            },
        )
        .unwrap();
    let tail = String::from_utf8_lossy(&tail);
    assert_eq!(tail.lines().count(), 2);
    assert!(tail.lines().last().unwrap().ends_with(" oops"), "{tail}");
    // Only the current and the previous run are kept.
    let log_files = std::fs::read_dir(pod.sandbox.dir().join("logs/app"))
        .unwrap()
        .count();
    assert_eq!(log_files, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_streams_output_until_the_container_ends() {
    use futures::StreamExt;
    let sandbox = Sandbox::new().await;
    let pod = sandbox.pod("chatty", Vec::new(), None).await;
    pod.start(&shell(
        "app",
        "for i in 1 2 3 4 5; do echo tick$i; sleep 0.2; done",
    ));
    let mut stream = pod
        .sandbox
        .follow_log("app", LogOptions::default())
        .unwrap();
    let mut collected = Vec::new();
    while let Some(chunk) = tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .unwrap()
    {
        collected.extend_from_slice(&chunk.unwrap());
    }
    assert_eq!(
        String::from_utf8_lossy(&collected),
        "tick1\ntick2\ntick3\ntick4\ntick5\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_as_user_group_and_environment_expansion() {
    let sandbox = Sandbox::new().await;
    let pod = sandbox.pod("users", Vec::new(), Some(3000)).await;
    // `$(GREETING)` and `$(NAME)` are the runtime's to expand; `$(id -u)` is no variable and
    // stays for the shell.
    let mut config = shell(
        "who",
        "echo uid=$(id -u) gid=$(id -g) groups=$(id -G); echo $(GREETING) $0; pwd",
    );
    config.command.push("$(NAME)".into());
    config.env = vec![
        ("GREETING".into(), "hello".into()),
        ("NAME".into(), "etcd-0".into()),
    ];
    config.run_as_user = Some(1000);
    config.run_as_group = Some(2000);
    config.working_dir = Some("/work/dir".into());
    pod.start(&config);
    pod.sandbox.wait_container("who").await.unwrap();
    let log = pod.log("who");
    assert!(log.contains("uid=1000 gid=2000 groups=2000 3000"), "{log}");
    assert!(log.contains("hello etcd-0\n"), "{log}");
    assert!(log.contains("/work/dir"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unusable_containers_fail_with_the_kubernetes_reason() {
    let sandbox = Sandbox::new().await;
    let pod = sandbox.pod("broken", Vec::new(), None).await;
    let unmapped = ContainerConfig {
        name: "app".into(),
        image: "docker.io/library/nginx:1.27".into(),
        ..Default::default()
    };
    let error = pod.sandbox.start_container(&unmapped).unwrap_err();
    assert_eq!(error.reason(), "ErrImagePull");
    assert!(error.to_string().contains("nginx"), "{error}");

    let missing = ContainerConfig {
        name: "app".into(),
        image: TOOLS_IMAGE.into(),
        command: vec!["no-such-program".into()],
        ..Default::default()
    };
    let error = pod.sandbox.start_container(&missing).unwrap_err();
    assert_eq!(error.reason(), "StartError");
    assert!(error.to_string().contains("no-such-program"), "{error}");

    let mut bad_mount = shell("app", "true");
    bad_mount.volume_mounts = vec![kube_sandbox::runtime::VolumeMount {
        name: "nowhere".into(),
        mount_path: "/data".into(),
        ..Default::default()
    }];
    assert_eq!(
        pod.sandbox
            .start_container(&bad_mount)
            .unwrap_err()
            .reason(),
        "CreateContainerConfigError"
    );

    pod.start(&shell("app", "sleep 600"));
    assert!(matches!(
        pod.sandbox.start_container(&shell("app", "true")),
        Err(RuntimeError::AlreadyRunning(_))
    ));
    eventually(
        "the running container is listed",
        Duration::from_secs(1),
        || pod.sandbox.container_statuses().len() == 1,
    )
    .await;
}
