//! [`PassSlots`]: how many clusters are reconciled at once (`--concurrency`), served in the
//! order the passes asked.
//!
//! kube-runtime's own limit (`controller::Config::concurrency`) is not used: in kube-runtime
//! 5.0, once every slot is busy, the requests that come due wait in a `HashSet` and a freed
//! slot goes to the first of them the set iterates, not to the one waiting longest. Clusters
//! that ask again within a second (every cluster that bootstraps) keep winning over the ones
//! behind them in the set: with 1,000 clusters created at once and 16 slots, 263 of them had
//! not had a single pass after 47 minutes (docs/testing.md, "What the real control plane
//! showed", item 21). So kube-runtime starts a pass for every cluster that is due (still
//! never two for the same cluster), and each pass first takes one of these slots, which a
//! fair semaphore hands out first come, first served.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::{Semaphore, SemaphorePermit};
use tokio::task::JoinHandle;

/// At most `concurrency` passes run at once; the others wait in the order they came.
pub struct PassSlots {
    slots: Arc<Semaphore>,
}

impl PassSlots {
    /// `concurrency` passes at once; 0 for no limit (as kube-runtime's 0).
    pub fn new(concurrency: u16) -> PassSlots {
        let permits = match concurrency {
            0 => Semaphore::MAX_PERMITS,
            n => usize::from(n),
        };
        PassSlots {
            slots: Arc::new(Semaphore::new(permits)),
        }
    }

    /// Waits for a slot, behind every pass that asked before; the slot is free again when the
    /// permit drops. `None` once [`PassSlots::close`] was called: the process is stopping, and
    /// a pass that has not started does not start (kube-runtime waits for every pass it
    /// started, and these count as started).
    pub async fn take(&self) -> Option<SemaphorePermit<'_>> {
        self.slots.acquire().await.ok()
    }

    /// No pass takes a slot from now on; those running keep theirs.
    pub fn close(&self) {
        self.slots.close();
    }

    /// Closes the slots once `shutdown` completes (a controller's graceful shutdown), so the
    /// passes waiting for one end without running. Abort the task when the controller ends.
    pub fn close_when(
        &self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> JoinHandle<()> {
        let slots = self.slots.clone();
        tokio::spawn(async move {
            shutdown.await;
            slots.close();
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::*;

    /// A cluster that waited since before the others asked is served first, even while the
    /// others keep asking again as soon as their pass ends (the bootstrap's short requeues).
    #[tokio::test]
    async fn a_slot_goes_to_the_pass_waiting_longest() {
        let slots = Arc::new(PassSlots::new(2));
        let served = Arc::new(Mutex::new(Vec::<&'static str>::new()));
        // Two busy clusters hold both slots and ask again right after each pass, 20 times.
        let busy = |name: &'static str| {
            let (slots, served) = (slots.clone(), served.clone());
            tokio::spawn(async move {
                for _ in 0..20 {
                    let _slot = slots.take().await.expect("open");
                    served.lock().unwrap().push(name);
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            })
        };
        let (a, b) = (busy("busy-a"), busy("busy-b"));
        tokio::time::sleep(Duration::from_millis(1)).await;
        // A new cluster asks while both are busy.
        let new = {
            let (slots, served) = (slots.clone(), served.clone());
            tokio::spawn(async move {
                let _slot = slots.take().await.expect("open");
                served.lock().unwrap().push("new");
            })
        };
        let _ = tokio::join!(a, b, new);
        let served = served.lock().unwrap();
        let at = served
            .iter()
            .position(|s| *s == "new")
            .expect("the new cluster was served");
        // Each busy cluster finished at most one more pass before the new one had its turn.
        assert!(
            at <= 4,
            "the new cluster waited behind {at} passes: {served:?}"
        );
    }

    #[tokio::test]
    async fn zero_is_no_limit() {
        let slots = PassSlots::new(0);
        let held: Vec<_> = futures::future::join_all((0..1000).map(|_| slots.take())).await;
        assert_eq!(held.iter().flatten().count(), 1000);
    }

    /// On shutdown the passes waiting for a slot end without running; a running one keeps its.
    #[tokio::test]
    async fn closed_slots_let_the_waiting_passes_go() {
        let slots = Arc::new(PassSlots::new(1));
        let running = slots.take().await.expect("open");
        let waiting = {
            let slots = slots.clone();
            tokio::spawn(async move { slots.take().await.is_some() })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        slots.close();
        assert!(
            !waiting.await.unwrap(),
            "a waiting pass got a slot after close"
        );
        drop(running);
        assert!(slots.take().await.is_none());
    }

    #[tokio::test]
    async fn no_more_than_the_limit_run_at_once() {
        let slots = PassSlots::new(3);
        let _held: Vec<_> = futures::future::join_all((0..3).map(|_| slots.take())).await;
        let fourth = tokio::time::timeout(Duration::from_millis(50), slots.take()).await;
        assert!(fourth.is_err(), "a fourth pass ran beside three");
    }
}
