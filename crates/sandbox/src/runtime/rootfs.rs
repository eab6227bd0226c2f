//! The layout of a container's root, as a list of setup steps the child performs: a tmpfs, the
//! machine's `/usr`, `/lib*`, `/bin`, `/sbin` read-only, the Pod's `/etc` files, `/dev` basics,
//! a fresh `/proc`, `/tmp`, the image's files at their image paths, and the volumes.

use std::collections::BTreeSet;
use std::ffi::CString;
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use super::spawn::SetupStep;

/// Directories of the machine that every container sees read-only.
pub(crate) const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin",
];

/// Files of the machine's `/etc` its programs need: Debian's alternatives (`awk` is a link
/// into it) and the dynamic linker's cache. Read-only.
pub(crate) const SYSTEM_ETC: &[&str] = &["/etc/alternatives", "/etc/ld.so.cache"];

/// Device nodes bound from the machine's `/dev`.
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

/// What a system directory is on this machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum HostEntry {
    Directory,
    File,
    /// A symbolic link, such as `/bin -> usr/bin` on a merged-/usr system.
    Symlink(PathBuf),
    Missing,
}

/// Looks at the machine's system directories and files (once per runtime).
pub(crate) fn host_system_dirs() -> Vec<(String, HostEntry)> {
    SYSTEM_DIRS
        .iter()
        .chain(SYSTEM_ETC)
        .map(|dir| {
            let entry = match std::fs::symlink_metadata(dir) {
                Ok(meta) if meta.file_type().is_symlink() => std::fs::read_link(dir)
                    .map(HostEntry::Symlink)
                    .unwrap_or(HostEntry::Missing),
                Ok(meta) if meta.is_dir() => HostEntry::Directory,
                Ok(meta) if meta.is_file() => HostEntry::File,
                _ => HostEntry::Missing,
            };
            (dir.to_string(), entry)
        })
        .collect()
}

/// Top-level entries of an image's root filesystem the runtime does not make itself, as the
/// system directories of a container that runs on that root instead of the machine's (`/proc`,
/// `/dev`, `/sys`, `/tmp` and `/run` are always the runtime's own).
pub(crate) fn image_system_dirs(rootfs: &Path) -> std::io::Result<Vec<(String, HostEntry)>> {
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(rootfs)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if ["proc", "dev", "sys", "tmp", "run"].contains(&name.as_str()) {
            continue;
        }
        let kind = entry.file_type()?;
        let host = if kind.is_symlink() {
            HostEntry::Symlink(std::fs::read_link(entry.path())?)
        } else if kind.is_dir() {
            HostEntry::Directory
        } else if kind.is_file() {
            HostEntry::File
        } else {
            continue;
        };
        entries.push((format!("/{name}"), host));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(entries)
}

/// Where a mount's content comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum MountSource {
    Directory(PathBuf),
    File(PathBuf),
    /// A detached mount (memory volume) cloned for this container.
    Detached(RawFd),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MountSpec {
    pub(crate) container_path: String,
    pub(crate) source: MountSource,
    pub(crate) read_only: bool,
}

/// The inputs of a container root.
pub(crate) struct RootLayout<'a> {
    /// The directory the root tmpfs is mounted on (inside the child's mount namespace only).
    pub(crate) root: &'a Path,
    pub(crate) system_dirs: &'a [(String, HostEntry)],
    /// Where the system directories come from: `None` for the machine's own (`/usr` from
    /// `/usr`), or an image's unpacked root filesystem (`/usr` from `<rootfs>/usr`).
    pub(crate) system_source: Option<&'a Path>,
    /// `/etc/hosts`, `/etc/resolv.conf`, `/etc/hostname`: container path and host file.
    pub(crate) etc_files: &'a [(String, PathBuf)],
    /// The image's files: container path and host file or directory, read-only.
    pub(crate) image_files: Vec<MountSpec>,
    pub(crate) volumes: Vec<MountSpec>,
    pub(crate) working_dir: &'a str,
}

/// A container path that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid container path {path:?}: {reason}")]
pub struct InvalidContainerPath {
    pub path: String,
    pub reason: &'static str,
}

/// Kubernetes' default `terminationMessagePath`.
pub(crate) const TERMINATION_LOG: &str = "/dev/termination-log";

/// Checks a container path (`mountPath`, `workingDir`, an image path) and normalizes it.
pub(crate) fn container_path(path: &str) -> Result<PathBuf, InvalidContainerPath> {
    let invalid = |reason| InvalidContainerPath {
        path: path.to_string(),
        reason,
    };
    if !path.starts_with('/') {
        return Err(invalid("must be absolute"));
    }
    let mut normal = PathBuf::from("/");
    for component in Path::new(path).components() {
        match component {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(part) => normal.push(part),
            Component::ParentDir => return Err(invalid("must not contain '..'")),
            Component::Prefix(_) => return Err(invalid("unsupported prefix")),
        }
    }
    let reserved = ["/proc", "/sys", "/dev"]
        .iter()
        .any(|top| normal.starts_with(top));
    // `/dev/termination-log`, Kubernetes' default `terminationMessagePath`, is a file the
    // runtime itself binds in.
    if reserved && !normal.starts_with("/dev/shm") && normal != Path::new(TERMINATION_LOG) {
        return Err(invalid(
            "is reserved for the runtime (/proc, /sys, /dev except /dev/shm)",
        ));
    }
    Ok(normal)
}

struct Planner<'a> {
    root: &'a Path,
    steps: Vec<SetupStep>,
    created: BTreeSet<PathBuf>,
}

impl Planner<'_> {
    fn host_path(&self, container: &Path) -> PathBuf {
        let relative = container.strip_prefix("/").unwrap_or(container);
        if relative.as_os_str().is_empty() {
            self.root.to_path_buf()
        } else {
            self.root.join(relative)
        }
    }

    fn host(&self, container: &Path) -> CString {
        cstring(&self.host_path(container))
    }

    fn mkdir(&mut self, container: &Path, mode: libc::mode_t) {
        if self.created.insert(container.to_path_buf()) {
            let path = self.host(container);
            self.steps.push(SetupStep::Mkdir { path, mode });
        }
    }

    /// `mkdir -p`, parents first.
    fn mkdir_all(&mut self, container: &Path) {
        let ancestors: Vec<PathBuf> = container
            .ancestors()
            .filter(|dir| *dir != Path::new("/"))
            .map(Path::to_path_buf)
            .collect();
        for dir in ancestors.into_iter().rev() {
            self.mkdir(&dir, 0o755);
        }
    }

    fn touch(&mut self, container: &Path) {
        if let Some(parent) = container.parent() {
            self.mkdir_all(parent);
        }
        if self.created.insert(container.to_path_buf()) {
            let path = self.host(container);
            self.steps.push(SetupStep::Touch { path });
        }
    }

    fn mount(&mut self, spec: &MountSpec, container: &Path) {
        let target = self.host(container);
        match &spec.source {
            MountSource::Directory(source) => {
                self.mkdir_all(container);
                self.steps.push(SetupStep::Bind {
                    source: cstring(source),
                    target: target.clone(),
                });
            }
            MountSource::File(source) => {
                self.touch(container);
                self.steps.push(SetupStep::Bind {
                    source: cstring(source),
                    target: target.clone(),
                });
            }
            MountSource::Detached(mount) => {
                self.mkdir_all(container);
                self.steps.push(SetupStep::Attach {
                    mount: *mount,
                    target: target.clone(),
                });
            }
        }
        if spec.read_only {
            self.steps.push(SetupStep::ReadOnly { target });
        }
    }
}

/// Rewrites a path under a symlinked system directory to its target (`/bin/sh` to
/// `/usr/bin/sh` where `/bin -> usr/bin`), so mount points are never reached through a link.
fn through_system_links(path: PathBuf, system_dirs: &[(String, HostEntry)]) -> PathBuf {
    for (dir, entry) in system_dirs {
        if let HostEntry::Symlink(target) = entry
            && let Ok(rest) = path.strip_prefix(dir)
        {
            let base = if target.is_absolute() {
                target.clone()
            } else {
                Path::new("/").join(target)
            };
            return base.join(rest);
        }
    }
    path
}

/// The setup steps for a container root.
pub(crate) fn plan_root(layout: RootLayout<'_>) -> Result<Vec<SetupStep>, InvalidContainerPath> {
    let mut planner = Planner {
        root: layout.root,
        steps: vec![SetupStep::PrivateMounts],
        created: BTreeSet::new(),
    };
    let root = planner.host(Path::new("/"));
    planner.steps.push(SetupStep::Tmpfs {
        target: root,
        options: c"mode=0755".to_owned(),
    });
    let mut mounts: Vec<(PathBuf, MountSpec)> = Vec::new();
    for spec in layout.image_files.into_iter().chain(layout.volumes) {
        let path = through_system_links(container_path(&spec.container_path)?, layout.system_dirs);
        mounts.push((path, spec));
    }
    // Parents before children, so a volume inside another volume lands on top of it.
    mounts.sort_by_key(|(path, _)| path.components().count());
    // Files the runtime places into the root: the image's, the volumes, and `/etc`'s (which is
    // a system directory when the container runs on an image's own root filesystem).
    let mut placed: Vec<PathBuf> = mounts.iter().map(|(path, _)| path.clone()).collect();
    placed.extend(layout.etc_files.iter().map(|(path, _)| PathBuf::from(path)));
    let source = |container: &Path| match layout.system_source {
        Some(root) => root.join(container.strip_prefix("/").unwrap_or(container)),
        None => container.to_path_buf(),
    };
    let mut overlays = Vec::new();
    for (dir, entry) in layout.system_dirs {
        let container = PathBuf::from(dir);
        match entry {
            // Something must be placed inside: a writable overlay on the system directory,
            // its upper layer in the root tmpfs, made read-only once everything is in place.
            HostEntry::Directory if placed.iter().any(|path| path.starts_with(&container)) => {
                plan_overlay(&mut planner, &container, &source(&container));
                overlays.push(planner.host(&container));
            }
            HostEntry::Directory => planner.mount(
                &MountSpec {
                    container_path: dir.clone(),
                    source: MountSource::Directory(source(&container)),
                    read_only: true,
                },
                &container,
            ),
            HostEntry::File => planner.mount(
                &MountSpec {
                    container_path: dir.clone(),
                    source: MountSource::File(source(&container)),
                    read_only: true,
                },
                &container,
            ),
            HostEntry::Symlink(target) => {
                let link = planner.host(&container);
                planner.created.insert(container);
                planner.steps.push(SetupStep::Symlink {
                    target: cstring(target),
                    link,
                });
            }
            HostEntry::Missing => {}
        }
    }
    plan_dev(&mut planner);
    planner.mkdir(Path::new("/proc"), 0o555);
    let proc = planner.host(Path::new("/proc"));
    planner.steps.push(SetupStep::Proc { target: proc });
    for (dir, mode) in [
        ("/tmp", 0o1777),
        ("/var", 0o755),
        ("/var/tmp", 0o1777),
        ("/run", 0o755),
        ("/root", 0o700),
    ] {
        planner.mkdir(Path::new(dir), mode);
    }
    for (container, host) in layout.etc_files {
        let spec = MountSpec {
            container_path: container.clone(),
            source: MountSource::File(host.clone()),
            read_only: false,
        };
        planner.mount(&spec, &container_path(container)?);
    }
    for (path, spec) in &mounts {
        planner.mount(spec, path);
    }
    let working_dir = through_system_links(container_path(layout.working_dir)?, layout.system_dirs);
    planner.mkdir_all(&working_dir);
    for target in overlays {
        planner.steps.push(SetupStep::ReadOnly { target });
    }
    Ok(planner.steps)
}

fn plan_overlay(planner: &mut Planner<'_>, dir: &Path, lower: &Path) {
    let name = dir.strip_prefix("/").unwrap_or(dir);
    let layers = Path::new("/.overlay").join(name);
    planner.mkdir(Path::new("/.overlay"), 0o700);
    planner.mkdir(&layers, 0o700);
    planner.mkdir(&layers.join("upper"), 0o755);
    planner.mkdir(&layers.join("work"), 0o700);
    planner.mkdir(dir, 0o755);
    let options = format!(
        "lowerdir={},upperdir={},workdir={}",
        lower.display(),
        planner.host_path(&layers.join("upper")).display(),
        planner.host_path(&layers.join("work")).display(),
    );
    let target = planner.host(dir);
    planner.steps.push(SetupStep::Overlay {
        target,
        options: cstring(Path::new(&options)),
    });
}

fn plan_dev(planner: &mut Planner<'_>) {
    let dev = Path::new("/dev");
    planner.mkdir(dev, 0o755);
    let target = planner.host(dev);
    planner.steps.push(SetupStep::Tmpfs {
        target,
        options: c"mode=0755,size=65536k".to_owned(),
    });
    for device in DEVICES {
        let container = dev.join(device);
        planner.mount(
            &MountSpec {
                container_path: container.display().to_string(),
                source: MountSource::File(container.clone()),
                read_only: false,
            },
            &container,
        );
    }
    for (name, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        let link = planner.host(&dev.join(name));
        planner.steps.push(SetupStep::Symlink {
            target: cstring(Path::new(target)),
            link,
        });
    }
    planner.mkdir(&dev.join("shm"), 0o1777);
    let shm = planner.host(&dev.join("shm"));
    planner.steps.push(SetupStep::Tmpfs {
        target: shm,
        options: c"mode=1777,size=65536k".to_owned(),
    });
}

pub(crate) fn cstring(path: &Path) -> CString {
    // Paths come from the runtime's own directories and validated container paths; a NUL
    // byte cannot appear in either (container paths with NUL are rejected by the API).
    CString::new(path.as_os_str().as_bytes()).unwrap_or_else(|_| c"/nonexistent".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(steps: &[SetupStep]) -> Vec<String> {
        steps.iter().map(SetupStep::describe).collect()
    }

    fn layout<'a>(volumes: Vec<MountSpec>, system: &'a [(String, HostEntry)]) -> RootLayout<'a> {
        RootLayout {
            root: Path::new("/state/pod/rootfs"),
            system_dirs: system,
            system_source: None,
            etc_files: &[],
            image_files: vec![MountSpec {
                container_path: "/usr/local/bin/etcd".into(),
                source: MountSource::File("/opt/etcd-3.5.1/etcd".into()),
                read_only: true,
            }],
            volumes,
            working_dir: "/var/lib/etcd",
        }
    }

    #[test]
    fn container_paths_are_checked() {
        assert_eq!(
            container_path("/var/lib//etcd/.").unwrap(),
            PathBuf::from("/var/lib/etcd")
        );
        assert!(container_path("var/lib").is_err());
        assert!(container_path("/var/../etc").is_err());
        assert!(container_path("/proc/self").is_err());
        assert!(container_path("/dev/fd/3").is_err());
        // The termination message file the runtime binds in.
        assert_eq!(
            container_path("/dev/termination-log").unwrap(),
            PathBuf::from("/dev/termination-log")
        );
        assert!(container_path("/dev/termination-log/x").is_err());
        assert_eq!(
            container_path("/dev/shm/x").unwrap(),
            PathBuf::from("/dev/shm/x")
        );
    }

    #[test]
    fn root_starts_private_and_binds_system_dirs_read_only() {
        let system = vec![
            ("/usr".to_string(), HostEntry::Directory),
            ("/bin".to_string(), HostEntry::Symlink("usr/bin".into())),
            ("/lib32".to_string(), HostEntry::Missing),
        ];
        let steps = render(&plan_root(layout(Vec::new(), &system)).unwrap());
        assert_eq!(
            steps[0],
            "make / private in the container's mount namespace"
        );
        assert_eq!(steps[1], "mount a tmpfs on /state/pod/rootfs");
        // The image places a file under /usr: an overlay, read-only at the end.
        assert_eq!(steps[2], "create directory /state/pod/rootfs/.overlay");
        assert!(steps.contains(&"mount an overlay of /usr on /state/pod/rootfs/usr".to_string()));
        assert!(steps.contains(&"link /state/pod/rootfs/bin -> usr/bin".to_string()));
        assert_eq!(
            steps.last().unwrap(),
            "make /state/pod/rootfs/usr read-only"
        );
        assert!(!steps.iter().any(|step| step.contains("lib32")));
        assert!(steps.contains(&"mount /proc on /state/pod/rootfs/proc".to_string()));
        assert!(steps.contains(&"bind /dev/null on /state/pod/rootfs/dev/null".to_string()));
        let binary = steps
            .iter()
            .position(|step| {
                step == "bind /opt/etcd-3.5.1/etcd on /state/pod/rootfs/usr/local/bin/etcd"
            })
            .expect("image binary bound");
        assert_eq!(
            steps[binary + 1],
            "make /state/pod/rootfs/usr/local/bin/etcd read-only"
        );
        assert!(steps.contains(&"create directory /state/pod/rootfs/var/lib/etcd".to_string()));
    }

    #[test]
    fn an_image_root_replaces_the_machines_directories() {
        let system = vec![
            ("/etc".to_string(), HostEntry::Directory),
            ("/lib".to_string(), HostEntry::Symlink("usr/lib".into())),
            ("/usr".to_string(), HostEntry::Directory),
            ("/home".to_string(), HostEntry::Directory),
        ];
        let etc = vec![("/etc/hosts".to_string(), PathBuf::from("/state/pod/hosts"))];
        let mut layout = layout(Vec::new(), &system);
        layout.system_source = Some(Path::new("/images/op/rootfs"));
        layout.etc_files = &etc;
        let steps = render(&plan_root(layout).unwrap());
        // Every directory comes from the image's root, none from the machine's.
        assert!(
            steps.contains(&"bind /images/op/rootfs/home on /state/pod/rootfs/home".to_string())
        );
        assert!(steps.contains(
            &"mount an overlay of /images/op/rootfs/usr on /state/pod/rootfs/usr".to_string()
        ));
        // /etc gets the Pod's hosts file inside, so it is an overlay of the image's /etc too.
        assert!(steps.contains(
            &"mount an overlay of /images/op/rootfs/etc on /state/pod/rootfs/etc".to_string()
        ));
        assert!(
            steps.contains(&"bind /state/pod/hosts on /state/pod/rootfs/etc/hosts".to_string())
        );
        assert!(steps.contains(&"link /state/pod/rootfs/lib -> usr/lib".to_string()));
        assert!(!steps.iter().any(|step| step.starts_with("bind /usr ")));
    }

    #[test]
    fn an_image_roots_entries_are_its_system_dirs() {
        let dir = tempfile::tempdir().unwrap();
        for sub in ["usr/bin", "etc", "proc", "tmp", "dev"] {
            std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        }
        std::os::unix::fs::symlink("usr/lib", dir.path().join("lib")).unwrap();
        std::fs::write(dir.path().join("marker"), "x").unwrap();
        assert_eq!(
            image_system_dirs(dir.path()).unwrap(),
            vec![
                ("/etc".to_string(), HostEntry::Directory),
                ("/lib".to_string(), HostEntry::Symlink("usr/lib".into())),
                ("/marker".to_string(), HostEntry::File),
                ("/usr".to_string(), HostEntry::Directory),
            ]
        );
    }

    #[test]
    fn system_dirs_without_image_files_are_bound_read_only() {
        let system = vec![("/lib".to_string(), HostEntry::Directory)];
        let steps = render(&plan_root(layout(Vec::new(), &system)).unwrap());
        assert_eq!(steps[2], "create directory /state/pod/rootfs/lib");
        assert_eq!(steps[3], "bind /lib on /state/pod/rootfs/lib");
        assert_eq!(steps[4], "make /state/pod/rootfs/lib read-only");
    }

    #[test]
    fn paths_through_symlinked_system_dirs_are_rewritten() {
        let system = vec![
            ("/usr".to_string(), HostEntry::Directory),
            ("/bin".to_string(), HostEntry::Symlink("usr/bin".into())),
        ];
        assert_eq!(
            through_system_links("/bin/sh".into(), &system),
            PathBuf::from("/usr/bin/sh")
        );
        assert_eq!(
            through_system_links("/binary".into(), &system),
            PathBuf::from("/binary")
        );
    }

    #[test]
    fn volumes_mount_parents_first() {
        let volumes = vec![
            MountSpec {
                container_path: "/data/nested".into(),
                source: MountSource::Directory("/state/inner".into()),
                read_only: true,
            },
            MountSpec {
                container_path: "/data".into(),
                source: MountSource::Directory("/state/outer".into()),
                read_only: false,
            },
        ];
        let steps = render(&plan_root(layout(volumes, &[])).unwrap());
        let outer = steps
            .iter()
            .position(|s| s == "bind /state/outer on /state/pod/rootfs/data");
        let inner = steps
            .iter()
            .position(|s| s == "bind /state/inner on /state/pod/rootfs/data/nested");
        assert!(outer.unwrap() < inner.unwrap());
        assert!(steps.contains(&"make /state/pod/rootfs/data/nested read-only".to_string()));
        assert!(!steps.contains(&"make /state/pod/rootfs/data read-only".to_string()));
    }

    #[test]
    fn bad_mount_paths_are_reported() {
        let volumes = vec![MountSpec {
            container_path: "/proc/sys".into(),
            source: MountSource::Directory("/x".into()),
            read_only: false,
        }];
        let error = plan_root(layout(volumes, &[])).err().unwrap();
        assert_eq!(error.path, "/proc/sys");
    }
}
