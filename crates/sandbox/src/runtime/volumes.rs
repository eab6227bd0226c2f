//! Volume sources on the machine: PersistentVolumeClaims as directories that outlive Pods (with
//! the faults tests inflict on them), files of secret/configMap/projected volumes written
//! atomically, and `fsGroup` ownership.

use std::fs::{self, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Component, Path, PathBuf};

/// Errors of volume sources.
#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    #[error("invalid {what} {name:?}: {reason}")]
    InvalidName {
        what: &'static str,
        name: String,
        reason: &'static str,
    },
    #[error("PersistentVolumeClaim {namespace}/{claim} has no volume")]
    NoSuchClaim { namespace: String, claim: String },
    #[error("volume {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> VolumeError + '_ {
    move |source| VolumeError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// PersistentVolumeClaims as directories under the runtime's state, bound as soon as they are
/// asked for, kept across Pods until the claim is deleted.
#[derive(Clone, Debug)]
pub struct PersistentVolumeStore {
    root: PathBuf,
}

impl PersistentVolumeStore {
    pub(crate) fn new(root: PathBuf) -> io::Result<Self> {
        fs::create_dir_all(&root)?;
        Ok(Self { root })
    }

    /// Where the claim's data lives (whether or not it exists yet).
    pub fn claim_path(&self, namespace: &str, claim: &str) -> Result<PathBuf, VolumeError> {
        check_object_name("namespace", namespace)?;
        check_object_name("PersistentVolumeClaim name", claim)?;
        Ok(self.root.join(namespace).join(claim))
    }

    /// Binds the claim: creates its directory (world-writable, as local provisioners do, so
    /// any `runAsUser` can write) unless it exists.
    pub fn provision(&self, namespace: &str, claim: &str) -> Result<PathBuf, VolumeError> {
        let path = self.claim_path(namespace, claim)?;
        if !path.is_dir() {
            fs::create_dir_all(&path).map_err(io_error(&path))?;
            fs::set_permissions(&path, fs::Permissions::from_mode(0o777))
                .map_err(io_error(&path))?;
        }
        Ok(path)
    }

    /// The directory of an existing claim.
    pub fn existing(&self, namespace: &str, claim: &str) -> Result<PathBuf, VolumeError> {
        let path = self.claim_path(namespace, claim)?;
        if path.is_dir() {
            Ok(path)
        } else {
            Err(VolumeError::NoSuchClaim {
                namespace: namespace.into(),
                claim: claim.into(),
            })
        }
    }

    /// The claim is deleted: its data goes.
    pub fn delete(&self, namespace: &str, claim: &str) -> Result<(), VolumeError> {
        let path = self.claim_path(namespace, claim)?;
        super::state_dir::remove_tree(&path).map_err(io_error(&path))
    }

    /// Fault: the disk is replaced; the claim stays bound but its directory is empty.
    pub fn wipe(&self, namespace: &str, claim: &str) -> Result<(), VolumeError> {
        let path = self.existing(namespace, claim)?;
        for entry in fs::read_dir(&path).map_err(io_error(&path))? {
            let entry = entry.map_err(io_error(&path))?;
            let child = entry.path();
            let removed = if entry.file_type().map_err(io_error(&child))?.is_dir() {
                super::state_dir::remove_tree(&child)
            } else {
                fs::remove_file(&child)
            };
            removed.map_err(io_error(&child))?;
        }
        Ok(())
    }

    /// Fault: bit rot. Inverts the first 8 KiB of every regular file and 512 bytes of every
    /// further 64 KiB, which breaks the meta pages and checksummed records of an etcd data
    /// directory. Returns how many files were changed.
    pub fn corrupt(&self, namespace: &str, claim: &str) -> Result<usize, VolumeError> {
        let path = self.existing(namespace, claim)?;
        let mut changed = 0;
        for file in regular_files(&path).map_err(io_error(&path))? {
            if corrupt_file(&file).map_err(io_error(&file))? {
                changed += 1;
            }
        }
        Ok(changed)
    }
}

fn regular_files(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        if kind.is_dir() {
            files.extend(regular_files(&entry.path())?);
        } else if kind.is_file() {
            files.push(entry.path());
        }
    }
    files.sort();
    Ok(files)
}

fn corrupt_file(path: &Path) -> io::Result<bool> {
    let mut file = OpenOptions::new().read(true).write(true).open(path)?;
    let length = file.metadata()?.len();
    if length == 0 {
        return Ok(false);
    }
    let mut stretches = vec![(0u64, 8192u64.min(length))];
    let mut offset = 65536;
    while offset < length {
        stretches.push((offset, 512.min(length - offset)));
        offset += 65536;
    }
    for (start, size) in stretches {
        let mut buffer = vec![0u8; size as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut buffer)?;
        buffer.iter_mut().for_each(|byte| *byte = !*byte);
        file.seek(SeekFrom::Start(start))?;
        file.write_all(&buffer)?;
    }
    file.sync_all()?;
    Ok(true)
}

/// A Kubernetes object name used as a path component: lowercase letters, digits, `-` and `.`,
/// starting and ending with a letter or digit.
fn check_object_name(what: &'static str, name: &str) -> Result<(), VolumeError> {
    let invalid = |reason| VolumeError::InvalidName {
        what,
        name: name.into(),
        reason,
    };
    if name.is_empty() || name.len() > 253 {
        return Err(invalid("must have 1 to 253 characters"));
    }
    let alphanumeric = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    if !name
        .chars()
        .all(|c| alphanumeric(c) || c == '-' || c == '.')
    {
        return Err(invalid(
            "only lowercase letters, digits, '-' and '.' are allowed",
        ));
    }
    if !name.starts_with(alphanumeric) || !name.ends_with(alphanumeric) {
        return Err(invalid("must start and end with a letter or digit"));
    }
    Ok(())
}

/// One file of a secret, configMap, downward API or projected volume.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProjectedFile {
    /// Relative path inside the volume (`items[].path`, or the key).
    pub path: String,
    pub content: Vec<u8>,
    /// `items[].mode` or the volume's `defaultMode` (0644 when unset).
    pub mode: u32,
}

/// Writes `files` into `dir` the way the kubelet's atomic writer does: the data goes into a
/// new timestamped directory, `..data` is switched to it with one rename, and each top-level
/// entry is a symlink through `..data`. A reader sees the old set or the new set, never a mix.
pub(crate) fn write_projected(
    dir: &Path,
    files: &[ProjectedFile],
    fs_group: Option<u32>,
) -> Result<(), VolumeError> {
    let mut top_level = std::collections::BTreeSet::new();
    for file in files {
        let first = check_projected_path(&file.path)?;
        top_level.insert(first);
    }
    fs::create_dir_all(dir).map_err(io_error(dir))?;
    let version = format!("..{}", jiff::Timestamp::now().as_nanosecond());
    let version_dir = dir.join(&version);
    fs::create_dir(&version_dir).map_err(io_error(&version_dir))?;
    for file in files {
        let path = version_dir.join(&file.path);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(io_error(parent))?;
        }
        fs::write(&path, &file.content).map_err(io_error(&path))?;
        let mut mode = file.mode & 0o7777;
        if let Some(gid) = fs_group {
            std::os::unix::fs::lchown(&path, None, Some(gid)).map_err(io_error(&path))?;
            mode |= 0o040;
        }
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).map_err(io_error(&path))?;
    }
    if let Some(gid) = fs_group {
        apply_fs_group(&version_dir, gid, true).map_err(io_error(&version_dir))?;
    }
    let staging = dir.join("..data_tmp");
    let _ = fs::remove_file(&staging);
    symlink(&version, &staging).map_err(io_error(&staging))?;
    let data = dir.join("..data");
    let previous = fs::read_link(&data).ok();
    fs::rename(&staging, &data).map_err(io_error(&data))?;
    for name in &top_level {
        let link = dir.join(name);
        if fs::symlink_metadata(&link).is_err() {
            symlink(Path::new("..data").join(name), &link).map_err(io_error(&link))?;
        }
    }
    // Entries of the old version that are gone from the new one, and the old version itself.
    for entry in fs::read_dir(dir).map_err(io_error(dir))?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with("..") && !top_level.contains(&name) {
            let _ = fs::remove_file(entry.path());
        }
    }
    if let Some(previous) = previous
        && previous != Path::new(&version)
    {
        let old = dir.join(previous);
        super::state_dir::remove_tree(&old).map_err(io_error(&old))?;
    }
    Ok(())
}

/// A projected file path is relative, without `..`, and not hidden behind `..`-names.
fn check_projected_path(path: &str) -> Result<String, VolumeError> {
    let invalid = |reason| VolumeError::InvalidName {
        what: "file path",
        name: path.into(),
        reason,
    };
    if path.is_empty() || path.starts_with("..") {
        return Err(invalid("must not be empty or start with '..'"));
    }
    let mut components = Path::new(path).components();
    let first = match components.next() {
        Some(Component::Normal(first)) => first.to_string_lossy().into_owned(),
        _ => return Err(invalid("must be a relative path")),
    };
    if components.any(|component| !matches!(component, Component::Normal(_))) {
        return Err(invalid("must not contain '..' or '.'"));
    }
    Ok(first)
}

/// Gives a volume to `gid` as the kubelet does for `fsGroup`: group ownership, group read and
/// write (read only for read-only volumes), and set-group-ID directories so new files inherit.
pub(crate) fn apply_fs_group(path: &Path, gid: u32, read_only: bool) -> io::Result<()> {
    let meta = fs::symlink_metadata(path)?;
    if meta.file_type().is_symlink() {
        return Ok(());
    }
    if meta.gid() != gid {
        std::os::unix::fs::lchown(path, None, Some(gid))?;
    }
    let mut mask = if read_only { 0o440 } else { 0o660 };
    if meta.is_dir() {
        mask |= 0o2000 | 0o110;
    } else if meta.mode() & 0o100 != 0 {
        mask |= 0o010;
    }
    let mode = meta.mode() & 0o7777;
    if mode | mask != mode {
        fs::set_permissions(path, fs::Permissions::from_mode(mode | mask))?;
    }
    if meta.is_dir() {
        for entry in fs::read_dir(path)? {
            apply_fs_group(&entry?.path(), gid, read_only)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_names_are_checked() {
        assert!(check_object_name("claim", "data-etcd-0").is_ok());
        assert!(check_object_name("claim", "a.b").is_ok());
        assert!(check_object_name("claim", "../etc").is_err());
        assert!(check_object_name("claim", "Data").is_err());
        assert!(check_object_name("claim", "-a").is_err());
        assert!(check_object_name("claim", "").is_err());
    }

    #[test]
    fn projected_paths_are_checked() {
        assert_eq!(check_projected_path("ca.crt").unwrap(), "ca.crt");
        assert_eq!(check_projected_path("dir/key").unwrap(), "dir");
        assert!(check_projected_path("..data").is_err());
        assert!(check_projected_path("/etc/passwd").is_err());
        assert!(check_projected_path("a/../../b").is_err());
    }

    #[test]
    fn projected_files_switch_atomically_and_drop_stale_entries() {
        let dir = tempfile::tempdir().unwrap();
        let file = |path: &str, content: &str| ProjectedFile {
            path: path.into(),
            content: content.as_bytes().to_vec(),
            mode: 0o644,
        };
        write_projected(
            dir.path(),
            &[file("token", "one"), file("ca.crt", "ca")],
            None,
        )
        .unwrap();
        assert_eq!(fs::read_to_string(dir.path().join("token")).unwrap(), "one");
        assert!(
            fs::symlink_metadata(dir.path().join("token"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        write_projected(dir.path(), &[file("token", "two")], None).unwrap();
        assert_eq!(fs::read_to_string(dir.path().join("token")).unwrap(), "two");
        assert!(!dir.path().join("ca.crt").exists());
        let versions = fs::read_dir(dir.path())
            .unwrap()
            .filter(|entry| {
                let name = entry
                    .as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .into_owned();
                name.starts_with("..") && name != "..data"
            })
            .count();
        assert_eq!(versions, 1, "the old version is removed");
    }

    #[test]
    fn corruption_changes_every_file_and_wipe_empties() {
        let dir = tempfile::tempdir().unwrap();
        let store = PersistentVolumeStore::new(dir.path().to_path_buf()).unwrap();
        let claim = store.provision("default", "data-0").unwrap();
        fs::create_dir(claim.join("member")).unwrap();
        fs::write(claim.join("member/db"), vec![7u8; 70_000]).unwrap();
        fs::write(claim.join("empty"), b"").unwrap();
        assert_eq!(store.corrupt("default", "data-0").unwrap(), 1);
        let data = fs::read(claim.join("member/db")).unwrap();
        assert_eq!(data[0], !7u8);
        assert_eq!(data[8192], 7);
        assert_eq!(data[65536], !7u8);
        store.wipe("default", "data-0").unwrap();
        assert_eq!(fs::read_dir(&claim).unwrap().count(), 0);
        store.delete("default", "data-0").unwrap();
        assert!(matches!(
            store.existing("default", "data-0"),
            Err(VolumeError::NoSuchClaim { .. })
        ));
    }
}
