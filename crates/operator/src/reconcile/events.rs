//! Recording the Event of a pass (every action, and waits that need attention).

use k8s_openapi::api::core::v1::Event;
use kube::Api;
use tracing::warn;

use crate::act::{ActContext, post_params};
use crate::build::BuildError;

/// Creates the Event; a failure is logged, never fails the pass (the action already happened).
pub async fn record(ctx: &ActContext, event: Result<Event, BuildError>) {
    let event = match event {
        Ok(event) => event,
        Err(e) => {
            warn!(error = %e, "cannot build the Event for this pass");
            return;
        }
    };
    let namespace = event.metadata.namespace.clone().unwrap_or_default();
    let api: Api<Event> = Api::namespaced(ctx.client.clone(), &namespace);
    ctx.count_write("Event");
    if let Err(e) = api.create(&post_params(), &event).await {
        warn!(
            namespace = %namespace,
            reason = event.reason.as_deref().unwrap_or_default(),
            error = %e,
            "cannot record an Event"
        );
    }
}
