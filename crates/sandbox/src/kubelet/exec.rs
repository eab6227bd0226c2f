//! Commands inside a Pod's container, as `kubectl exec` runs them (`pods/exec`, through the
//! node agents' `NodeStreams`): from this process ([`Kubelet::exec_in_container`]) or from another one given
//! the container's [`ContainerExec`] (`kube-sandbox exec --pod`).

use std::process::Command;

use super::Kubelet;
use super::context::KubeletContext;
use super::faults::FaultError;
use crate::runtime::ContainerExec;

impl Kubelet {
    /// What a command run in container `container` (or the Pod's only container) of a Pod
    /// takes from it: its process, user, groups, working directory and environment.
    pub fn container_exec(
        &self,
        namespace: &str,
        pod: &str,
        container: Option<&str>,
    ) -> Result<ContainerExec, FaultError> {
        self.context.container_exec(namespace, pod, container)
    }

    /// A command that runs inside a container of a Pod; the caller spawns it.
    pub fn exec_in_container(
        &self,
        namespace: &str,
        pod: &str,
        container: Option<&str>,
        command: &[String],
    ) -> Result<Command, FaultError> {
        self.context
            .exec_in_container(namespace, pod, container, command)
    }
}

impl KubeletContext {
    /// What a command run in container `container` (or the Pod's only container) of a Pod
    /// takes from it: its process, user, groups, working directory and environment.
    pub fn container_exec(
        &self,
        namespace: &str,
        pod: &str,
        container: Option<&str>,
    ) -> Result<ContainerExec, FaultError> {
        let entry = self.pod_entry(namespace, pod)?;
        let container = Kubelet::container_of(&entry, container)?;
        let config = entry
            .configs
            .lock()
            .expect("container configs lock")
            .get(&container)
            .cloned()
            .ok_or_else(|| crate::runtime::RuntimeError::NotRunning(container.clone()))?;
        Ok(entry.sandbox.exec_target(&config)?)
    }

    /// A command that runs inside a container of a Pod; the caller spawns it.
    pub fn exec_in_container(
        &self,
        namespace: &str,
        pod: &str,
        container: Option<&str>,
        command: &[String],
    ) -> Result<Command, FaultError> {
        Ok(self
            .container_exec(namespace, pod, container)?
            .command(command)?)
    }
}
