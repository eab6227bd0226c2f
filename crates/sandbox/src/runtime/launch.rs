//! From a [`ContainerConfig`] and its image to a [`ChildPlan`]: program and arguments, the
//! environment, user and groups, the root layout with image files and volumes.

use std::ffi::CString;
use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::RuntimeError;
use super::env::expand_all;
use super::image::ImageRule;
use super::rootfs::{HostEntry, MountSource, MountSpec, RootLayout, image_system_dirs, plan_root};
use super::spawn::ChildPlan;
use super::spec::ContainerConfig;

/// Capabilities a container keeps unless privileged: Docker's default set without `MKNOD`
/// (there is no device cgroup to stop a node being made for the machine's disk).
const KEPT_CAPABILITIES: &[u32] = &[
    0,  // CHOWN
    1,  // DAC_OVERRIDE
    3,  // FOWNER
    4,  // FSETID
    5,  // KILL
    6,  // SETGID
    7,  // SETUID
    8,  // SETPCAP
    10, // NET_BIND_SERVICE
    13, // NET_RAW
    18, // SYS_CHROOT
    29, // AUDIT_WRITE
    31, // SETFCAP
];

/// Capabilities to drop from the bounding set: every one the kernel knows but the kept ones.
fn dropped_capabilities(privileged: bool) -> Vec<u32> {
    if privileged {
        return Vec::new();
    }
    let last = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|text| text.trim().parse::<u32>().ok())
        .unwrap_or(40);
    (0..=last)
        .filter(|capability| !KEPT_CAPABILITIES.contains(capability))
        .collect()
}

/// Docker's default `PATH`, for images that set none.
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// A volume as a container can mount it.
pub(crate) enum MountableVolume {
    Directory {
        path: PathBuf,
        read_only: bool,
    },
    /// A detached mount: each container attaches its own clone.
    Memory(super::sys::DetachedMount),
}

/// The Pod-level facts a launch needs.
pub(crate) struct PodFacts<'a> {
    pub(crate) root: &'a Path,
    pub(crate) hostname: &'a str,
    pub(crate) network: std::os::fd::RawFd,
    pub(crate) system_dirs: &'a [(String, HostEntry)],
    pub(crate) etc_files: &'a [(String, PathBuf)],
    pub(crate) fs_group: Option<u32>,
}

/// A plan and the descriptors it refers to, which must stay open until the child has exec'd.
pub(crate) struct Launch {
    pub(crate) plan: ChildPlan,
    pub(crate) stdout: OwnedFd,
    pub(crate) stderr: OwnedFd,
    /// Child ends of the pipes, `/dev/null`, memory-volume clones.
    pub(crate) held: Vec<OwnedFd>,
}

/// The final environment: the image's, then `HOSTNAME`, `HOME` and `PATH` defaults, then the
/// container's (which wins).
pub(crate) fn container_env(
    rule: &ImageRule,
    config: &ContainerConfig,
    hostname: &str,
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = rule
        .env
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let set = |env: &mut Vec<(String, String)>, name: &str, value: String| match env
        .iter_mut()
        .find(|(key, _)| key == name)
    {
        Some(entry) => entry.1 = value,
        None => env.push((name.to_string(), value)),
    };
    set(&mut env, "HOSTNAME", hostname.to_string());
    for (name, value) in &config.env {
        set(&mut env, name, value.clone());
    }
    if !env.iter().any(|(key, _)| key == "PATH") {
        env.push(("PATH".into(), DEFAULT_PATH.into()));
    }
    if !env.iter().any(|(key, _)| key == "HOME") {
        let home = if config.run_as_user.unwrap_or(0) == 0 {
            "/root"
        } else {
            "/"
        };
        env.push(("HOME".into(), home.into()));
    }
    env
}

/// Where `execve` looks for `program`: itself if it has a `/`, else each `PATH` entry.
pub(crate) fn exec_candidates(program: &str, env: &[(String, String)]) -> Vec<String> {
    if program.contains('/') {
        return vec![program.to_string()];
    }
    let path = env
        .iter()
        .rev()
        .find(|(key, _)| key == "PATH")
        .map_or(DEFAULT_PATH, |(_, value)| value.as_str());
    path.split(':')
        .filter(|dir| !dir.is_empty())
        .map(|dir| format!("{}/{program}", dir.trim_end_matches('/')))
        .collect()
}

fn cstring(what: &str, text: &str) -> Result<CString, RuntimeError> {
    CString::new(text).map_err(|_| RuntimeError::InvalidContainer {
        container: what.to_string(),
        reason: format!("{text:?} contains a NUL byte"),
    })
}

/// Prepares the launch of `config` from `rule` with the Pod's `volumes`.
pub(crate) fn prepare(
    config: &ContainerConfig,
    rule: &ImageRule,
    pod: &PodFacts<'_>,
    volumes: &std::collections::BTreeMap<String, MountableVolume>,
) -> Result<Launch, RuntimeError> {
    let invalid = |reason: String| RuntimeError::InvalidContainer {
        container: config.name.clone(),
        reason,
    };
    let env = container_env(rule, config, pod.hostname);
    let argv = rule.argv(
        &expand_all(&config.command, &env),
        &expand_all(&config.args, &env),
    );
    let Some(program) = argv.first() else {
        return Err(invalid(format!(
            "no command: the container sets none and the image map gives image {:?} no entrypoint",
            config.image
        )));
    };
    let mut held = Vec::new();
    let mut mounts = Vec::new();
    for mount in &config.volume_mounts {
        if super::rootfs::container_path(&mount.mount_path)? == Path::new("/") {
            return Err(invalid(format!(
                "volumeMount {:?} at / would hide the container's root",
                mount.name
            )));
        }
        let volume = volumes.get(&mount.name).ok_or_else(|| {
            invalid(format!(
                "volumeMount {:?} names no volume of the Pod",
                mount.name
            ))
        })?;
        let source = match (volume, &mount.sub_path) {
            (MountableVolume::Directory { path, .. }, None) => MountSource::Directory(path.clone()),
            (MountableVolume::Directory { path, .. }, Some(sub_path)) => {
                let relative = super::rootfs::container_path(&format!("/{sub_path}"))?;
                let source = path.join(relative.strip_prefix("/").unwrap_or(&relative));
                if source.is_file() {
                    MountSource::File(source)
                } else {
                    std::fs::create_dir_all(&source)
                        .map_err(|error| invalid(format!("subPath {sub_path}: {error}")))?;
                    MountSource::Directory(source)
                }
            }
            (MountableVolume::Memory(detached), None) => {
                let clone = detached
                    .clone_tree()
                    .map_err(|error| invalid(format!("memory volume {}: {error}", mount.name)))?;
                let raw = clone.as_raw_fd();
                held.push(clone);
                MountSource::Detached(raw)
            }
            (MountableVolume::Memory(_), Some(_)) => {
                return Err(invalid(format!(
                    "subPath on memory volume {:?} is not supported",
                    mount.name
                )));
            }
        };
        let volume_read_only = matches!(
            volume,
            MountableVolume::Directory {
                read_only: true,
                ..
            }
        );
        mounts.push(MountSpec {
            container_path: mount.mount_path.clone(),
            source,
            read_only: mount.read_only || volume_read_only,
        });
    }
    let image_files = rule
        .files
        .iter()
        .map(|(image_path, host_path)| MountSpec {
            container_path: image_path.clone(),
            source: if host_path.is_dir() {
                MountSource::Directory(host_path.clone())
            } else {
                MountSource::File(host_path.clone())
            },
            read_only: true,
        })
        .collect();
    let working_dir = config
        .working_dir
        .clone()
        .or_else(|| rule.working_dir.clone())
        .unwrap_or_else(|| "/".into());
    // A rule with an unpacked image root runs on it instead of the machine's directories.
    let image_dirs = match &rule.rootfs {
        Some(rootfs) => Some(
            image_system_dirs(rootfs).map_err(|source| RuntimeError::Io {
                context: format!("read the image root {}", rootfs.display()),
                source,
            })?,
        ),
        None => None,
    };
    let steps = plan_root(RootLayout {
        root: pod.root,
        system_dirs: image_dirs.as_deref().unwrap_or(pod.system_dirs),
        system_source: rule.rootfs.as_deref(),
        etc_files: pod.etc_files,
        image_files,
        volumes: mounts,
        working_dir: &working_dir,
    })?;

    let io = |error: std::io::Error| RuntimeError::Io {
        context: format!("prepare container {}", config.name),
        source: error,
    };
    let (stdout, stdout_child) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| io(e.into()))?;
    let (stderr, stderr_child) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| io(e.into()))?;
    let stdin = OwnedFd::from(File::open("/dev/null").map_err(io)?);
    let mut groups: Vec<libc::gid_t> = config.supplemental_groups.clone();
    groups.extend(pod.fs_group);
    groups.sort_unstable();
    groups.dedup();
    let plan = ChildPlan {
        netns: pod.network,
        hostname: cstring(&config.name, pod.hostname)?,
        steps,
        root: CString::new(pod.root.as_os_str().as_bytes())
            .map_err(|_| invalid("root path has a NUL byte".into()))?,
        workdir: cstring(&config.name, &working_dir)?,
        user: config.run_as_user.unwrap_or(0),
        group: config.run_as_group.unwrap_or(0),
        groups,
        stdin: stdin.as_raw_fd(),
        stdout: stdout_child.as_raw_fd(),
        stderr: stderr_child.as_raw_fd(),
        programs: exec_candidates(program, &env)
            .iter()
            .map(|candidate| cstring(&config.name, candidate))
            .collect::<Result<_, _>>()?,
        argv: argv
            .iter()
            .map(|arg| cstring(&config.name, arg))
            .collect::<Result<_, _>>()?,
        env: env
            .iter()
            .map(|(key, value)| cstring(&config.name, &format!("{key}={value}")))
            .collect::<Result<_, _>>()?,
        drop_capabilities: dropped_capabilities(config.privileged),
    };
    held.extend([stdin, stdout_child, stderr_child]);
    Ok(Launch {
        plan,
        stdout,
        stderr,
        held,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule() -> ImageRule {
        let map = super::super::image::ImageMap::from_yaml(
            "images:\n  - image: app\n    entrypoint: [app]\n    env: {PATH: /opt/bin, MODE: image}\n",
            Path::new("/"),
        )
        .unwrap();
        map.rules()[0].clone()
    }

    #[test]
    fn container_env_overrides_the_image() {
        let config = ContainerConfig {
            env: vec![("MODE".into(), "pod".into())],
            run_as_user: Some(1000),
            ..Default::default()
        };
        let env = container_env(&rule(), &config, "web-0");
        assert!(env.contains(&("MODE".into(), "pod".into())));
        assert!(env.contains(&("PATH".into(), "/opt/bin".into())));
        assert!(env.contains(&("HOSTNAME".into(), "web-0".into())));
        assert!(env.contains(&("HOME".into(), "/".into())));
    }

    #[test]
    fn programs_are_searched_in_path() {
        let env = vec![("PATH".to_string(), "/usr/local/bin:/bin/".to_string())];
        assert_eq!(
            exec_candidates("etcd", &env),
            vec!["/usr/local/bin/etcd", "/bin/etcd"]
        );
        assert_eq!(exec_candidates("./run", &env), vec!["./run"]);
        assert_eq!(exec_candidates("sh", &[]).last().unwrap(), "/bin/sh");
    }
}
