//! Caches of watched objects, as client-go's informers give the real controllers: a reflector
//! store kept by a watch (restarting with backoff on errors), and a wake-up on every change.

use std::fmt::Debug;
use std::sync::Arc;

use futures::StreamExt;
use kube::Resource;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
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
