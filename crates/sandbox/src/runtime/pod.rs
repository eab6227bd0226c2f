//! A Pod sandbox: its directory (`/etc` files, emptyDirs, logs), volumes, and containers.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use nix::sys::signal::Signal;
use tokio_stream::wrappers::ReceiverStream;

use super::container::{ContainerProcess, Termination};
use super::exec::ContainerExec;
use super::launch::{MountableVolume, PodFacts, prepare};
use super::logs::{self, LogOptions, LogWriter};
use super::spec::{
    ContainerConfig, ContainerState, ContainerStatus, PodSandboxConfig, VolumeSource,
};
use super::sys::DetachedMount;
use super::volumes::{ProjectedFile, apply_fs_group, write_projected};
use super::{RuntimeError, RuntimeShared};
use crate::network::NetNamespace;

/// A running Pod. Dropping it kills its containers and removes its directory (emptyDirs and
/// logs included); PersistentVolumeClaims stay.
pub struct PodSandbox {
    uid: String,
    namespace: String,
    name: String,
    hostname: String,
    dir: PathBuf,
    network: Arc<NetNamespace>,
    fs_group: Option<u32>,
    etc_files: Vec<(String, PathBuf)>,
    volumes: BTreeMap<String, MountableVolume>,
    containers: Mutex<BTreeMap<String, ContainerSlot>>,
    runtime: Arc<RuntimeShared>,
}

struct ContainerSlot {
    image: String,
    runs: u32,
    current: Option<Arc<ContainerProcess>>,
    last_termination: Option<Termination>,
}

/// The runtime's own volume of termination message files.
const TERMINATION_VOLUME: &str = "termination_messages";

fn check_component(what: &'static str, name: &str) -> Result<(), RuntimeError> {
    let valid = !name.is_empty()
        && name.len() <= 253
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
    if valid {
        Ok(())
    } else {
        Err(RuntimeError::InvalidName {
            what,
            name: name.to_string(),
        })
    }
}

impl PodSandbox {
    pub(crate) fn create(
        runtime: Arc<RuntimeShared>,
        config: PodSandboxConfig,
    ) -> Result<Self, RuntimeError> {
        check_component("Pod uid", &config.uid)?;
        let dir = runtime.state.path().join("pods").join(&config.uid);
        let io = |context: String| move |source| RuntimeError::Io { context, source };
        std::fs::create_dir_all(dir.parent().expect("pods directory"))
            .map_err(io("create the pods directory".into()))?;
        std::fs::create_dir(&dir)
            .map_err(io(format!("create the directory of Pod {}", config.uid)))?;
        let mut pod = Self {
            uid: config.uid.clone(),
            namespace: config.namespace.clone(),
            name: config.name.clone(),
            hostname: config.hostname.clone(),
            dir,
            network: config.network.clone(),
            fs_group: config.fs_group,
            etc_files: Vec::new(),
            volumes: BTreeMap::new(),
            containers: Mutex::new(BTreeMap::new()),
            runtime,
        };
        // On error `pod` is dropped, which removes what was made so far.
        pod.prepare(&config)?;
        Ok(pod)
    }

    fn prepare(&mut self, config: &PodSandboxConfig) -> Result<(), RuntimeError> {
        let io = |context: String| move |source| RuntimeError::Io { context, source };
        let etc = self.dir.join("etc");
        std::fs::create_dir_all(&etc).map_err(io("create the Pod's /etc".into()))?;
        std::fs::create_dir_all(self.dir.join("rootfs"))
            .map_err(io("create the root mount point".into()))?;
        for (name, content) in [
            ("hosts", config.hosts_file.clone()),
            ("resolv.conf", config.resolv_conf.clone()),
            ("hostname", format!("{}\n", config.hostname)),
        ] {
            let path = etc.join(name);
            std::fs::write(&path, content).map_err(io(format!("write /etc/{name}")))?;
            self.etc_files.push((format!("/etc/{name}"), path));
        }
        for volume in &config.volumes {
            check_component("volume name", &volume.name)?;
            let prepared = self.prepare_volume(&volume.name, &volume.source)?;
            self.volumes.insert(volume.name.clone(), prepared);
        }
        // The termination message files, one per container (a name no Pod volume can have:
        // volume names are DNS labels).
        let termination = self.dir.join("termination");
        std::fs::create_dir_all(&termination)
            .map_err(io("create the termination message directory".into()))?;
        self.volumes.insert(
            TERMINATION_VOLUME.to_string(),
            MountableVolume::Directory {
                path: termination,
                read_only: false,
            },
        );
        Ok(())
    }

    /// What the current (or last) run of `container` wrote to its `terminationMessagePath`,
    /// at most 4096 bytes as the kubelet keeps; `None` when it wrote nothing.
    pub fn termination_message(&self, container: &str) -> Option<String> {
        let path = self.dir.join("termination").join(container);
        let bytes = std::fs::read(path).ok()?;
        let bytes = &bytes[..bytes.len().min(4096)];
        (!bytes.is_empty()).then(|| String::from_utf8_lossy(bytes).into_owned())
    }

    fn prepare_volume(
        &self,
        name: &str,
        source: &VolumeSource,
    ) -> Result<MountableVolume, RuntimeError> {
        let io = |context: String| move |source| RuntimeError::Io { context, source };
        let owned = |path: &Path, read_only: bool| -> Result<(), RuntimeError> {
            match self.fs_group {
                Some(gid) => apply_fs_group(path, gid, read_only)
                    .map_err(io(format!("fsGroup on volume {name}"))),
                None => Ok(()),
            }
        };
        Ok(match source {
            VolumeSource::PersistentVolumeClaim {
                claim_name,
                read_only,
            } => {
                let path = self
                    .runtime
                    .volumes
                    .provision(&self.namespace, claim_name)?;
                owned(&path, *read_only)?;
                MountableVolume::Directory {
                    path,
                    read_only: *read_only,
                }
            }
            VolumeSource::EmptyDir => {
                let path = self.dir.join("volumes").join(name);
                std::fs::create_dir_all(&path).map_err(io(format!("create emptyDir {name}")))?;
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777))
                    .map_err(io(format!("emptyDir {name} permissions")))?;
                owned(&path, false)?;
                MountableVolume::Directory {
                    path,
                    read_only: false,
                }
            }
            VolumeSource::Memory { size_limit } => {
                let size = size_limit.map(|bytes| bytes.to_string());
                let gid = self.fs_group.map(|gid| gid.to_string());
                let mut options: Vec<(CString, CString)> = vec![(
                    c"mode".into(),
                    if gid.is_some() {
                        c"2777".into()
                    } else {
                        c"0777".into()
                    },
                )];
                if let Some(size) = size {
                    options.push((c"size".into(), CString::new(size).expect("digits")));
                }
                if let Some(gid) = gid {
                    options.push((c"gid".into(), CString::new(gid).expect("digits")));
                }
                let borrowed: Vec<(&std::ffi::CStr, &std::ffi::CStr)> = options
                    .iter()
                    .map(|(k, v)| (k.as_c_str(), v.as_c_str()))
                    .collect();
                let mount = DetachedMount::tmpfs(&borrowed)
                    .map_err(io(format!("create memory volume {name}")))?;
                MountableVolume::Memory(mount)
            }
            VolumeSource::Files(files) => {
                let path = self.dir.join("volumes").join(name);
                write_projected(&path, files, self.fs_group)?;
                MountableVolume::Directory {
                    path,
                    read_only: true,
                }
            }
        })
    }

    pub fn uid(&self) -> &str {
        &self.uid
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The Pod's directory on this machine (its `/etc` files, emptyDirs, logs).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Starts (or restarts) container `config.name`. Blocks until the process has exec'd
    /// its program (a few milliseconds); call it from `spawn_blocking` in async code.
    pub fn start_container(&self, config: &ContainerConfig) -> Result<(), RuntimeError> {
        check_component("container name", &config.name)?;
        let mut containers = self.containers.lock().expect("containers lock");
        if let Some(slot) = containers.get(&config.name)
            && slot
                .current
                .as_ref()
                .is_some_and(|process| process.termination().is_none())
        {
            return Err(RuntimeError::AlreadyRunning(config.name.clone()));
        }
        let rule = self.runtime.images.resolve(&config.image)?;
        let with_message;
        let config = match &config.termination_message_path {
            Some(path) if !path.is_empty() => {
                let file = self.dir.join("termination").join(&config.name);
                let io = |source| RuntimeError::Io {
                    context: format!("create the termination message file of {}", config.name),
                    source,
                };
                std::fs::write(&file, b"").map_err(io)?;
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666))
                    .map_err(io)?;
                let mut extended = config.clone();
                extended.volume_mounts.push(super::spec::VolumeMount {
                    name: TERMINATION_VOLUME.to_string(),
                    mount_path: path.clone(),
                    read_only: false,
                    sub_path: Some(config.name.clone()),
                });
                with_message = extended;
                &with_message
            }
            _ => config,
        };
        let facts = PodFacts {
            root: &self.dir.join("rootfs"),
            hostname: &self.hostname,
            network: self.network.as_raw_fd(),
            system_dirs: &self.runtime.system_dirs,
            etc_files: &self.etc_files,
            fs_group: self.fs_group,
        };
        let launch = prepare(config, rule, &facts, &self.volumes)?;
        let slot = containers
            .entry(config.name.clone())
            .or_insert_with(|| ContainerSlot {
                image: config.image.clone(),
                runs: 0,
                current: None,
                last_termination: None,
            });
        let log_dir = self.log_dir(&config.name);
        let log =
            LogWriter::create(&logs::run_log_path(&log_dir, slot.runs)).map_err(|source| {
                RuntimeError::Io {
                    context: format!("create the log of container {}", config.name),
                    source,
                }
            })?;
        if slot.runs >= 2 {
            let _ = std::fs::remove_file(logs::run_log_path(&log_dir, slot.runs - 2));
        }
        let spawned = super::spawn::spawn(launch.plan).map_err(|error| RuntimeError::Start {
            container: config.name.clone(),
            message: error.to_string(),
        });
        drop(launch.held);
        let spawned = spawned?;
        let process = ContainerProcess::watch(
            spawned.pid,
            spawned.pidfd,
            launch.stdout,
            launch.stderr,
            log,
        )
        .map_err(|source| RuntimeError::Io {
            context: format!("watch container {}", config.name),
            source,
        })?;
        if let Some(previous) = slot.current.take() {
            slot.last_termination = previous.termination();
        }
        slot.image = config.image.clone();
        slot.runs += 1;
        slot.current = Some(Arc::new(process));
        Ok(())
    }

    fn log_dir(&self, container: &str) -> PathBuf {
        self.dir.join("logs").join(container)
    }

    fn process(&self, container: &str) -> Result<Arc<ContainerProcess>, RuntimeError> {
        self.containers
            .lock()
            .expect("containers lock")
            .get(container)
            .and_then(|slot| slot.current.clone())
            .ok_or_else(|| RuntimeError::NoSuchContainer(container.to_string()))
    }

    /// The status of every container started so far, by name.
    pub fn container_statuses(&self) -> Vec<ContainerStatus> {
        let containers = self.containers.lock().expect("containers lock");
        containers
            .iter()
            .filter_map(|(name, slot)| {
                let process = slot.current.as_ref()?;
                let state = match process.termination() {
                    Some(termination) => ContainerState::Terminated(termination),
                    None => ContainerState::Running {
                        pid: process.pid(),
                        started_at: process.started_at(),
                    },
                };
                Some(ContainerStatus {
                    name: name.clone(),
                    image: slot.image.clone(),
                    restart_count: slot.runs.saturating_sub(1),
                    state,
                    last_termination: slot.last_termination.clone(),
                })
            })
            .collect()
    }

    pub fn container_status(&self, container: &str) -> Option<ContainerStatus> {
        self.container_statuses()
            .into_iter()
            .find(|status| status.name == container)
    }

    /// Sends `signal` to the container's process (PID 1 of its PID namespace, which ignores
    /// signals it has no handler for, SIGKILL and SIGSTOP excepted).
    pub fn signal_container(&self, container: &str, signal: Signal) -> Result<(), RuntimeError> {
        if self.process(container)?.signal(signal) {
            Ok(())
        } else {
            Err(RuntimeError::NotRunning(container.to_string()))
        }
    }

    /// What a command run inside the running container `config.name` takes from it: its
    /// process, and `config`'s user, groups, working directory and environment.
    pub fn exec_target(&self, config: &ContainerConfig) -> Result<ContainerExec, RuntimeError> {
        let process = self.process(&config.name)?;
        if process.termination().is_some() {
            return Err(RuntimeError::NotRunning(config.name.clone()));
        }
        let rule = self.runtime.images.resolve(&config.image)?;
        Ok(ContainerExec {
            container: config.name.clone(),
            pid: process.pid(),
            env: super::launch::container_env(rule, config, &self.hostname),
            run_as_user: config.run_as_user,
            run_as_group: config.run_as_group,
            supplemental_groups: config.supplemental_groups.clone(),
            working_dir: config.working_dir.clone(),
        })
    }

    /// A command that runs inside the running container `config.name` (see
    /// [`PodSandbox::exec_target`]), joined through the process's own pidfd. The caller spawns
    /// it and sets up its stdio.
    pub fn exec_command(
        &self,
        config: &ContainerConfig,
        command: &[String],
    ) -> Result<std::process::Command, RuntimeError> {
        let target = self.exec_target(config)?;
        let pidfd = self
            .process(&config.name)?
            .duplicate_pidfd()
            .map_err(|source| RuntimeError::Io {
                context: format!("exec in container {}", config.name),
                source,
            })?;
        target.command_with(pidfd, command)
    }

    /// Waits for the current run of `container` to end.
    pub async fn wait_container(&self, container: &str) -> Result<Termination, RuntimeError> {
        Ok(self.process(container)?.wait().await)
    }

    /// SIGTERM, `grace` to exit (`terminationGracePeriodSeconds`), then SIGKILL.
    pub async fn stop_container(
        &self,
        container: &str,
        grace: Duration,
    ) -> Result<Termination, RuntimeError> {
        Ok(self.process(container)?.stop(grace).await)
    }

    /// Stops every container at once, each with `grace`.
    pub async fn stop(&self, grace: Duration) {
        let processes: Vec<Arc<ContainerProcess>> = self
            .containers
            .lock()
            .expect("containers lock")
            .values()
            .filter_map(|slot| slot.current.clone())
            .collect();
        futures::future::join_all(processes.iter().map(|process| process.stop(grace))).await;
    }

    /// Node crash: every process killed at once, no grace.
    pub fn kill_all(&self) {
        let processes: Vec<Arc<ContainerProcess>> = self
            .containers
            .lock()
            .expect("containers lock")
            .values()
            .filter_map(|slot| slot.current.clone())
            .collect();
        for process in processes {
            process.kill_and_reap();
        }
    }

    /// Replaces the files of a secret/configMap/projected volume; running containers see the
    /// new set at once (atomically).
    pub fn refresh_files(&self, volume: &str, files: &[ProjectedFile]) -> Result<(), RuntimeError> {
        match self.volumes.get(volume) {
            Some(MountableVolume::Directory {
                path,
                read_only: true,
            }) if path.join("..data").exists() => Ok(write_projected(path, files, self.fs_group)?),
            _ => Err(RuntimeError::InvalidName {
                what: "files volume",
                name: volume.to_string(),
            }),
        }
    }

    fn log_path(&self, container: &str, previous: bool) -> Result<PathBuf, RuntimeError> {
        let runs = self
            .containers
            .lock()
            .expect("containers lock")
            .get(container)
            .map(|slot| slot.runs)
            .ok_or_else(|| RuntimeError::NoSuchContainer(container.to_string()))?;
        let run = if previous {
            runs.checked_sub(2)
        } else {
            runs.checked_sub(1)
        };
        run.map(|run| logs::run_log_path(&self.log_dir(container), run))
            .ok_or_else(|| RuntimeError::NoLog {
                container: container.to_string(),
                previous,
            })
    }

    /// The container's output, as `GET pods/{name}/log` returns it.
    pub fn read_log(&self, container: &str, options: &LogOptions) -> Result<Vec<u8>, RuntimeError> {
        let path = self.log_path(container, options.previous)?;
        let log = std::fs::read(&path).map_err(|source| RuntimeError::Io {
            context: format!("read the log of container {container}"),
            source,
        })?;
        Ok(logs::render(&log, options))
    }

    /// `follow=true`: the output so far, then new output until the run ends.
    pub fn follow_log(
        &self,
        container: &str,
        options: LogOptions,
    ) -> Result<ReceiverStream<std::io::Result<Bytes>>, RuntimeError> {
        let path = self.log_path(container, options.previous)?;
        let process = self.process(container)?;
        let mut terminated = process.subscribe();
        let (ended_sender, ended) =
            tokio::sync::watch::channel(options.previous || process.termination().is_some());
        tokio::spawn(async move {
            let _ = terminated.wait_for(Option::is_some).await;
            let _ = ended_sender.send(true);
        });
        Ok(logs::follow(path, options, ended))
    }
}

impl Drop for PodSandbox {
    fn drop(&mut self) {
        self.kill_all();
        self.containers.lock().expect("containers lock").clear();
        self.volumes.clear();
        if let Err(error) = super::state_dir::remove_tree(&self.dir) {
            tracing::warn!(pod = %self.uid, %error, "Pod directory left behind");
        }
    }
}
