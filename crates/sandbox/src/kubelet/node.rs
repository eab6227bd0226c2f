//! One node agent: it watches the Pods bound to its node, runs a worker for each, keeps its
//! node's heartbeat, and stops the way a node stops (crash or graceful shutdown).

use std::collections::{HashMap, HashSet};
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::context::KubeletContext;
use super::heartbeat;
use super::worker::{self, NodeCommand, NodeContext, Observed, PodWorkerLink};
use crate::controllers::informer::watch_into_store;

/// Workers by Pod uid, and the uids whose worker is done (the Pod was deleted) so a lagging
/// cache does not start them again.
#[derive(Default)]
struct Workers {
    running: HashMap<String, PodWorkerLink>,
    done: HashSet<String>,
}

/// A running node agent.
pub(crate) struct NodeAgent {
    context: Arc<NodeContext>,
    workers: Arc<Mutex<Workers>>,
    tasks: Vec<JoinHandle<()>>,
}

impl NodeAgent {
    /// Posts the node Ready and starts watching its Pods.
    pub async fn start(
        kubelet: Arc<KubeletContext>,
        name: &str,
        host_ip: Ipv4Addr,
        parent: &CancellationToken,
    ) -> Self {
        let token = parent.child_token();
        let recorder = Recorder::new(
            kubelet.client.clone(),
            Reporter {
                controller: "kubelet".into(),
                instance: Some(name.to_string()),
            },
        );
        let context = Arc::new(NodeContext {
            name: name.to_string(),
            host_ip,
            kubelet,
            recorder,
            token,
        });
        if let Err(error) = heartbeat::register(&context).await {
            tracing::warn!(node = name, %error, "registering the node failed; the heartbeat retries");
        }
        if let Err(error) = heartbeat::post_ready(&context).await {
            tracing::warn!(node = name, %error, "posting the node Ready failed; the heartbeat retries");
        }
        if let Some(ca) = &context.kubelet.control_plane_ca
            && let Err(error) = super::server::serve(
                context.kubelet.clone(),
                name.to_string(),
                host_ip,
                ca,
                context.token.clone(),
            )
            .await
        {
            tracing::warn!(node = name, %error, "serving the kubelet endpoint failed");
        }
        let workers = Arc::new(Mutex::new(Workers::default()));
        let tasks = vec![
            tokio::spawn(heartbeat::run(context.clone())),
            tokio::spawn(run_pods(context.clone(), workers.clone())),
        ];
        Self {
            context,
            workers,
            tasks,
        }
    }

    fn stop_tasks(&self) {
        self.context.token.cancel();
        self.tasks.iter().for_each(JoinHandle::abort);
    }

    /// Sends a command to every worker and waits until each has carried it out.
    async fn command_all(&self, command: impl Fn(oneshot::Sender<()>) -> NodeCommand) {
        let mut replies = Vec::new();
        {
            let workers = self.workers.lock().expect("workers lock");
            for worker in workers.running.values() {
                let (done, reply) = oneshot::channel();
                if worker.commands.send(command(done)).is_ok() {
                    replies.push(reply);
                }
            }
        }
        for reply in replies {
            let _ = reply.await;
        }
    }

    /// Node crash: every Pod's processes killed at once, the heartbeat stops; Pod objects stay
    /// as they were until the node lifecycle acts on them.
    pub async fn crash(self) {
        for task in &self.tasks {
            task.abort();
        }
        self.command_all(NodeCommand::Crash).await;
        self.stop_tasks();
    }

    /// Graceful node shutdown: the node goes NotReady, every Pod gets SIGTERM and at most
    /// `grace_cap` to exit and is left terminal; then the agent stops.
    pub async fn shut_down(self, grace_cap: Duration) {
        self.tasks[0].abort();
        if let Err(error) = heartbeat::post_not_ready(&self.context, "node is shutting down").await
        {
            tracing::warn!(node = %self.context.name, %error, "posting the node NotReady failed");
        }
        self.command_all(|done| NodeCommand::Shutdown { grace_cap, done })
            .await;
        self.stop_tasks();
    }
}

impl Drop for NodeAgent {
    fn drop(&mut self) {
        self.stop_tasks();
    }
}

/// Watches the node's Pods and keeps one worker per Pod.
async fn run_pods(context: Arc<NodeContext>, workers: Arc<Mutex<Workers>>) {
    let changed = Arc::new(Notify::new());
    let selector = format!("spec.nodeName={}", context.name);
    let api = Api::<Pod>::all(context.kubelet.client.clone());
    let store = watch_into_store(
        api,
        watcher::Config::default().fields(&selector),
        changed.clone(),
        context.token.clone(),
    );
    tokio::select! {
        () = context.token.cancelled() => return,
        ready = store.wait_until_ready() => if ready.is_err() { return },
    }
    loop {
        reconcile(&context, &store, &workers);
        tokio::select! {
            () = context.token.cancelled() => return,
            () = changed.notified() => {}
            // Workers that ended are noticed even when nothing changes.
            () = tokio::time::sleep(Duration::from_secs(5)) => {}
        }
    }
}

fn reconcile(context: &Arc<NodeContext>, store: &Store<Pod>, workers: &Mutex<Workers>) {
    let pods = store.state();
    let present: HashSet<String> = pods.iter().filter_map(|pod| pod.uid()).collect();
    let mut workers = workers.lock().expect("workers lock");
    let Workers { running, done } = &mut *workers;
    running.retain(|uid, worker| {
        let finished = worker.task.is_finished();
        if finished {
            done.insert(uid.clone());
        }
        !finished
    });
    done.retain(|uid| present.contains(uid));
    for pod in pods {
        let Some(uid) = pod.uid() else { continue };
        if done.contains(&uid) {
            continue;
        }
        match running.get(&uid) {
            Some(worker) => {
                worker.observed.send_if_modified(|observed| match observed {
                    Observed::Present(current)
                        if current.resource_version() == pod.resource_version() =>
                    {
                        false
                    }
                    _ => {
                        *observed = Observed::Present(pod.clone());
                        true
                    }
                });
            }
            None => {
                running.insert(uid, worker::spawn(context.clone(), pod));
            }
        }
    }
    for (uid, worker) in running.iter() {
        if !present.contains(uid) {
            worker.observed.send_if_modified(|observed| {
                let changed = !matches!(observed, Observed::Gone);
                *observed = Observed::Gone;
                changed
            });
        }
    }
    // Sandboxes a stopped agent left for Pods that are gone now.
    for entry in context.kubelet.pods.on_node(&context.name) {
        if !present.contains(&entry.uid)
            && !running.contains_key(&entry.uid)
            && let Some(entry) = context.kubelet.pods.remove(&entry.uid)
        {
            tokio::task::spawn_blocking(move || drop(entry));
        }
    }
}
