//! `kubectl etcdop migrate`: an EtcdCluster of the legacy `etcd.aenix.io/v1alpha1` operator
//! taken over in place by this one (no data moved, no Pod restarted, no member ID changed),
//! see docs/migration.md.
//!
//! - [`legacy`]: the legacy API's fields and object names.
//! - [`translate`]: the legacy spec in this API, with warnings and refusals (pure).
//! - [`plan`]: every step with whether it is done, from what exists (pure).
//! - [`facts`]: reading what the plan is made from (the API, etcd through a port-forward).
//! - [`apply`]: the steps, each idempotent.
//!
//! A dry run (the default) prints the plan; `--apply` runs the steps not done yet, in order.
//! Run again after an interruption: the plan is derived from the objects, and the legacy
//! EtcdCluster is deleted last.

pub mod apply;
pub mod facts;
pub mod legacy;
pub mod plan;
pub mod translate;

use std::path::PathBuf;

use anyhow::bail;
use clap::Args;
use serde_json::json;

use crate::output::Printed;
use crate::session::{Target, Usage, kube_client};
use facts::{Inputs, choose_cluster, parse_deployment, read_facts};
use plan::{Plan, SnapshotChoice, StepKind};
use translate::TranslateOptions;

/// The flags of `kubectl etcdop migrate`.
#[derive(Args, Debug, Clone)]
pub struct MigrateArgs {
    /// The legacy EtcdCluster (etcd.aenix.io/v1alpha1; default: the namespace's only one).
    pub cluster: Option<String>,
    /// Act: run the steps not done yet. Without it, print the plan and change nothing.
    #[arg(long)]
    pub apply: bool,
    /// Where the safety snapshot goes (a new local file, written atomically).
    #[arg(long, conflicts_with = "skip_snapshot")]
    pub snapshot_file: Option<PathBuf>,
    /// Go without a safety snapshot.
    #[arg(long)]
    pub skip_snapshot: bool,
    /// The legacy operator's Deployment, which must be at zero or absent.
    #[arg(
        long,
        default_value = "etcd-operator-system/etcd-operator-controller-manager",
        value_parser = parse_deployment
    )]
    pub legacy_operator: (String, String),
    /// This operator's Deployment, which must be at zero or absent.
    #[arg(long, default_value = "etcd-operator-system/etcd-operator", value_parser = parse_deployment)]
    pub operator: (String, String),
    /// The etcd version the Pods run, when their image tag does not say it.
    #[arg(long)]
    pub version: Option<String>,
    /// A basic-auth Secret with root's password, for a cluster with authentication (default:
    /// `<cluster>-root-credentials`, generated).
    #[arg(long)]
    pub auth_secret: Option<String>,
    /// Stop after this step (to go step by step; run again to go on).
    #[arg(long)]
    pub stop_after: Option<usize>,
}

/// The plan as text: a line per step, then warnings and refusals.
pub fn render(plan: &Plan, apply: bool) -> Vec<String> {
    let mut lines = vec![format!(
        "migration of EtcdCluster {}/{} from {} to etcd-operator.cozystack.io/v1alpha2{}",
        plan.namespace,
        plan.cluster,
        legacy::API_VERSION,
        if apply {
            ""
        } else {
            " (dry run: nothing is changed; --apply to act)"
        }
    )];
    for step in &plan.steps {
        lines.push(format!(
            "  {:>2}. [{}] {}",
            step.number,
            if step.done { "done" } else { "todo" },
            step.text
        ));
    }
    if !plan.warnings.is_empty() {
        lines.push("warnings (what does not carry over):".into());
        lines.extend(plan.warnings.iter().map(|w| format!("  - {w}")));
    }
    if !plan.refusals.is_empty() {
        lines.push("refused, nothing is changed:".into());
        lines.extend(plan.refusals.iter().map(|r| format!("  - {r}")));
    }
    lines
}

fn plan_value(plan: &Plan) -> serde_json::Value {
    serde_json::to_value(plan).unwrap_or_default()
}

/// Runs `kubectl etcdop migrate`.
pub async fn migrate(target: &Target, args: &MigrateArgs) -> anyhow::Result<Printed> {
    let (client, namespace) = kube_client(target).await?;
    let cluster = choose_cluster(&client, &namespace, args.cluster.as_deref()).await?;
    let options = TranslateOptions {
        version: args.version.clone(),
        auth_secret: args.auth_secret.clone(),
    };
    let inputs = Inputs {
        namespace: namespace.clone(),
        cluster: cluster.clone(),
        operators: vec![args.legacy_operator.clone(), args.operator.clone()],
        snapshot: SnapshotChoice {
            skip: args.skip_snapshot,
            file: args.snapshot_file.clone(),
            file_exists: args.snapshot_file.as_ref().is_some_and(|f| f.exists()),
        },
    };
    let facts = read_facts(&client, &inputs).await?;
    let mut plan = plan::plan(&facts, &options);
    if facts.legacy.is_none() && plan.refusals.is_empty() {
        return Ok(Printed {
            value: json!({"cluster": cluster, "namespace": namespace, "migrated": true}),
            table: None,
            lines: vec![format!(
                "EtcdCluster {namespace}/{cluster} was migrated from {} already; nothing left to do",
                legacy::API_VERSION
            )],
            code: 0,
        });
    }
    let snapshot_due = plan.step(StepKind::Snapshot).is_some_and(|s| !s.done);
    if args.apply && snapshot_due && args.snapshot_file.is_none() {
        plan.refusals.push(
            "a safety snapshot is taken first: say where with --snapshot-file FILE, or go without one with --skip-snapshot".into(),
        );
    }
    if snapshot_due && inputs.snapshot.file_exists {
        plan.refusals.push(format!(
            "{} exists; choose another --snapshot-file (a snapshot is never written over a file)",
            args.snapshot_file.as_ref().unwrap().display()
        ));
    }
    let mut lines = render(&plan, args.apply);
    if !plan.refusals.is_empty() {
        return Ok(Printed {
            value: json!({"plan": plan_value(&plan), "applied": []}),
            table: None,
            lines,
            code: 1,
        });
    }
    if !args.apply {
        return Ok(Printed {
            value: json!({"plan": plan_value(&plan), "applied": []}),
            table: None,
            lines,
            code: 0,
        });
    }
    let legacy_spec = facts
        .legacy
        .as_ref()
        .map(|l| l.spec.clone())
        .unwrap_or_default();
    let mut applied = Vec::new();
    for step in plan.steps.iter().filter(|s| !s.done) {
        if args.stop_after.is_some_and(|n| step.number > n) {
            lines.push(format!(
                "stopped before step {} (--stop-after {}); run again to go on",
                step.number,
                args.stop_after.unwrap_or_default()
            ));
            return Ok(Printed {
                value: json!({"plan": plan_value(&plan), "applied": applied, "stopped": true}),
                table: None,
                lines,
                code: 0,
            });
        }
        let said = match apply::run_step(
            &client,
            &plan,
            step.kind,
            &legacy_spec,
            args.snapshot_file.as_deref(),
        )
        .await
        {
            Ok(said) => said,
            Err(err) => {
                bail!(
                    "step {} failed: {err:#}; fix what it says and run the command again (the steps done stay done)",
                    step.number
                )
            }
        };
        lines.push(format!("step {} done: {said}", step.number));
        applied.push(json!({"step": step.number, "kind": step.kind, "result": said}));
    }
    // What is there now: every step must read as done.
    let after = read_facts(&client, &inputs).await?;
    let check = plan::plan(&after, &options);
    if after.legacy.is_some() || !check.refusals.is_empty() {
        bail!(Usage(format!(
            "the steps ran but the migration does not read as finished ({}); run the command again",
            check.refusals.join("; ")
        )));
    }
    lines.push(format!(
        "migrated: start this operator (`kubectl -n {} scale deployment/{} --replicas=1`); it takes the members over as they are (Events `Adopted`). The legacy CRDs can go once no etcd.aenix.io object is left.",
        args.operator.0, args.operator.1
    ));
    Ok(Printed {
        value: json!({"plan": plan_value(&plan), "applied": applied}),
        table: None,
        lines,
        code: 0,
    })
}
#[cfg(test)]
mod tests;
