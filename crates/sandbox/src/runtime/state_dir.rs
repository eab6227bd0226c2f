//! The runtime's state directory: one per runtime, removed when it is dropped, and removed by
//! the next runtime if its owner was killed (an flock on `.owner` marks it as alive).

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};

const PREFIX: &str = "kube-sandbox-";
const OWNER_LOCK: &str = ".owner";

/// A directory owned by this process while it lives.
#[derive(Debug)]
pub struct StateDir {
    path: PathBuf,
    _owner: Flock<File>,
}

impl StateDir {
    /// A fresh directory under `root` (created if needed). Directories under `root` left by
    /// processes that died are removed first.
    pub fn create(root: &Path) -> io::Result<Self> {
        std::fs::create_dir_all(root)?;
        sweep_abandoned(root);
        let path = root.join(format!(
            "{PREFIX}{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir(&path)?;
        let owner = File::create(path.join(OWNER_LOCK))?;
        let owner = Flock::lock(owner, FlockArg::LockExclusiveNonblock)
            .map_err(|(_, errno)| io::Error::from(errno))?;
        Ok(Self {
            path,
            _owner: owner,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for StateDir {
    fn drop(&mut self) {
        if let Err(error) = remove_tree(&self.path) {
            tracing::warn!(path = %self.path.display(), %error, "state directory left behind");
        }
    }
}

/// Removes directories under `root` whose owner lock nobody holds.
fn sweep_abandoned(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let is_ours = entry.file_name().to_string_lossy().starts_with(PREFIX);
        let Ok(owner) = File::open(path.join(OWNER_LOCK)) else {
            continue;
        };
        if is_ours && let Ok(lock) = Flock::lock(owner, FlockArg::LockExclusiveNonblock) {
            tracing::info!(path = %path.display(), "removing the state of a sandbox that died");
            drop(lock);
            if let Err(error) = remove_tree(&path) {
                tracing::warn!(path = %path.display(), %error, "could not remove abandoned state");
            }
        }
    }
}

/// `rm -rf`, refused if anything is mounted below `path` in this mount namespace: deleting
/// through a bind mount would delete the machine's files.
pub(crate) fn remove_tree(path: &Path) -> io::Result<()> {
    if let Some(mount_point) = mounts_below(path)?.into_iter().next() {
        return Err(io::Error::other(format!(
            "{} is mounted inside {}; not removing it",
            mount_point.display(),
            path.display()
        )));
    }
    match std::fs::remove_dir_all(path) {
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// Mount points at or below `path`, from `/proc/self/mountinfo`.
pub(crate) fn mounts_below(path: &Path) -> io::Result<Vec<PathBuf>> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")?;
    Ok(mount_points(&mountinfo)
        .into_iter()
        .filter(|mount_point| mount_point.starts_with(path))
        .collect())
}

/// The mount points (fifth field) of a mountinfo text, with octal escapes decoded.
pub(crate) fn mount_points(mountinfo: &str) -> Vec<PathBuf> {
    mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|field| PathBuf::from(unescape_octal(field)))
        .collect()
}

fn unescape_octal(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let escaped = bytes
            .get(index + 1..index + 4)
            .filter(|_| bytes[index] == b'\\')
            .and_then(|digits| std::str::from_utf8(digits).ok())
            .and_then(|digits| u8::from_str_radix(digits, 8).ok());
        if let Some(value) = escaped {
            out.push(value);
            index += 4;
        } else {
            out.push(bytes[index]);
            index += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_mount_points_are_decoded() {
        let text = "36 35 98:0 /mnt1 /mnt/with\\040space rw,noatime master:1 - ext3 /dev/root rw\n\
                    40 36 0:5 / /proc rw - proc proc rw\n";
        assert_eq!(
            mount_points(text),
            vec![PathBuf::from("/mnt/with space"), PathBuf::from("/proc")]
        );
    }
}
