//! Images as host binaries: a YAML file maps image references (a glob or a regex) to the host
//! files that stand for the image's content, with its entrypoint, command, environment and
//! working directory.
//!
//! ```yaml
//! images:
//!   - image: "quay.io/coreos/etcd:v3.5.*"        # `*` matches any run of characters
//!     entrypoint: [/usr/local/bin/etcd]
//!     files:                                      # image path: host path
//!       /usr/local/bin/etcd: /usr/local/lib/etcd-3.5.1/etcd
//!       /usr/local/bin/etcdctl: /usr/local/lib/etcd-3.5.1/etcdctl
//!   - imageRegex: '^registry\.k8s\.io/etcd:3\.4\.\d+(-\d+)?$'
//!     entrypoint: [/usr/local/bin/etcd]
//!     files:
//!       /usr/local/bin/etcd: /usr/bin/etcd
//!   - image: "ghcr.io/etcd-operator-rs/etcd-operator:*"
//!     rootfs: /var/lib/images/etcd-operator/rootfs  # an unpacked OCI image (umoci unpack)
//!     entrypoint: [/usr/local/bin/etcd-operator]
//! ```
//!
//! A rule with `rootfs` runs its containers on that directory instead of the machine's system
//! directories: the container sees the image's files only (read-only), so an image that lacks
//! a library its program needs fails to start as it would on a real node.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use regex::Regex;

/// The image map; the first rule that matches an image wins.
#[derive(Clone, Debug, Default)]
pub struct ImageMap {
    rules: Vec<ImageRule>,
    source: Option<PathBuf>,
}

/// One image (or family of images) and the host files that stand for it.
#[derive(Clone, Debug)]
pub struct ImageRule {
    pattern: Regex,
    pattern_text: String,
    /// Image paths (absolute) to host files or directories, bound read-only.
    pub files: BTreeMap<String, PathBuf>,
    /// An unpacked image root filesystem to run on instead of the machine's `/usr`, `/lib`...
    pub rootfs: Option<PathBuf>,
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub working_dir: Option<String>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ImageMapFile {
    images: Vec<ImageRuleFile>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ImageRuleFile {
    image: Option<String>,
    image_regex: Option<String>,
    #[serde(default)]
    files: BTreeMap<String, PathBuf>,
    rootfs: Option<PathBuf>,
    #[serde(default)]
    entrypoint: Vec<String>,
    #[serde(default)]
    cmd: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    working_dir: Option<String>,
}

/// Why an image map could not be read, or an image not resolved.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("cannot read image map {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid image map{}: {reason}", .path.as_ref().map(|p| format!(" {}", p.display())).unwrap_or_default())]
    Invalid {
        path: Option<PathBuf>,
        reason: String,
    },
    /// The Pod stays in `ErrImagePull`/`ImagePullBackOff` with this message.
    #[error("image {image:?} is not mapped to host binaries{}: add a rule with `image:` or `imageRegex:` that matches it", .source_file.as_ref().map(|p| format!(" in {}", p.display())).unwrap_or_default())]
    NotMapped {
        image: String,
        source_file: Option<PathBuf>,
    },
    #[error(
        "image {image:?} maps {image_path} to {host_path}, which does not exist on this machine"
    )]
    MissingHostFile {
        image: String,
        image_path: String,
        host_path: PathBuf,
    },
}

impl ImageMap {
    /// Reads a map from a YAML file; relative host paths are taken from the file's directory.
    pub fn load(path: &Path) -> Result<Self, ImageError> {
        let text = std::fs::read_to_string(path).map_err(|source| ImageError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        let mut map = Self::from_yaml(&text, base).map_err(|error| match error {
            ImageError::Invalid { reason, .. } => ImageError::Invalid {
                path: Some(path.to_path_buf()),
                reason,
            },
            other => other,
        })?;
        map.source = Some(path.to_path_buf());
        Ok(map)
    }

    /// Parses a map; relative host paths are resolved against `base`.
    pub fn from_yaml(text: &str, base: &Path) -> Result<Self, ImageError> {
        let invalid = |reason: String| ImageError::Invalid { path: None, reason };
        let file: ImageMapFile =
            serde_yaml::from_str(text).map_err(|error| invalid(error.to_string()))?;
        let mut rules = Vec::new();
        for (index, rule) in file.images.into_iter().enumerate() {
            let (pattern, pattern_text) = match (rule.image, rule.image_regex) {
                (Some(glob), None) => (glob_to_regex(&glob), glob),
                (None, Some(regex)) => (regex.clone(), regex),
                _ => {
                    return Err(invalid(format!(
                        "rule {index}: set exactly one of `image` (a glob) or `imageRegex`"
                    )));
                }
            };
            let pattern = Regex::new(&pattern)
                .map_err(|error| invalid(format!("rule {index} ({pattern_text}): {error}")))?;
            let mut files = BTreeMap::new();
            for (image_path, host_path) in rule.files {
                if !image_path.starts_with('/') {
                    return Err(invalid(format!(
                        "rule {index} ({pattern_text}): image path {image_path:?} must be absolute"
                    )));
                }
                files.insert(image_path, base.join(host_path));
            }
            rules.push(ImageRule {
                pattern,
                pattern_text,
                files,
                rootfs: rule.rootfs.map(|dir| base.join(dir)),
                entrypoint: rule.entrypoint,
                cmd: rule.cmd,
                env: rule.env,
                working_dir: rule.working_dir,
            });
        }
        Ok(Self {
            rules,
            source: None,
        })
    }

    /// The sandbox's own map (`images.yaml` beside this file): etcd 3.4.x to 3.7.x images.
    pub fn builtin() -> Self {
        let mut map = Self::from_yaml(include_str!("images.yaml"), Path::new("/"))
            .expect("the built-in image map parses");
        map.source = Some(PathBuf::from("the built-in image map"));
        map
    }

    /// This map's rules, then those of `fallback` (e.g. a user's file before [`Self::builtin`]).
    pub fn then(mut self, fallback: ImageMap) -> Self {
        self.rules.extend(fallback.rules);
        self
    }

    pub fn rules(&self) -> &[ImageRule] {
        &self.rules
    }

    /// The rule for `image`, with its host files checked to exist.
    pub fn resolve(&self, image: &str) -> Result<&ImageRule, ImageError> {
        let rule = self
            .rules
            .iter()
            .find(|rule| rule.pattern.is_match(image))
            .ok_or_else(|| ImageError::NotMapped {
                image: image.to_string(),
                source_file: self.source.clone(),
            })?;
        if let Some(rootfs) = &rule.rootfs
            && !rootfs.is_dir()
        {
            return Err(ImageError::MissingHostFile {
                image: image.to_string(),
                image_path: "/ (rootfs)".into(),
                host_path: rootfs.clone(),
            });
        }
        for (image_path, host_path) in &rule.files {
            if !host_path.exists() {
                return Err(ImageError::MissingHostFile {
                    image: image.to_string(),
                    image_path: image_path.clone(),
                    host_path: host_path.clone(),
                });
            }
        }
        Ok(rule)
    }
}

impl ImageRule {
    /// The pattern as written in the map.
    pub fn pattern(&self) -> &str {
        &self.pattern_text
    }

    /// The program and arguments, as a container runtime combines a container's `command` and
    /// `args` with the image's entrypoint and command.
    pub fn argv(&self, command: &[String], args: &[String]) -> Vec<String> {
        if !command.is_empty() {
            return command.iter().chain(args).cloned().collect();
        }
        let tail = if args.is_empty() { &self.cmd } else { args };
        self.entrypoint.iter().chain(tail).cloned().collect()
    }
}

/// `*` matches any run of characters, `?` one; everything else literally; whole string.
fn glob_to_regex(glob: &str) -> String {
    let mut regex = String::from("^");
    for character in glob.chars() {
        match character {
            '*' => regex.push_str(".*"),
            '?' => regex.push('.'),
            other => regex.push_str(&regex::escape(&other.to_string())),
        }
    }
    regex.push('$');
    regex
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAP: &str = r#"
images:
  - image: "quay.io/coreos/etcd:v3.5.*"
    entrypoint: [/usr/local/bin/etcd]
    files:
      /usr/local/bin/etcd: /bin/sh
  - imageRegex: '^registry\.k8s\.io/etcd:3\.4\.\d+(-\d+)?$'
    entrypoint: [/usr/local/bin/etcd]
    cmd: [--help]
    env: {ETCD_UNSUPPORTED_ARCH: amd64}
    files:
      /usr/local/bin/etcd: relative/etcd
  - image: "example.com/missing:*"
    files:
      /bin/app: /nonexistent/app
"#;

    fn map() -> ImageMap {
        ImageMap::from_yaml(MAP, Path::new("/opt/images")).unwrap()
    }

    #[test]
    fn globs_and_regexes_match_whole_references() {
        let map = map();
        assert_eq!(
            map.resolve("quay.io/coreos/etcd:v3.5.17")
                .unwrap()
                .pattern(),
            "quay.io/coreos/etcd:v3.5.*"
        );
        assert!(matches!(
            map.resolve("quay.io/coreos/etcd:v3.6.0"),
            Err(ImageError::NotMapped { .. })
        ));
        assert!(matches!(
            map.resolve("xquay.io/coreos/etcd:v3.5.1"),
            Err(ImageError::NotMapped { .. })
        ));
        let rule = &map.rules()[1];
        assert!(rule.pattern.is_match("registry.k8s.io/etcd:3.4.23-0"));
        assert!(!rule.pattern.is_match("registry.k8s.io/etcd:3.5.0"));
        assert_eq!(
            rule.files["/usr/local/bin/etcd"],
            PathBuf::from("/opt/images/relative/etcd")
        );
    }

    #[test]
    fn builtin_map_covers_the_etcd_images_of_the_operator() {
        let map = ImageMap::builtin();
        let etcd = |image: &str| {
            map.rules()
                .iter()
                .find(|rule| rule.pattern.is_match(image))
                .map(|rule| rule.files["/usr/local/bin/etcd"].clone())
        };
        let lib = |v: &str| Some(PathBuf::from(format!("/usr/local/lib/etcd-{v}/etcd")));
        let digest = format!("@sha256:{}", "0123abcd".repeat(8));
        // A patch with binaries of its own runs them; any registry or mirror path, with or
        // without `v`, registry.k8s.io's `-N`, a digest after the tag.
        assert_eq!(etcd("quay.io/coreos/etcd:v3.5.1"), lib("3.5.1"));
        assert_eq!(etcd("registry.k8s.io/etcd:3.5.1-0"), lib("3.5.1"));
        assert_eq!(etcd("quay.io/coreos/etcd:v3.5.36"), lib("3.5.36"));
        assert_eq!(etcd("quay.io/coreos/etcd:v3.6.17"), lib("3.6.17"));
        assert_eq!(
            etcd(&format!("mirror.local/coreos/etcd:v3.6.17{digest}")),
            lib("3.6.17")
        );
        assert_eq!(etcd("gcr.io/etcd-development/etcd:v3.7.4"), lib("3.7.4"));
        // Another patch of a minor runs its newest built patch.
        assert_eq!(etcd("mirror.local/etcd:v3.5.17"), lib("3.5.36"));
        assert_eq!(etcd("registry.k8s.io/etcd:3.6.5-0"), lib("3.6.17"));
        assert_eq!(etcd("quay.io/coreos/etcd:v3.7.0"), lib("3.7.4"));
        assert_eq!(
            etcd("registry.k8s.io/etcd:3.4.23-0"),
            Some(PathBuf::from("/usr/bin/etcd"))
        );
        for unmapped in [
            "quay.io/coreos/etcd:v3.8.0",
            "quay.io/coreos/etcd:v3.3.27",
            "quay.io/coreos/etcd:v3.5.99",
            "quay.io/coreos/etcd:v3.5.37",
            "registry.k8s.io/etcd:3.6.18-0",
            "quay.io/coreos/etcd:v3.7.5",
            "quay.io/coreos/notetcd:v3.5.1",
            "quay.io/coreos/etcd:v3.6.17@sha256:short",
        ] {
            assert_eq!(etcd(unmapped), None, "{unmapped}");
        }
        let combined = map.then(ImageMap::from_yaml(MAP, Path::new("/opt")).unwrap());
        assert_eq!(combined.rules().len(), 8);
    }

    #[test]
    fn missing_host_files_and_unmapped_images_say_what_to_do() {
        let map = map();
        let missing = map
            .resolve("example.com/missing:1")
            .unwrap_err()
            .to_string();
        assert!(missing.contains("/nonexistent/app"), "{missing}");
        let unmapped = map.resolve("nginx").unwrap_err().to_string();
        assert!(unmapped.contains("add a rule"), "{unmapped}");
    }

    #[test]
    fn command_and_args_combine_like_a_container_runtime() {
        let map = map();
        let rule = &map.rules()[1];
        let strings = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            rule.argv(&[], &[]),
            strings(&["/usr/local/bin/etcd", "--help"])
        );
        assert_eq!(
            rule.argv(&[], &strings(&["--name=a"])),
            strings(&["/usr/local/bin/etcd", "--name=a"])
        );
        assert_eq!(
            rule.argv(&strings(&["sh", "-c"]), &strings(&["echo"])),
            strings(&["sh", "-c", "echo"])
        );
    }

    #[test]
    fn invalid_maps_are_rejected_with_the_rule() {
        let both = "images:\n  - image: a\n    imageRegex: b\n";
        assert!(
            ImageMap::from_yaml(both, Path::new("/"))
                .unwrap_err()
                .to_string()
                .contains("exactly one")
        );
        let relative = "images:\n  - image: a\n    files: {bin/x: /bin/sh}\n";
        assert!(
            ImageMap::from_yaml(relative, Path::new("/"))
                .unwrap_err()
                .to_string()
                .contains("absolute")
        );
        let unknown = "images:\n  - image: a\n    binary: /bin/sh\n";
        assert!(ImageMap::from_yaml(unknown, Path::new("/")).is_err());
    }
}
