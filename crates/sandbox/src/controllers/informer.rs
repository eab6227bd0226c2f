//! Caches of watched objects, as client-go's informers give the real controllers: a reflector
//! store kept by a watch (restarting with backoff on errors), and a wake-up on every change.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Watches `api` into a store until `token` is cancelled, waking `changed` after each event.
/// Await [`Store::wait_until_ready`] before trusting the store to be complete.
pub fn watch_into_store<K>(
    api: Api<K>,
    config: watcher::Config,
    changed: Arc<Notify>,
    token: CancellationToken,
) -> Store<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (store, writer) = reflector::store();
    let events = reflector::reflector(writer, watcher(api, config).default_backoff());
    tokio::spawn(async move {
        let mut events = std::pin::pin!(events);
        loop {
            tokio::select! {
                () = token.cancelled() => break,
                event = events.next() => match event {
                    Some(Ok(_)) => changed.notify_one(),
                    Some(Err(error)) => tracing::debug!(%error, kind = %K::kind(&()), "watch failed; retrying"),
                    None => break,
                },
            }
        }
    });
    store
}

/// The watches of one controller, as one value: every store wakes the same [`Informers::changed`]
/// and stops with the same token, and [`Informers::synced`] waits for all of their first lists.
pub struct Informers {
    /// Woken after every event of every watch.
    pub changed: Arc<Notify>,
    token: CancellationToken,
    first_lists: Vec<std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>>,
}

impl Informers {
    pub fn new(token: &CancellationToken) -> Self {
        Informers {
            changed: Arc::new(Notify::new()),
            token: token.clone(),
            first_lists: Vec::new(),
        }
    }

    /// Watches every object of `api` into a store.
    pub fn watch<K>(&mut self, api: Api<K>) -> Store<K>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        let store = watch_into_store(
            api,
            watcher::Config::default(),
            self.changed.clone(),
            self.token.clone(),
        );
        let first_list = store.clone();
        self.first_lists.push(Box::pin(async move {
            let _ = first_list.wait_until_ready().await;
        }));
        store
    }

    /// Waits until every store holds its first list; false when the token was cancelled first.
    pub async fn synced(&mut self) -> bool {
        let first_lists = futures::future::join_all(std::mem::take(&mut self.first_lists));
        tokio::select! {
            () = self.token.cancelled() => false,
            _ = first_lists => true,
        }
    }
}

/// Runs `reconcile` for every `Parent` until `token` is cancelled, woken as well by changes to
/// the `Child` objects a parent controls; a failed pass is tried again after 500 ms.
pub async fn run_owning_controller<Parent, Child, Context, ReconcileFut>(
    client: Client,
    token: CancellationToken,
    reconcile: impl FnMut(Arc<Parent>, Arc<Context>) -> ReconcileFut,
    context: Arc<Context>,
) where
    Parent: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    Child: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    Context: Send + Sync + 'static,
    ReconcileFut: futures::TryFuture<Ok = Action> + Send + 'static,
    ReconcileFut::Error: std::error::Error + Send + 'static,
{
    Controller::new(
        Api::<Parent>::all(client.clone()),
        watcher::Config::default(),
    )
    .owns(Api::<Child>::all(client), watcher::Config::default())
    .graceful_shutdown_on(token.cancelled_owned())
    .run(
        reconcile,
        |_, _, _| Action::requeue(Duration::from_millis(500)),
        context,
    )
    .for_each(|_| async {})
    .await;
}
