//! What ties the documentation to the rest of the repository (the site's own strict build,
//! broken links and anchors included, runs in `make test` through `make docs`):
//!
//! - every alert of `deploy/prometheus/alerts.yaml` links (`runbook_url`) to its page in
//!   `docs/runbooks/`, under the site's published address, and that page is about that alert;
//! - every example is shown on the examples page from its file, never as a copy;
//! - the README stays a five-minute read: under 8,000 characters, with its status and support
//!   matrix.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo_root().join(path))
        .unwrap_or_else(|e| panic!("reading {path}: {e}"))
}

fn yaml(path: &str) -> Value {
    serde_yaml::from_str(&read(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `site_url` of mkdocs.yml: where the runbooks are published.
fn site_url() -> String {
    // mkdocs.yml may use Python tags elsewhere; site_url is a plain line.
    read("mkdocs.yml")
        .lines()
        .find_map(|l| l.strip_prefix("site_url:"))
        .map(|u| u.trim().to_string())
        .expect("mkdocs.yml has a site_url")
}

fn alerts(path: &str) -> Vec<(String, Value)> {
    yaml(path)["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap().clone())
        .filter_map(|r| Some((r["alert"].as_str()?.to_string(), r["annotations"].clone())))
        .collect()
}

#[test]
fn every_alert_links_to_its_runbook() {
    let base = site_url();
    assert!(base.ends_with('/'), "site_url ends with a slash: {base}");
    let rules = alerts("deploy/prometheus/alerts.yaml");
    assert!(rules.len() >= 10, "{} alerts", rules.len());
    let mut pages = BTreeSet::new();
    for (alert, annotations) in &rules {
        let url = annotations["runbook_url"]
            .as_str()
            .unwrap_or_else(|| panic!("{alert} has no runbook_url"));
        assert_eq!(
            url,
            format!("{base}runbooks/{alert}/"),
            "{alert}: runbook_url is its page under the site's address"
        );
        let page = format!("docs/runbooks/{alert}.md");
        let text = read(&page);
        assert_eq!(
            text.lines().next(),
            Some(format!("# {alert}").as_str()),
            "{page} is about {alert}"
        );
        assert!(
            text.contains("```sh") || text.contains("](EtcdCertificateExpiringSoon.md#remedy)"),
            "{page} has steps to copy"
        );
        pages.insert(alert.clone());
    }
    // The runbook index lists every alert, and the chart's copy carries the same links.
    let index = read("docs/runbooks/index.md");
    for alert in &pages {
        assert!(
            index.contains(&format!("[{alert}]({alert}.md)")),
            "docs/runbooks/index.md lists {alert}"
        );
    }
    let charted = alerts("deploy/helm/etcd-operator/files/prometheus/alerts.yaml");
    assert_eq!(
        charted, rules,
        "the chart's alert rules are deploy/prometheus's"
    );
}

#[test]
fn every_example_is_shown_from_its_file() {
    let page = read("docs/examples.md");
    let files: BTreeSet<String> = std::fs::read_dir(repo_root().join("examples"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(files.len() >= 10, "{files:?}");
    for file in &files {
        assert!(
            page.contains(&format!("--8<-- \"examples/{file}\"")),
            "docs/examples.md includes examples/{file}"
        );
    }
    // No page carries a copy of an example's cluster: a name only an example uses appears in
    // a YAML block only through the include.
    for entry in std::fs::read_dir(repo_root().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "md") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for name in [
            "name: etcd-prod",
            "name: etcd-before-upgrade",
            "name: example-hourly",
        ] {
            assert!(
                !text.contains(name),
                "{} copies an example ({name}); include the file instead",
                path.display()
            );
        }
    }
}

#[test]
fn the_readme_is_a_five_minute_read() {
    let readme = read("README.md");
    let chars = readme.chars().count();
    assert!(
        chars < 8000,
        "README.md has {chars} characters, the aim is under 8,000"
    );
    for part in [
        "## Status",
        "### Support matrix",
        "## Not supported yet",
        "make demo",
        "make test",
        "helm install",
        "kubectl apply -f deploy/crds/",
        "scripts/build-image.sh",
    ] {
        assert!(readme.contains(part), "README.md has {part:?}");
    }
    // The support matrix is one table: Kubernetes, etcd, Helm.
    let matrix = readme.split("### Support matrix").nth(1).unwrap();
    for row in ["| Kubernetes |", "| etcd |", "| Helm |"] {
        assert!(matrix.contains(row), "the support matrix has {row}");
    }
}
