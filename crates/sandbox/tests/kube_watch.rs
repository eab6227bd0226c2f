//! Watch through kube-rs: the runtime watcher, bookmarks, selector transitions, and a watch
//! resumed after 410 Gone.

mod common;

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;

use common::{config_map, start, start_with};

#[tokio::test]
async fn the_runtime_watcher_sees_every_change() {
    let sandbox = start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(sandbox.client());
    let stream = watcher(
        api.clone(),
        watcher::Config::default().labels("watched=yes"),
    )
    .touched_objects();
    let mut stream = Box::pin(stream);
    api.create(
        &PostParams::default(),
        &config_map("w", json!({"watched": "yes"})),
    )
    .await
    .unwrap();
    let first = tokio::time::timeout(Duration::from_secs(10), stream.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(first.name_any(), "w");
    api.patch(
        "w",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "changed"}})),
    )
    .await
    .unwrap();
    let changed = tokio::time::timeout(Duration::from_secs(10), stream.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(changed.data.unwrap()["k"], "changed");
}

#[tokio::test]
async fn a_watch_from_an_expired_version_gets_410_and_resumes_after_a_list() {
    let sandbox = start_with(|mut options| {
        options.apiserver.watch_history = 16;
        options
    })
    .await;
    let api: Api<ConfigMap> = Api::default_namespaced(sandbox.client());
    let first = api
        .create(&PostParams::default(), &config_map("old", json!({})))
        .await
        .unwrap();
    for i in 0..40 {
        api.create(
            &PostParams::default(),
            &config_map(&format!("filler-{i}"), json!({})),
        )
        .await
        .unwrap();
    }
    let mut stream = api
        .watch(&WatchParams::default(), &first.resource_version().unwrap())
        .await
        .unwrap()
        .boxed();
    match stream.try_next().await.unwrap() {
        Some(WatchEvent::Error(status)) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"))
        }
        other => panic!("expected 410 Gone, got {other:?}"),
    }
    // Re-list, then watch from the list's version: changes arrive again.
    let list = api.list(&ListParams::default()).await.unwrap();
    let mut stream = api
        .watch(
            &WatchParams::default().timeout(10),
            &list.metadata.resource_version.unwrap(),
        )
        .await
        .unwrap()
        .boxed();
    api.create(&PostParams::default(), &config_map("after", json!({})))
        .await
        .unwrap();
    match stream.try_next().await.unwrap() {
        Some(WatchEvent::Added(cm)) => assert_eq!(cm.name_any(), "after"),
        other => panic!("expected the new object, got {other:?}"),
    }
}

#[tokio::test]
async fn watch_bookmarks_and_selector_transitions() {
    let sandbox = start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(sandbox.client());
    let start_rv = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = api
        .watch(
            &WatchParams::default().labels("tier=db").timeout(20),
            &start_rv,
        )
        .await
        .unwrap()
        .boxed();
    api.create(
        &PostParams::default(),
        &config_map("moving", json!({"tier": "web"})),
    )
    .await
    .unwrap();
    api.patch(
        "moving",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"tier": "db"}}})),
    )
    .await
    .unwrap();
    api.patch(
        "moving",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"tier": "web"}}})),
    )
    .await
    .unwrap();
    let mut seen = Vec::new();
    while seen.len() < 3 {
        match tokio::time::timeout(Duration::from_secs(15), stream.try_next())
            .await
            .unwrap()
            .unwrap()
        {
            Some(WatchEvent::Added(_)) => seen.push("added"),
            Some(WatchEvent::Deleted(_)) => seen.push("deleted"),
            Some(WatchEvent::Bookmark(bookmark)) => {
                assert!(!bookmark.metadata.resource_version.is_empty());
                seen.push("bookmark");
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(
        &seen[..2],
        ["added", "deleted"],
        "entering and leaving the selector"
    );
    assert_eq!(seen[2], "bookmark");
}

#[tokio::test]
async fn a_streaming_list_watcher_gets_the_initial_state_then_changes() {
    let sandbox = start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(sandbox.client());
    api.create(
        &PostParams::default(),
        &config_map("before", json!({"streamed": "yes"})),
    )
    .await
    .unwrap();
    let config = watcher::Config::default()
        .labels("streamed=yes")
        .streaming_lists();
    let mut stream = Box::pin(watcher(api.clone(), config).default_backoff());
    let mut initial = Vec::new();
    loop {
        let event = tokio::time::timeout(Duration::from_secs(10), stream.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        match event {
            watcher::Event::InitApply(cm) => initial.push(cm.name_any()),
            watcher::Event::InitDone => break,
            _ => {}
        }
    }
    assert_eq!(
        initial,
        ["before"],
        "the initial events end with the marked bookmark"
    );
    api.create(
        &PostParams::default(),
        &config_map("after", json!({"streamed": "yes"})),
    )
    .await
    .unwrap();
    let event = tokio::time::timeout(Duration::from_secs(10), stream.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(matches!(event, watcher::Event::Apply(cm) if cm.name_any() == "after"));
}

#[tokio::test]
async fn a_watch_ends_after_its_timeout() {
    let sandbox = start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(sandbox.client());
    let started = std::time::Instant::now();
    let mut stream = api
        .watch(&WatchParams::default().timeout(1), "0")
        .await
        .unwrap()
        .boxed();
    while let Some(event) = stream.try_next().await.unwrap() {
        assert!(matches!(
            event,
            WatchEvent::Added(_) | WatchEvent::Bookmark(_)
        ));
    }
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(900) && elapsed < Duration::from_secs(20),
        "{elapsed:?}"
    );
}
