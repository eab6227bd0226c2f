//! PodDisruptionBudget status, recomputed for a namespace whenever one of its Pods or PDBs
//! changes (the disruption controller of kube-controller-manager).

use std::collections::BTreeSet;
use std::sync::Arc;

use tokio::sync::mpsc::UnboundedReceiver;

use crate::apiserver::pdb::{budgets, pods, refresh_namespace};
use crate::apiserver::server::ApiServer;
use crate::apiserver::store::StoreEvent;

pub async fn run(server: Arc<ApiServer>, mut events: UnboundedReceiver<Arc<StoreEvent>>) {
    let (pods, budgets) = (pods(), budgets());
    loop {
        let first = tokio::select! {
            _ = server.shutdown.cancelled() => return,
            event = events.recv() => match event { Some(event) => event, None => return },
        };
        // Everything queued meanwhile is folded into one pass per namespace.
        let mut dirty = BTreeSet::new();
        let mut next = Some(first);
        while let Some(event) = next {
            if event.resource == pods || event.resource == budgets {
                dirty.insert(event.namespace.clone());
            }
            next = events.try_recv().ok();
        }
        for namespace in dirty {
            refresh_namespace(&server, &namespace);
        }
    }
}
